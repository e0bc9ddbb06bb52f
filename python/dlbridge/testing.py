"""DLPack conformance as a pytest plugin, for other libraries' test suites.

    pytest -p dlbridge.testing --dlpack-producer mylib:make_array --dlpack-consumer mylib:from_dlpack

adds one test per observable DLPack 1.3 rule and per named producer or consumer, with ids such as
``dlpack-producer::P2.versioned[mylib:make_array]``. A producer is ``module:factory`` with
``factory(shape, dtype, readonly=False)`` returning a new CPU array of exactly that shape and dtype (or a
short name: numpy, torch, jax, tvm_ffi, dlbridge, tensorflow, paddle, arrow, warp, mlx); a consumer is
``module:callable`` taking one producer (or a short name: numpy, torch, jax, tvm_ffi, dlbridge). The rules
are those of ``dlbridge check`` (producers) and ``dlbridge.check_consumer`` (consumers).

Before any rule runs, the plugin checks what it was given: a module that cannot be imported, a name it
does not have, a factory that cannot be called as ``factory(shape, dtype)`` or that returns another shape
or dtype than asked stop the run with one usage error (exit status 4) naming each problem and the
factory. A factory without ``readonly`` (a library with no read-only arrays), or one that raises or
returns a writable array for ``readonly=True``, has the rules that need a read-only array skipped, with
that reason. A rule that cannot be observed for the library is skipped with the reason; a broken rule
fails with the rule and the evidence. Every report points at the factory or callable (its file and line).

Without either option the plugin adds nothing, so it is safe to enable in ``addopts``. Importing this
module does not import pytest; it is imported when pytest loads the plugin.
"""

from __future__ import annotations


def pytest_addoption(parser):
    group = parser.getgroup("dlpack", "DLPack conformance (dlbridge)")
    group.addoption("--dlpack-producer", action="append", default=[], metavar="MODULE:FACTORY",
                    help="check this producer against every DLPack producer rule (repeatable)")
    group.addoption("--dlpack-consumer", action="append", default=[], metavar="MODULE:CALLABLE",
                    help="check this from_dlpack-like callable against every DLPack consumer rule (repeatable)")


def pytest_configure(config):
    producers, consumers = config.getoption("dlpack_producer"), config.getoption("dlpack_consumer")
    if not producers and not consumers:
        return
    import pytest

    from .conformance_setup import subjects

    found, errors = subjects(producers, consumers)
    if errors:
        raise pytest.UsageError("dlbridge.testing: no DLPack rule was run:\n  " + "\n  ".join(errors))
    from .conformance_items import ConformancePlugin

    config.pluginmanager.register(ConformancePlugin(found), "dlbridge-conformance")
