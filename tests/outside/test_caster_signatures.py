"""The casters name what they accept: help() of an extension shows each
tensor parameter's requirements (dtype, shape, order, device, writability) in
nb::ndarray's notation, for nanobind and pybind11 alike, and nanobind's stub
generator turns them into typing.Annotated[Any, dict(...)] stubs; a returned
dlbridge::ManagedTensor is a dlbridge.Tensor."""

from __future__ import annotations

import ast
import importlib
import os
import pydoc
import sys

import pytest

from conftest import run

SCALE = "x: ArrayLike[dtype=float32, device='cpu', order='C', writable=True]"
SCALED = "x: ArrayLike[dtype=float32, device='cpu', order='C']"


def signature_text(module, name: str) -> str:
    return pydoc.render_doc(getattr(module, name), renderer=pydoc.plaintext)


@pytest.mark.parametrize("name", ["scale_nanobind", "scale_pybind11"])
def test_help_of_an_example_names_its_tensor_requirements(name, extension_path):
    example = importlib.import_module(name)
    assert SCALE in signature_text(example, "scale")
    scaled = signature_text(example, "scaled")
    assert SCALED in scaled and "-> dlbridge.Tensor" in scaled
    assert "x: object" not in signature_text(example, "scale") + scaled


@pytest.mark.parametrize("name", ["casters_nanobind", "casters_pybind11"])
@pytest.mark.parametrize("function, shown", [
    ("float_matrix", "ArrayLike[dtype=float32, shape=(*, *)]"),
    ("on_cuda", "ArrayLike[device='cuda']"),
    ("compact", "ArrayLike[order='C']"),
    ("writable", "ArrayLike[writable=True]"),
    ("scalar_flag", "ArrayLike[dtype=bool, shape=(), host_accessible=True]"),
    ("pinned_row", "ArrayLike[dtype=complex128, shape=(*), device='cuda_host']"),
    ("view", "ArrayLike[]"),
    ("keep", "ArrayLike[]"),
])
def test_each_requirement_has_its_words(name, function, shown, extension_path):
    assert f": {shown}" in signature_text(importlib.import_module(name), function)


def test_nanobinds_stub_generator_writes_annotated_parameters(extensions, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(extensions), os.environ.get("PYTHONPATH", "")]))
    for module in ("scale_nanobind", "casters_nanobind"):
        run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", module, "-o", tmp_path / f"{module}.pyi"],
            env=env)
    scale = (tmp_path / "scale_nanobind.pyi").read_text()
    casters = (tmp_path / "casters_nanobind.pyi").read_text()
    for stub in (scale, casters):
        ast.parse(stub)  # valid Python, for type checkers
    assert ("def scale(x: Annotated[Any, dict(dtype='float32', device='cpu', order='C', writable=True)], "
            "factor: float) -> None:") in scale
    assert "-> dlbridge.Tensor:" in scale and "import dlbridge" in scale
    assert "def float_matrix(arg: Annotated[Any, dict(dtype='float32', shape=(None, None))], /) -> str" in casters
    assert "def pass_through(arg: Any, /) -> dlbridge.Tensor" in casters
