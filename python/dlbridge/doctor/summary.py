"""What the doctor's results mean: one state per pair and route, findings grouped by cause,
the verdict, and the exit status. Computed from the results alone, so the renderers (text,
HTML, JSON) say the same thing.

A finding is one cause: the cases that went wrong the same way (same route, same outcome
for dlbridge, same catalogue record), listed as blocks of pairs that share their cases.
Its category says what it means for the user, most urgent first:

  dlbridge-broken   dlbridge gave a wrong value, crashed, hung, lost the read-only flag,
                    or failed without an error code: a bug in dlbridge
  dlbridge-refuses  dlbridge refused where it should not: the direct call works (the promise
                    is never worse), or one copy would have done (convert's copy=None allows it)
  fixed             the direct call fails or misbehaves and dlbridge.convert works
  impossible        both fail: dlbridge refuses with a code that says why
  not-tried         the direct call fails and dlbridge's route could not be tried
"""

from __future__ import annotations

import re

from .exchange import BROKEN, CRASH, FAILS, HANGS, NA, SUCCESS, WRONG, call_name

# The version of the report's JSON layout (docs/doctor.md); bumped when a field changes meaning.
SCHEMA_VERSION = 3

CATEGORIES = ("dlbridge-broken", "dlbridge-refuses", "fixed", "impossible", "not-tried")
# dlbridge's refusals that one copy cures. The doctor calls convert with copy=None, which allows
# that copy (docs/python-api.md), so under it these codes are dlbridge failing, not the data.
_COPY_CURES = ("read_only", "copy_required")
# A pair's state on one route, from its cases.
WORKS, PARTIAL, FAILING, UNSAFE, UNTRIED = "works", "partial", "fails", "unsafe", "n/a"
STATES = (WORKS, PARTIAL, FAILING, UNSAFE, UNTRIED)
LOST = "lost"  # the read-only flag did not arrive: the consumer may write data that must not change
# What dlbridge's refusal codes mean, for the verdict's "cannot be done because ...".
_CODE_REASONS = {
    "unsupported_dtype": "the consumer has no such dtype",
    "unsupported_layout": "the consumer cannot hold that shape or layout",
    "read_only": "the data is read-only and the consumer could write it",
    "unsupported_device_type": "the device is not served here",
    "device_unavailable": "the device is not present here",
    "copy_required": "only a copy would do and copying was refused",
}


def _catalogue_id(error: dict | None) -> str:
    from dlbridge.catalogue import identify

    error = error or {}
    return identify(error.get("message") or "", error.get("type") or "", error.get("code"))


def lost_error(result: dict) -> dict:
    """A result whose read-only flag was lost, described like a failure, so that it has a
    message and a catalogue record like one."""
    task = {"kind": "case", **result}
    return {"type": "ReadOnlyLost", "message": f"{call_name(task)} made read-only data writable", "code": None,
            "hint": None}


def _problem(result: dict) -> tuple[str, dict] | None:
    """(outcome, error) when a result is a problem: broken, or read-only data made writable."""
    if result["status"] in BROKEN:
        return result["status"], result.get("error") or {}
    if result.get("readonly") == LOST:
        return LOST, lost_error(result)
    return None


def pair_state(results: list) -> str:
    tried = [r for r in results if r["status"] != NA]
    if not tried:
        return UNTRIED
    if any(r["status"] in (WRONG, CRASH, HANGS) or r.get("readonly") == LOST for r in tried):
        return UNSAFE
    good = sum(r["status"] in SUCCESS for r in tried)
    return WORKS if good == len(tried) else FAILING if good == 0 else PARTIAL


def _signature(error: dict) -> str:
    """What tells uncatalogued messages apart: the class and the words, numbers blanked."""
    return f"{error.get('type')}: {re.sub(r'[0-9]+', '#', error.get('message') or '')}"


def _category(direct: dict | None, via: dict | None, via_problem) -> tuple[str, str] | None:
    """(category, which route the finding is about) for one case, or None when it is fine."""
    direct_problem = _problem(direct) if direct else None
    if via is not None and via["status"] != NA and via_problem is not None:
        outcome, error = via_problem
        if outcome != FAILS or not error.get("code"):
            return "dlbridge-broken", "dlbridge"
        if (direct is not None and direct["status"] in SUCCESS) or error["code"] in _COPY_CURES:
            return "dlbridge-refuses", "dlbridge"
        return "impossible", "dlbridge"
    if direct_problem is None:
        return None
    if via is None or via["status"] == NA:
        return "not-tried", "direct"
    return "fixed", "direct"


def _case_words(cases: list, applicable: int, dtype_cases: set) -> str:
    if len(cases) == applicable and applicable > 1:
        return "every case"
    dtypes = [c for c in cases if c in dtype_cases]
    layouts = [c for c in cases if c not in dtype_cases]
    words = dtypes if len(dtypes) <= 3 else [f"{len(dtypes)} dtypes"]
    return ", ".join(words + layouts)


