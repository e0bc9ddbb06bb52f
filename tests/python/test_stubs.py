"""The checked-in type stubs describe what dlbridge._core really exposes."""

import ast
import inspect
import pathlib
import re

import pytest

import dlbridge
from dlbridge import _core

PACKAGE = pathlib.Path(dlbridge.__file__).parent
STUB = ast.parse((PACKAGE / "_core.pyi").read_text())


def stub_names(tree=STUB):
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names[target.id] = node
    return names


def stub_function(path):
    node = stub_names()[path[0]]
    for part in path[1:]:
        node = stub_names(node)[part]
    return node


def stub_parameters(fn):
    a = fn.args
    positional = [p.arg for p in a.posonlyargs + a.args if p.arg != "self"]
    return positional, [p.arg for p in a.kwonlyargs]


def binding_parameters(obj):
    if not hasattr(obj, "__nb_signature__"):
        # A plain CPython method (Tensor.__dlpack__ is one, for speed) carries
        # its signature as __text_signature__.
        params = inspect.signature(obj).parameters.values()
        return ([p.name for p in params if p.kind == p.POSITIONAL_ONLY and p.name != "self"],
                [p.name for p in params if p.kind == p.KEYWORD_ONLY])
    # nanobind keeps the signature it shows in __nb_signature__ (and in the
    # first line of __doc__): "def name(x: object, *, device: ... = \\0)".
    signature = obj.__nb_signature__[0][0]
    params = signature[signature.index("(") + 1: signature.rindex(") ->")]
    positional, keyword, seen_star = [], [], False
    for part in re.split(r",\s*(?![^\[]*\])", params):
        name = part.split(":")[0].split("=")[0].strip()
        if name == "*":
            seen_star = True
        elif name and name not in ("self", "/"):
            (keyword if seen_star else positional).append(name)
    return positional, keyword


def test_py_typed_marker_is_shipped():
    assert (PACKAGE / "py.typed").is_file()


def test_every_public_name_is_typed():
    stubbed = stub_names()
    for name in dlbridge.__all__:
        obj = getattr(dlbridge, name)
        if getattr(_core, name, None) is obj:
            assert name in stubbed, f"{name} is public but missing from _core.pyi"
        else:
            # Pure-Python names are typed by their own source in the package.
            module = obj.__module__
            assert module.startswith("dlbridge.") and module != "dlbridge._core", name
            assert (PACKAGE / (module.split(".", 1)[1].replace(".", "/") + ".py")).is_file(), name


def test_stubs_name_nothing_the_extension_lacks():
    for name in stub_names():
        if name in ("DeviceLike", "DTypeLike"):
            continue  # aliases that exist for type checkers only
        assert hasattr(_core, name), f"_core.pyi declares {name}, which _core does not have"


def test_every_public_extension_name_is_stubbed():
    stubbed = stub_names()
    public = [n for n in dir(_core) if not n.startswith("_") or n == "__version__"]
    for name in public:
        assert name in stubbed, f"_core.{name} is missing from _core.pyi"


@pytest.mark.parametrize("path", [
    ("from_dlpack",), ("to_dlpack",), ("empty",), ("inspect_capsule",),
    ("Tensor", "__dlpack__"), ("Tensor", "copy"), ("Device", "__init__"), ("DType", "__init__"),
])
def test_stub_parameter_names_match_the_binding(path):
    obj = _core
    for part in path:
        obj = getattr(obj, part)
    assert stub_parameters(stub_function(path)) == binding_parameters(obj)


def test_dlpack_signatures_follow_the_array_api():
    assert binding_parameters(_core.Tensor.__dlpack__) == ([], ["stream", "max_version", "dl_device", "copy"])
    assert binding_parameters(_core.from_dlpack) == (["x"], ["device", "copy"])
    assert binding_parameters(_core.to_dlpack) == (["x"], ["stream", "max_version", "dl_device", "copy"])


