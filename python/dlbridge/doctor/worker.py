"""The child process that performs exchanges, so that a consumer which aborts the
process (PyTorch on negative strides) costs one case, not the whole report.

Protocol: one JSON plan on stdin; one JSON line per task on stdout, a "start"
line before the task runs and a "done" line after, so the parent knows which
task was running when the process died.
"""

from __future__ import annotations

import json
import sys
import warnings


class _Libraries(dict):
    """The libraries imported so far: each on the first task that needs it, so a worker
    restarted after a crash pays only for what its remaining tasks touch."""

    def __init__(self):
        super().__init__()
        self.missing = {}

    def absent(self, names) -> list:
        from .libraries import discover

        todo = [n for n in names if n not in self and n not in self.missing]
        if todo:
            loaded, missing = discover(todo)
            self.update(loaded)
            self.missing.update({k: v for k, v in missing.items() if k not in loaded})
        return [n for n in names if n not in self]


def _cannot_make(task) -> str | None:
    """Why the producer cannot make this case, when that is known without importing it."""
    from .cases import by_name
    from .libraries import cannot_make

    decide = cannot_make(task.get("producer") or "")
    if task["kind"] != "case" or decide is None:
        return None
    return decide(by_name(task["case"]).build())


def _run(task, libs: _Libraries):
    from . import exchange

    kind = task["kind"]
    if (why := _cannot_make(task)) is not None:
        # What exchange.run_case reports when make() raises NotApplicable, minus the import.
        return {"producer": task["producer"], "consumer": task["consumer"], "case": task["case"],
                "route": task["route"], "status": exchange.NA, "error": None, "readonly": None, "note": why}
    needed = [n for n in (task.get("producer"), task.get("consumer")) if n]
    absent = libs.absent(needed)
    if absent:
        return {**task, "status": exchange.NA,
                "note": "; ".join(f"{n}: {libs.missing.get(n, 'not loaded')}" for n in absent)}
    if kind == "producer":
        return exchange.producer_info(libs[task["producer"]])
    if kind == "probe":
        return exchange.probe_pair(libs, task["producer"], task["consumer"], task["number"], task["repeat"])
    return exchange.run_case(libs, task["producer"], task["consumer"], task["case"], task["route"])


def main() -> int:
    warnings.simplefilter("ignore")
    plan = json.load(sys.stdin)
    libs = _Libraries()
    out = sys.stdout
    for index, task in plan["tasks"]:
        out.write(json.dumps({"start": index}) + "\n")
        out.flush()
        try:
            result = _run(task, libs)
        except Exception as exc:  # a bug in an adapter is reported against its task
            result = {**task, "status": "fails", "error": {"type": type(exc).__name__, "message": str(exc)[:300],
                                                         "code": None, "hint": None}}
        out.write(json.dumps({"done": index, "result": result}, default=str) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