def _blocks(cells: dict, applicable: dict, dtype_cases: set, case_order: list) -> list:
    """{(producer, consumer): [cases]} as few blocks as possible: producers that share a
    consumer and its cases, then consumers that share those producers and cases."""
    by_consumer = {}
    for (producer, consumer), cases in cells.items():
        cases = sorted(cases, key=case_order.index)
        words = _case_words(cases, applicable[(producer, consumer)], dtype_cases)
        by_consumer.setdefault((consumer, words), []).append((producer, cases))
    merged = {}
    for (consumer, words), members in by_consumer.items():
        merged.setdefault((tuple(p for p, _ in members), words), []).append((consumer, members))
    blocks = []
    for (producers, words), consumers in merged.items():
        count = sum(len(cases) for _, members in consumers for _, cases in members)
        blocks.append({"producers": list(producers), "consumers": [c for c, _ in consumers], "case_words": words,
                       "cases": sorted({case for _, members in consumers for _, cases in members for case in cases},
                                       key=case_order.index), "count": count})
    blocks.sort(key=lambda b: (-b["count"], b["consumers"], b["producers"]))
    return blocks


def _reason(errors: list) -> str:
    """The most common message among a finding's errors, with its class."""
    counts = {}
    for error in errors:
        text = f"{error.get('type')}: {error.get('message')}"
        counts[text] = counts.get(text, 0) + 1
    return max(counts, key=counts.get)


def _fix(category: str, consumers: list, errors: list, record) -> str:
    target = f'"{consumers[0]}"' if len(consumers) == 1 else '"<consumer>"'
    if category == "fixed":
        return f"dlbridge.convert(x, {target})"
    if category == "dlbridge-broken":
        return "a dlbridge bug: report it with the output of `dlbridge doctor --json`"
    hint = next((e.get("hint") for e in errors if e.get("hint")), None)
    if category == "dlbridge-refuses" and errors and errors[0].get("code") == "read_only":
        return f"dlbridge.convert(x, {target}, copy=True)"
    if hint:
        return hint
    if record is not None and record.fields["solutions"]:
        return record.fields["solutions"][0]
    return f"`dlbridge explain {record.id}`" if record is not None else "none known"


def summarise(report: dict) -> dict:
    from dlbridge.catalogue import by_id

    results = report["results"]
    case_order = list(report["cases"])
    dtype_cases = {c for c in case_order if not _is_layout(c)}
    by_key = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in results}
    pairs = [(p["producer"], p["consumer"]) for p in report["pairs"]]
    applicable = {pair: sum(by_key.get((*pair, c, "direct"), {"status": NA})["status"] != NA for c in case_order)
                  for pair in pairs}

    matrix = []
    for producer, consumer in pairs:
        mine = [r for r in results if (r["producer"], r["consumer"]) == (producer, consumer)]
        matrix.append({"producer": producer, "consumer": consumer,
                       "direct": pair_state([r for r in mine if r["route"] == "direct"]),
                       "dlbridge": pair_state([r for r in mine if r["route"] == "dlbridge"])})

    # Every problem on either route names its catalogue record, or is listed as uncatalogued.
    identified, uncatalogued = {}, []
    for key, result in by_key.items():
        problem = _problem(result)
        if problem is None:
            continue
        identified[key] = _catalogue_id(problem[1])
        if identified[key] == "uncatalogued":
            uncatalogued.append({"route": result["route"], "producer": result["producer"],
                                 "consumer": result["consumer"], "case": result["case"],
                                 "type": problem[1].get("type"), "message": problem[1].get("message")})

    groups = {}
    for producer, consumer in pairs:
        for case in case_order:
            direct = by_key.get((producer, consumer, case, "direct"))
            via = by_key.get((producer, consumer, case, "dlbridge"))
            via_problem = _problem(via) if via is not None and via["status"] != NA else None
            decided = _category(direct, via, via_problem)
            if decided is None:
                continue
            category, route = decided
            outcome, error = via_problem if route == "dlbridge" else _problem(direct)
            ident = identified[(producer, consumer, case, route)]
            key = (category, route, ident if ident != "uncatalogued" else _signature(error))
            group = groups.setdefault(key, {"category": category, "route": route, "catalogue": ident,
                                            "outcomes": {}, "cells": {}, "errors": [], "direct_catalogue": {}})
            group["outcomes"][outcome] = group["outcomes"].get(outcome, 0) + 1
            group["cells"].setdefault((producer, consumer), []).append(case)
            group["errors"].append(error)
            if route == "dlbridge" and (producer, consumer, case, "direct") in identified:
                key = (identified[(producer, consumer, case, "direct")], _problem(direct)[0])
                group["direct_catalogue"][key] = group["direct_catalogue"].get(key, 0) + 1

    records = by_id()
    findings = []
    for (category, route, _), group in groups.items():
        blocks = _blocks(group["cells"], applicable, dtype_cases, case_order)
        consumers = sorted({c for _, c in group["cells"]}, key=[p for p, _ in pairs].index)
        record = records.get(group["catalogue"])
        findings.append({
            "category": category,
            "route": route,
            "catalogue": group["catalogue"],
            "outcomes": group["outcomes"],
            "cases": sum(len(v) for v in group["cells"].values()),
            "pairs": len(group["cells"]),
            "blocks": blocks,
            "reason": _reason(group["errors"]),
            "fix": _fix(category, consumers, group["errors"], record),
            # What the direct call did in the same cases, when dlbridge's refusal is the finding.
            "direct": [{"catalogue": ident, "outcome": outcome, "cases": n} for (ident, outcome), n
                       in sorted(group["direct_catalogue"].items(), key=lambda kv: -kv[1])],
        })
    findings.sort(key=lambda f: (CATEGORIES.index(f["category"]), _severity(f), -f["cases"], f["catalogue"]))
    for number, finding in enumerate(findings, 1):
        finding["id"] = number

    counts = _counts(pairs, by_key, case_order, findings)
    problems = [f for f in findings if f["category"] in ("dlbridge-broken", "dlbridge-refuses")]
    # An installed library the doctor could not drive is a finding too: nothing was checked for it.
    left_out = [n for n, why in report.get("missing", {}).items() if why != "not installed" and n != "dlbridge"]
    exit_status = 1 if problems or left_out or not report.get("dlbridge_exchanges", True) else 0
    return {"schema_version": SCHEMA_VERSION, "exit_status": exit_status, "counts": counts, "matrix": matrix,
            "verdict": verdict(counts, findings, report), "findings": findings, "uncatalogued": uncatalogued}


