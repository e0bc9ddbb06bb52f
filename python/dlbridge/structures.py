"""``convert`` and ``plan_convert`` of a structure of arrays: nested dicts, lists, tuples and
named tuples, Arrow tables and record batches (``tables``), and JAX pytree nodes where JAX is
imported, as ``jax.tree_util`` sees them.

The extension hands a call here (src/python/structures.cpp) when x is a dict, list or tuple,
when the call passes ``keep_non_arrays``, or when x was refused as an array and
``is_structure(x)`` says it is one. Each leaf is converted by the extension's single-array
``_convert_leaf``/``_plan_convert_leaf`` (convert without the hand-off here), so every leaf
gets the plan a call of its own would get; this module decides nothing about a hand-over. A refusal is re-raised as the same
class with the leaf's path in front of its message (``x["batch"][2]: ...``); a leaf that is no array
(unless ``keep_non_arrays``), or a class the walk cannot rebuild, is ``NotAnArrayError`` (a
``TypeError`` too) naming its path.
"""

from __future__ import annotations

import collections
import functools
import itertools
import sys
from typing import Any, Callable

from . import _core, tables
from .errors import DLPackError, NotAnArrayError

# The root of every path: the parameter's name in convert(x, to).
ROOT = "x"


class _Walk:
    """One call's walk: the single-array function and its keywords."""

    __slots__ = ("one", "to", "keywords", "keep", "jax", "call_refusal")

    def __init__(self, one: Callable[..., Any], to, keywords: dict, keep: bool) -> None:
        self.one = one
        self.to = to
        self.keywords = keywords
        self.keep = keep
        # JAX's registry is asked only where JAX is already imported (never imported here).
        self.jax = sys.modules.get("jax")
        self.call_refusal: Any = _UNASKED

    def call(self, value):
        if self.keywords:
            return self.one(value, self.to, **self.keywords)
        return self.one(value, self.to)

    def leaf(self, value, path: Callable[[], str]):
        try:
            return self.call(value)
        except Exception as exc:
            return self.refused(value, exc, path)

    def refused(self, value, exc: Exception, path: Callable[[], str]):
        if isinstance(value, (dict, list, tuple)):  # a subclass (a named tuple) met in each()'s map
            return self.walk(value, path)
        if _is_array_like(value):
            raise _with_path(exc, path())
        node = self.node(value, path)
        if node is not _NOT_A_NODE:
            return node
        if self.refuses_the_call(exc):
            raise _with_path(exc, path())  # about the target or a keyword, not about the value
        if self.keep:
            return _kept(value, self.one)
        if not isinstance(exc, TypeError) or isinstance(exc, DLPackError):
            raise _with_path(exc, path())
        # The single-array refusal's text says what was found; the class says why, for every leaf.
        raise NotAnArrayError(f"{path()}: {exc}",
                              "Pass keep_non_arrays=True to keep leaves that are not arrays as they are.") from None

    def refuses_the_call(self, exc: Exception) -> bool:
        """Whether a leaf's refusal is the call's own (a bad target or keyword), which the single-array
        function raises before it reads the value: an array of one element is refused the same way.
        Asked once per walk, and only of a value that is not an array."""
        if self.call_refusal is _UNASKED:
            try:
                self.call(_core.empty((1,)))
                self.call_refusal = None
            except Exception as probe:
                self.call_refusal = (type(probe), str(probe))
        return self.call_refusal == (type(exc), str(exc))

    def node(self, value, path: Callable[[], str]):
        """A refused value that is a structure after all (an Arrow table, a JAX node), walked."""
        if tables.is_table(value):
            return tables.walk(value, self, path)
        if self.jax is not None:
            return _jax_node(self, value, path)
        return _NOT_A_NODE

    def walk(self, x, path: Callable[[], str]):
        cls = type(x)
        if cls is dict or cls is collections.OrderedDict:
            keys = list(x)
            return cls(zip(keys, self.each(list(x.values()), lambda i: _key(path, keys[i]))))
        if cls is list:
            return self.each(x, lambda i: _index(path, i))
        if cls is tuple:
            return tuple(self.each(x, lambda i: _index(path, i)))
        if isinstance(x, tuple) and hasattr(cls, "_fields"):
            fields = cls._fields
            return cls(*self.each(x, lambda i: _attribute(path, fields[i])))
        if cls is collections.defaultdict:
            keys = list(x)
            out = collections.defaultdict(x.default_factory)
            out.update(zip(keys, self.each(list(x.values()), lambda i: _key(path, keys[i]))))
            return out
        if tables.is_table(x):
            return tables.walk(x, self, path)
        if isinstance(x, (dict, list, tuple)):
            if self.jax is not None:
                node = _jax_node(self, x, path)
                if node is not _NOT_A_NODE:
                    return node
            raise NotAnArrayError(f"{path()}: convert walks dict, list, tuple, named tuple, OrderedDict and "
                                  f"defaultdict; it cannot rebuild a {cls.__module__}.{cls.__qualname__}.",
                                  "Pass a dict, list or tuple of its items instead (or register the class "
                                  "with jax.tree_util where JAX is imported).")
        return self.leaf(x, path)

    def each(self, values, path_of: Callable[[int], Callable[[], str]]) -> list:
        """values (a list or tuple) converted in order; path_of(i) is the path of values[i].

        The arrays are handed to the single-array function by map, in C, with no Python code
        per leaf. A leaf it refuses (a nested structure among them) stops the map: the leaves
        before it are in out, so its index is len(out); it is walked or refused, and the map
        goes on with the rest."""
        if values and type(values[0]) in _WALKED:
            # A sequence of structures: each is walked (a leaf among them is met as one).
            return [self.walk(value, path_of(i)) for i, value in enumerate(values)]
        one = functools.partial(self.one, **self.keywords) if self.keywords else self.one
        to = itertools.repeat(self.to)
        rest = iter(values)
        out: list = []
        while True:
            try:
                out.extend(map(one, rest, to))
                return out
            except Exception as exc:
                i = len(out)
                out.append(self.refused(values[i], exc, path_of(i)))


