"""``dlbridge doctor``: which installed array libraries exchange with which, directly
and through dlbridge, case by case, what dlbridge.convert fixes, and what to do about the rest.

The report (``run``) is JSON-ready; its layout is documented in docs/doctor.md and versioned
by ``report["schema_version"]``. ``report["summary"]`` (summary.py) holds the verdict, the
findings grouped by cause and the exit status that ``main`` returns.
"""

from __future__ import annotations

import json
import platform
import sys
import time

from .cases import CASES, available
from .libraries import KNOWN, drives, importable
from .runner import DEADLINE, run_tasks
from .summary import SCHEMA_VERSION, summarise

ROUTES = ("direct", "dlbridge")
SUCCESS = ("zero-copy", "copy", "ok")
BROKEN = ("fails", "wrong", "crash", "hangs")
EXIT_USAGE = 2


class UsageError(ValueError):
    """A bad argument: an unknown library name."""


def _dlbridge_state() -> str | None:
    """None when dlbridge can take part in exchanges, else why not."""
    try:
        import dlbridge
    except Exception as exc:
        return f"import failed: {type(exc).__name__}: {exc}"
    absent = [n for n in ("from_dlpack", "Tensor") if not hasattr(dlbridge, n)]
    if absent:
        return "the extension lacks " + ", ".join(absent)
    return None


def plan(names=None, number=50, repeat=5):
    """The libraries to drive and the tasks for them. dlbridge's route is tried whatever the
    names are: dlbridge is a library of the matrix only when named (or by default)."""
    names = list(dict.fromkeys(names or KNOWN))
    unknown = [n for n in names if n not in KNOWN]
    if unknown:
        raise UsageError(f"unknown to the doctor: {', '.join(unknown)}; known: {', '.join(KNOWN)}")
    present = [n for n in names if importable(n)]
    missing = {n: "not installed" for n in names if n not in present}
    bridge = _dlbridge_state()
    if bridge is not None and "dlbridge" in present:
        present.remove("dlbridge")
        missing["dlbridge"] = bridge
    driven = [n for n in present if drives(n)]
    tasks = [{"kind": "producer", "producer": n} for n in present]
    cases = available(CASES)
    for p in driven:
        for c in driven:
            tasks.append({"kind": "probe", "producer": p, "consumer": c, "number": number, "repeat": repeat})
            for case in cases:
                for route in ROUTES:
                    if route == "dlbridge" and bridge is not None:
                        continue
                    tasks.append({"kind": "case", "producer": p, "consumer": c, "case": case.name, "route": route})
    return present, driven, missing, bridge, [c.name for c in cases], tasks


def _catalogue_id(error: dict | None) -> str:
    """The catalogue record of the message a failure met (`dlbridge explain ID`), or "uncatalogued"."""
    from dlbridge.catalogue import identify

    error = error or {}
    return identify(error.get("message") or "", error.get("type") or "", error.get("code"))


def _summarise(results: list) -> dict:
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    tried = [r for r in results if r["status"] != "n/a"]
    good = [r for r in tried if r["status"] in SUCCESS]
    if not tried:
        label = "n/a"
    elif len(good) == len(tried):
        label = "copy" if any(r["status"] == "copy" for r in good) else "zero-copy"
    elif not good:
        label = "fails"
    else:
        label = f"partial {len(good)}/{len(tried)}"
    readonly = next((r["readonly"] for r in results if r["case"] == "read-only" and r["readonly"]), None)
    if readonly is None:
        ro = next((r for r in results if r["case"] == "read-only"), None)
        readonly = "refused" if ro and ro["status"] in BROKEN else "n/a"
    failures = [{"case": r["case"], "status": r["status"], "error": r["error"], "catalogue": _catalogue_id(r["error"])}
                for r in tried if r["status"] in BROKEN]
    copies = [{"case": r["case"], "note": r.get("note")} for r in tried if r["status"] == "copy"]
    return {"summary": label, "counts": counts, "readonly": readonly, "failures": failures, "copies": copies}


def run(names=None, progress=None, number=50, repeat=5, deadline=None) -> dict:
    started = time.perf_counter()
    present, driven, missing, bridge, case_names, tasks = plan(names, number, repeat)
    results, stalled = run_tasks(present, tasks, progress=progress, deadline=deadline or DEADLINE)
    missing.update(stalled)
    producers = {r["name"]: r for t, r in zip(tasks, results) if t["kind"] == "producer" and "name" in r}
    for name, info in producers.items():
        if "error" in info.get("facts", {}) and name not in missing:
            missing[name] = f"its facts could not be learnt: {info['facts']['error']}"
    for t, r in zip(tasks, results):
        if t["kind"] == "producer" and "name" not in r and t["producer"] not in missing:
            missing[t["producer"]] = r.get("note") or "could not be loaded"
    cases = [r for t, r in zip(tasks, results) if t["kind"] == "case"]
    probes = {(r["producer"], r["consumer"]): r for t, r in zip(tasks, results) if t["kind"] == "probe"}
    pairs = []
    for p in driven:
        for c in driven:
            if p in missing or c in missing:
                continue
            mine = [r for r in cases if r["producer"] == p and r["consumer"] == c]
            entry = {"producer": p, "consumer": c}
            probe = probes.get((p, c), {})
            entry["asked"] = probe.get("asked")
            entry["answered"] = probe.get("answered")
            entry["cost_us"] = probe.get("cost_us", {"direct": None, "dlbridge": None})
            for route in ROUTES:
                entry[route] = _summarise([r for r in mine if r["route"] == route])
            direct = {r["case"]: r["status"] for r in mine if r["route"] == "direct"}
            via = {r["case"]: r["status"] for r in mine if r["route"] == "dlbridge"}
            entry["fixed_by_dlbridge"] = [k for k, s in direct.items() if s in BROKEN and via.get(k) in SUCCESS]
            pairs.append(entry)
    kept = {(p["producer"], p["consumer"]) for p in pairs}
    report = {
        "schema_version": SCHEMA_VERSION,
        "tool": "dlbridge doctor",
        "dlbridge": _dlbridge_version(),
        "dlbridge_exchanges": bridge is None,
        "dlbridge_state": bridge,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "libraries": [producers[n] for n in present if n in producers and n not in missing],
        "missing": missing,
        "cases": case_names,
        "pairs": pairs,
        "results": [r for r in cases if (r["producer"], r["consumer"]) in kept],
        "deadline_s": deadline or DEADLINE,
    }
    report["summary"] = summarise(report)
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


def _dlbridge_version():
    try:
        import dlbridge

        return dlbridge.__version__
    except Exception:
        return None


def main(args) -> int:
    from . import render_html, render_text

    names = [n.strip() for n in args.libraries.split(",") if n.strip()] if getattr(args, "libraries", None) else None
    show_progress = sys.stderr.isatty() and not getattr(args, "no_progress", False)
    try:
        report = run(names, progress=render_text.progress_bar(sys.stderr) if show_progress else None,
                     deadline=getattr(args, "timeout", None))
    except UsageError as exc:
        print(f"dlbridge doctor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if show_progress:
            sys.stderr.write("\r\033[K")
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html.render(report))
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        color = {"always": True, "never": False}.get(getattr(args, "color", "auto"), sys.stdout.isatty())
        sys.stdout.write(render_text.render(report, color=color, verbose=getattr(args, "verbose", False),
                                            unicode=render_text.can_print_symbols(sys.stdout)))
        if args.html:
            sys.stdout.write(f"\nHTML report written to {args.html}\n")
    return report["summary"]["exit_status"]