def _is_layout(case: str) -> bool:
    from .cases import by_name

    return by_name(case).layout != "contiguous"


def _severity(finding: dict) -> int:
    """Crashes and wrong values before refusals, within a category."""
    worst = (HANGS, CRASH, WRONG, LOST, FAILS)
    return min(worst.index(o) for o in finding["outcomes"])


def _counts(pairs, by_key, case_order, findings) -> dict:
    failing_pairs, fixed_pairs, failing_cases, fixed_cases = set(), set(), 0, 0
    for pair in pairs:
        pair_fixed = True
        for case in case_order:
            direct = by_key.get((*pair, case, "direct"))
            via = by_key.get((*pair, case, "dlbridge"))
            if direct is None or _problem(direct) is None:
                continue
            failing_pairs.add(pair)
            failing_cases += 1
            if via is not None and via["status"] in SUCCESS and _problem(via) is None:
                fixed_cases += 1
            else:
                pair_fixed = False
        if pair in failing_pairs and pair_fixed:
            fixed_pairs.add(pair)
    by_category = {c: sum(f["cases"] for f in findings if f["category"] == c) for c in CATEGORIES}
    return {"pairs": len(pairs), "failing_pairs": len(failing_pairs), "fixed_pairs": len(fixed_pairs),
            "failing_cases": failing_cases, "fixed_cases": fixed_cases, "cases_by_category": by_category}


def _because(findings: list) -> str:
    reasons = {}
    for f in findings:
        if f["category"] != "impossible":
            continue
        code = f["catalogue"].split(".", 1)[-1]
        reason = _CODE_REASONS.get(code, code.replace("_", " "))
        reasons[reason] = reasons.get(reason, 0) + f["cases"]
    return "; ".join(f"{reason} ({n})" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]))


def _cases(n: int) -> str:
    return f"{n:,} case{'' if n == 1 else 's'}"


def verdict(counts: dict, findings: list, report: dict) -> list[str]:
    """The verdict in plain sentences, most important first."""
    lines = []
    if not report.get("dlbridge_exchanges", True):
        state = report.get("dlbridge_state") or "it could not be loaded"
        lines.append(f"dlbridge's route was not tried: {state}.")
    for name, why in report.get("missing", {}).items():
        if why != "not installed" and name != "dlbridge":
            lines.append(f"{name} was left out: {why}.")
    by_category = counts["cases_by_category"]
    broken = [f for f in findings if f["category"] == "dlbridge-broken"]
    worse = [f for f in findings if f["category"] == "dlbridge-refuses"]
    if not counts["pairs"]:
        lines.append("No pairs were tried: the doctor found no installed library it drives.")
    elif counts["failing_pairs"]:
        pairs, cases = counts["failing_pairs"], counts["failing_cases"]
        lines.append(f"dlbridge makes {counts['fixed_pairs']} of {pairs} failing pair{'' if pairs == 1 else 's'} work "
                     f"({counts['fixed_cases']:,} of {_cases(cases)} that fail{'s' if cases == 1 else ''} directly).")
    else:
        lines.append(f"Every one of the {counts['pairs']} pairs works directly.")
    if by_category["impossible"]:
        lines.append(f"{_cases(by_category['impossible'])} cannot be done either way: {_because(findings)}.")
    if broken:
        lines.append(f"dlbridge itself misbehaves in {_cases(by_category['dlbridge-broken'])} "
                     f"(findings {', '.join(str(f['id']) for f in broken)}): a bug.")
    if worse:
        ids = ", ".join(sorted({f["catalogue"] for f in worse}))
        lines.append(f"dlbridge refuses {_cases(by_category['dlbridge-refuses'])} it should do ({ids}): "
                     "the direct call does them, or one copy would.")
    if not broken and not worse and report.get("dlbridge_exchanges", True):
        lines.append("Nothing that works directly fails through dlbridge.")
    return lines
