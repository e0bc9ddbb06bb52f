"""Facts about the installed release of a library, as opposed to the pinned one a module measured.

A library module states its facts for the release it was measured on (``TARGET``). Where an
older release behaves differently, the module defines ``for_installed(target, facts)``: it
looks at the imported library (an attribute, a small probe, or its version checked against the
ranges the module states) and returns the Target for that release, recording each fact in
``facts`` as observed (looked at in this process) or assumed (a release the module has never
measured gets the cautious reading). ``dlbridge.libraries.installed_target`` calls it once per
process and library; ``dlbridge doctor`` reports the record.
"""

from __future__ import annotations

import dataclasses
import importlib
import re


@dataclasses.dataclass
class Facts:
    """What one library's facts rest on in this process."""

    version: str = "?"
    observed: list = dataclasses.field(default_factory=list)  # "fact: what was seen"
    assumed: list = dataclasses.field(default_factory=list)   # "fact: why it is assumed"

    def seen(self, text: str) -> None:
        self.observed.append(text)

    def assume(self, text: str) -> None:
        self.assumed.append(text)

    def as_dict(self) -> dict:
        return {"version": self.version, "observed": list(self.observed), "assumed": list(self.assumed)}


def version_text(module_name: str) -> str:
    """The imported top-level package's __version__ ("?" where it states none)."""
    try:
        module = importlib.import_module(module_name.split(".")[0])
        return str(getattr(module, "__version__", None) or getattr(importlib.import_module(module_name),
                                                                  "__version__", "?"))
    except ImportError:
        return "?"


def release(text: str) -> tuple[int, ...]:
    """The leading release numbers of a version string ("0.1.8.post2" -> (0, 1, 8)); () when none."""
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def at_least(text: str, *minimum: int) -> bool:
    """Whether the release is known and not older than minimum (an unknown version is not)."""
    found = release(text)
    return bool(found) and found >= minimum