def test_docstrings_carry_the_signature_and_a_description():
    for fn in (_core.to_dlpack, _core.empty, _core.inspect_capsule):
        first, _, rest = fn.__doc__.partition("\n")
        assert first.startswith(fn.__name__ + "(")
        assert rest.strip(), f"{fn.__name__} has no description"
    # Plain CPython functions (from_dlpack and __dlpack__, for speed): the
    # signature lives in __text_signature__.
    assert _core.from_dlpack.__text_signature__ == "(x, /, *, device=None, copy=None)"
    assert _core.from_dlpack.__doc__.startswith("Import x")
    dlpack = _core.Tensor.__dlpack__
    assert dlpack.__text_signature__.startswith("($self, /, *, stream=None")
    assert dlpack.__doc__.startswith("Export as a DLPack capsule")


def test_stub_docstrings_match_the_binding_docstrings():
    for name in ("from_dlpack", "to_dlpack", "empty", "inspect_capsule"):
        stub_doc = ast.get_docstring(stub_function((name,)))
        fn = getattr(_core, name)
        # nanobind puts the signature on the docstring's first line; CPython
        # keeps it apart, in __text_signature__.
        binding_doc = fn.__doc__.strip() if getattr(fn, "__text_signature__", None) \
            else fn.__doc__.partition("\n")[2].strip()
        assert stub_doc == binding_doc


def test_device_type_members_in_stub_match():
    members = {n.targets[0].id: n.value.value for n in stub_function(("DeviceType",)).body
               if isinstance(n, ast.Assign)}
    assert members == {m.name: int(m) for m in dlbridge.DeviceType}


def test_stub_is_valid_for_inspect_signature_of_python_callers():
    # Parameters a user passes by keyword must be accepted by the binding.
    t = dlbridge.empty(2)
    params = stub_parameters(stub_function(("Tensor", "__dlpack__")))[1]
    t.__dlpack__(**{name: None for name in params})
    assert inspect.isclass(dlbridge.Tensor)


def test_the_committed_stub_is_what_the_generator_makes(tmp_path):
    """_core.pyi is generated (scripts/stubs: nanobind's stubgen plus _core.stubgen-patterns), as
    nanobind checks its own stubs: a binding changed without regenerating fails here."""
    import subprocess
    import sys

    pytest.importorskip("nanobind.stubgen")  # a build dependency, absent where only the wheel is
    source = pathlib.Path(__file__).resolve().parents[2] / "python" / "dlbridge"
    out = tmp_path / "_core.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "dlbridge._core",
                    "-p", str(source / "_core.stubgen-patterns"), "-o", str(out)], check=True)
    generated = out.read_text()
    # Python 3.12 (PEP 688) shows the buffer protocol's C slots as __buffer__ and
    # __release_buffer__ methods; the committed stub is generated on 3.11, which does not.
    generated = re.sub(r"\n    def __(release_)?buffer__\(self, [^)]*\):\n        \"\"\"\n.*?\n        \"\"\"\n",
                       "", generated, flags=re.S)
    assert generated == (source / "_core.pyi").read_text(), "run scripts/stubs and commit the result"


def test_the_committed_errors_stub_is_what_the_generator_makes():
    """errors.pyi is generated from the C++ error table (dlbridge._errors_stub), because errors.py
    builds its classes at run time where type checkers cannot see them."""
    from dlbridge import _errors_stub

    assert (PACKAGE / "errors.pyi").read_text() == _errors_stub.render(), \
        "run scripts/stubs and commit the result"


def test_errors_stub_declares_every_class_errors_py_makes_with_its_bases():
    from dlbridge import errors

    declared = {node.name: [ast.unparse(b) for b in node.bases]
                for node in ast.parse((PACKAGE / "errors.pyi").read_text()).body
                if isinstance(node, ast.ClassDef)}
    made = {cls.__name__: [b.__name__ for b in cls.__bases__] for cls in errors.ERROR_CLASSES.values()}
    made["DLPackError"] = ["BufferError"]
    assert declared == made
    stub_all = next(node for node in ast.parse((PACKAGE / "errors.pyi").read_text()).body
                    if isinstance(node, ast.Assign) and node.targets[0].id == "__all__")
    assert ast.literal_eval(stub_all.value) == errors.__all__


def test_errors_stub_generator_writes_the_file_and_refuses_a_wrong_call(tmp_path, capsys):
    from dlbridge import _errors_stub

    out = tmp_path / "errors.pyi"
    assert _errors_stub.main([str(out)]) == 0
    assert out.read_text() == _errors_stub.render()
    assert _errors_stub.main([]) == 2
    assert "usage:" in capsys.readouterr().err