_WALKED = frozenset([dict, list, tuple, collections.OrderedDict, collections.defaultdict])
_NOT_A_NODE = object()
_UNASKED = object()


def _root() -> str:
    return ROOT


def _index(path: Callable[[], str], i: int) -> Callable[[], str]:
    return lambda: f"{path()}[{i}]"


def _key(path: Callable[[], str], key) -> Callable[[], str]:
    return lambda: f"{path()}[{key!r}]"


def _attribute(path: Callable[[], str], name: str) -> Callable[[], str]:
    return lambda: f"{path()}.{name}"


def _is_array_like(value) -> bool:
    """Whether the single-array import would read value (so its refusal is about the array)."""
    if isinstance(value, _core.Tensor) or type(value).__name__ == "PyCapsule":
        return True
    cls = type(value)
    if any(hasattr(cls, name) for name in ("__dlpack__", "__array_interface__", "__cuda_array_interface__")):
        return True
    try:
        memoryview(value).release()
    except TypeError:
        return tables.is_arrow_array(value)
    return True


def _kept(value, one):
    # plan_convert says nothing about a kept leaf: its plan is None.
    return None if one is _core._plan_convert_leaf else value


def _with_path(exc: Exception, path: str) -> Exception:
    """exc's class with the leaf's path in front of its message; its cause kept."""
    if isinstance(exc, DLPackError):
        new: Exception = type(exc)(f"{path}: {exc.message}", exc.hint)
    else:
        text = f"{path}: {exc}"
        try:
            new = type(exc)(text)
        except Exception:
            return exc
        if str(new) != text:
            return exc
    # The producer's own exception stays the cause (ProducerError); the leaf's refusal is this one.
    new.__cause__ = exc.__cause__
    new.__suppress_context__ = True
    return new


def _jax_node(walk: _Walk, x, path: Callable[[], str]):
    """x's children converted and x rebuilt, where JAX's registry has x's type as a node."""
    tree_util = getattr(walk.jax, "tree_util", None)
    if tree_util is None or x is None:  # None is a leaf here, with or without JAX
        return _NOT_A_NODE
    try:
        children, treedef = tree_util.tree_flatten_with_path(x, is_leaf=lambda value: value is not x)
    except Exception:
        return _NOT_A_NODE
    if treedef.num_nodes == 1 and treedef.num_leaves == 1 and children and children[0][1] is x:
        return _NOT_A_NODE
    out = []
    for keys, value in children:
        key_text = tree_util.keystr(keys)
        out.append(walk.walk(value, (lambda text=key_text: f"{path()}{text}")))
    return tree_util.tree_unflatten(treedef, out)


def _walk(one: Callable[..., Any], x, to, device, copy, alias_readonly, keep_non_arrays: bool):
    keywords = {}
    if device is not None:
        keywords["device"] = device
    if copy is not None:
        keywords["copy"] = copy
    if alias_readonly is not None:
        keywords["alias_readonly"] = alias_readonly
    walk = _Walk(one, to, keywords, bool(keep_non_arrays))
    return walk.walk(x, _root)


def convert_structure(x, to, /, *, device=None, copy=None, alias_readonly=None, keep_non_arrays: bool = False):
    """dlbridge.convert of a structure: the same structure, each array converted as a call of its own."""
    return _walk(_core._convert_leaf, x, to, device, copy, alias_readonly, keep_non_arrays)


def plan_structure(x, to, /, *, device=None, copy=None, alias_readonly=None, keep_non_arrays: bool = False):
    """dlbridge.plan_convert of a structure: the same structure of ConversionPlans (None for a kept leaf)."""
    return _walk(_core._plan_convert_leaf, x, to, device, copy, alias_readonly, keep_non_arrays)


def is_structure(x) -> bool:
    """Whether x, refused as an array, is a structure convert walks: an Arrow table or record
    batch, or a node of JAX's registry (where JAX is imported)."""
    if tables.is_table(x):
        return True
    if isinstance(x, (dict, list, tuple)):
        return False  # walked before any import: here only when the call itself was refused
    jax = sys.modules.get("jax")
    tree_util = getattr(jax, "tree_util", None) if jax is not None else None
    if tree_util is None or x is None:
        return False
    try:
        leaves, treedef = tree_util.tree_flatten(x, is_leaf=lambda value: value is not x)
    except Exception:
        return False
    return not (treedef.num_nodes == 1 and treedef.num_leaves == 1 and leaves and leaves[0] is x)
