"""The doctor's terminal table: colour only when asked (a TTY), plain text otherwise."""

from __future__ import annotations

import io

_COLORS = {"zero-copy": "32", "copy": "33", "ok": "32", "partial": "33", "fails": "31", "crash": "31;1",
           "wrong": "31;1", "lost": "31", "kept": "32", "immutable": "32", "refused": "33"}


def _paint(text: str, color: bool, key: str | None = None) -> str:
    key = key or text.split()[0] if text else text
    code = _COLORS.get(key)
    return f"\033[{code}m{text}\033[0m" if color and code else text


def _speaks(pair: dict) -> str:
    asked = pair.get("asked") or {}
    mv = asked.get("max_version") if isinstance(asked, dict) else None
    ask = f"asks {tuple(mv)[0]}.{tuple(mv)[1]}" if mv else "asks legacy"
    answered = pair.get("answered") or "?"
    got = {"dltensor_versioned": "versioned", "dltensor": "legacy"}.get(answered, answered)
    return f"{ask} -> {got}"


def _cost(value) -> str:
    return "-" if value is None else (f"{value:.1f}" if value < 100 else f"{value:.0f}")


def _table(rows: list, color: bool, out) -> None:
    widths = [max(len(r[i][0]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [_paint(text, color, key) + " " * (w - len(text)) for (text, key), w in zip(r, widths)]
        out.write("  ".join(cells).rstrip() + "\n")


def render(report: dict, color: bool = False) -> str:
    out = io.StringIO()
    bold = (lambda s: f"\033[1m{s}\033[0m") if color else (lambda s: s)
    out.write(bold(f"dlbridge doctor — dlbridge {report['dlbridge'] or '(not importable)'}, "
                   f"Python {report['python']}, {report['platform']}") + "\n\n")
    out.write(bold("Libraries") + "\n")
    lib_rows = [[("library", None), ("version", None), ("__dlpack__(max_version=(1,3))", None), ("C exchange API", None)]]
    for lib in report["libraries"]:
        lib_rows.append([(lib["name"], None), (lib["version"], None),
                         (lib["speaks"] or ("not driven by doctor yet" if not lib["driven"] else "?"), None),
                         (lib["c_exchange_api"], None)])
    _table(lib_rows, color, out)
    if report["missing"]:
        out.write("  absent: " + ", ".join(f"{k} ({v})" for k, v in report["missing"].items()) + "\n")
    out.write("\n" + bold(f"Exchanges ({len(report['cases'])} cases per pair: {', '.join(report['cases'])})") + "\n")
    rows = [[("producer -> consumer", None), ("direct", None), ("via dlbridge", None), ("versions (direct)", None),
             ("read-only direct/via", None), ("us direct/via", None)]]
    for p in report["pairs"]:
        d, v = p["direct"], p["dlbridge"]
        rows.append([
            (f"{p['producer']} -> {p['consumer']}", None),
            (d["summary"], d["summary"].split()[0]),
            (v["summary"], v["summary"].split()[0]),
            (_speaks(p), None),
            (f"{d['readonly']}/{v['readonly']}", d["readonly"] if d["readonly"] in ("lost",) else v["readonly"]),
            (f"{_cost(p['cost_us']['direct'])}/{_cost(p['cost_us']['dlbridge'])}", None),
        ])
    _table(rows, color, out)
    broken = [(p, f) for p in report["pairs"] for f in p["direct"]["failures"]]
    if broken:
        out.write("\n" + bold("Direct-path failures") + " (✓ = dlbridge.convert succeeds there; "
                  "`dlbridge explain ID` for the catalogue entry)\n")
        for p, f in broken:
            fixed = "✓" if f["case"] in p["fixed_by_dlbridge"] else " "
            err = f["error"] or {}
            code = f" [{err['code']}]" if err.get("code") else ""
            out.write(f"  {fixed} {p['producer']} -> {p['consumer']} {f['case']}: "
                      f"{_paint(f['status'], color)} {err.get('type', '')}{code}: {err.get('message', '')[:110]}\n"
                      f"      catalogue: {f['catalogue']}\n")
    via_broken = [(p, f) for p in report["pairs"] for f in p["dlbridge"]["failures"]]
    if via_broken:
        out.write("\n" + bold("Refused or failed through dlbridge") + " (code and fix)\n")
        for p, f in via_broken:
            err = f["error"] or {}
            code = f" [{err['code']}]" if err.get("code") else ""
            hint = f" — {err['hint']}" if err.get("hint") else ""
            out.write(f"    {p['producer']} -> {p['consumer']} {f['case']}: {_paint(f['status'], color)} "
                      f"{err.get('type', '')}{code}{hint or ': ' + err.get('message', '')[:110]}\n")
    if not report["dlbridge_exchanges"]:
        out.write("\nThe dlbridge routes were not tried: " + report["missing"].get("dlbridge", "dlbridge absent") + "\n")
    out.write(f"\n{len(report['results'])} exchanges in {report['seconds']} s. "
              "zero-copy: data shared; copy: a copy was made; ok: nothing to share (size 0).\n")
    return out.getvalue()


def progress_bar(stream, width: int = 30):
    def show(done: int, total: int) -> None:
        filled = width * done // max(total, 1)
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} exchanges")
        stream.flush()

    return show
