"""The doctor's report as one self-contained HTML page: inline CSS, no scripts, no network."""

from __future__ import annotations

import html

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
.zero-copy,.ok,.kept,.immutable{background:#d9f2d9}
.copy,.partial,.refused{background:#fff2cc}
.fails,.crash,.wrong,.lost{background:#f8d0d0}
.na{color:#999}
code{font-size:12px}
small{color:#555}
"""


def _cls(label: str) -> str:
    key = (label or "").split()[0] if label else "na"
    return "na" if key == "n/a" else key


def _cell(label, title: str = "") -> str:
    label = label or "n/a"
    t = f' title="{html.escape(title)}"' if title else ""
    return f'<td class="{_cls(label)}"{t}>{html.escape(label)}</td>'


def _error(err: dict | None) -> str:
    if not err:
        return ""
    code = f" [{err['code']}]" if err.get("code") else ""
    hint = f" — {err['hint']}" if err.get("hint") else ""
    return f"{err.get('type', '')}{code}: {err.get('message', '')}{hint}"


def _catalogue_link(ident: str) -> str:
    from dlbridge.catalogue import by_id

    record = by_id().get(ident)
    if record is None:
        return f"<small>[{html.escape(ident)}]</small>"
    return f'<small>[<a href="{html.escape(record.link)}">{html.escape(ident)}</a>]</small>'


def render(report: dict) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<title>dlbridge doctor</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>dlbridge doctor</h1><p>dlbridge {e(str(report['dlbridge']))} · Python {e(report['python'])} · "
        f"{e(report['platform'])} · {len(report['results'])} exchanges in {report['seconds']} s</p>",
        "<h2>Libraries</h2><table><tr><th>library</th><th>version</th>"
        "<th>answer to max_version=(1,3)</th><th>C exchange API</th></tr>",
    ]
    for lib in report["libraries"]:
        parts.append(f"<tr><td>{e(lib['name'])}</td><td>{e(lib['version'])}</td>"
                     f"<td>{e(str(lib['speaks']))}</td><td>{e(lib['c_exchange_api'])}</td></tr>")
    parts.append("</table>")
    if report["missing"]:
        parts.append("<p>Absent: " + ", ".join(f"{e(k)} <small>({e(v)})</small>" for k, v in report["missing"].items()) + "</p>")

    parts.append("<h2>Pairs</h2><table><tr><th>producer → consumer</th><th>direct</th><th>via dlbridge</th>"
                 "<th>fixed by dlbridge</th><th>asked → answered</th><th>read-only direct / via</th>"
                 "<th>µs direct / via</th></tr>")
    for p in report["pairs"]:
        d, v = p["direct"], p["dlbridge"]
        parts.append(
            f"<tr><td>{e(p['producer'])} → {e(p['consumer'])}</td>{_cell(d['summary'])}{_cell(v['summary'])}"
            f"<td>{e(', '.join(p['fixed_by_dlbridge']))}</td>"
            f"<td><code>{e(str(p['asked']))}</code> → {e(str(p['answered']))}</td>"
            f"<td>{e(d['readonly'])} / {e(v['readonly'])}</td>"
            f"<td>{e(str(p['cost_us']['direct']))} / {e(str(p['cost_us']['dlbridge']))}</td></tr>")
    parts.append("</table>")

    # The full matrix: one row per pair and route, one column per case.
    parts.append("<h2>Matrix</h2><table><tr><th>pair</th><th>route</th>"
                 + "".join(f"<th>{e(c)}</th>" for c in report["cases"]) + "</tr>")
    index = {(r["producer"], r["consumer"], r["route"], r["case"]): r for r in report["results"]}
    for p in report["pairs"]:
        for route in ("direct", "dlbridge"):
            row = [f"<tr><td>{e(p['producer'])} → {e(p['consumer'])}</td><td>{route}</td>"]
            for c in report["cases"]:
                r = index.get((p["producer"], p["consumer"], route, c))
                if r is None:
                    row.append(_cell("n/a"))
                else:
                    row.append(_cell(r["status"], _error(r.get("error")) or (r.get("note") or "")))
            parts.append("".join(row) + "</tr>")
    parts.append("</table><p><small>Hover a cell for the error, its code and the fix.</small></p>")

    failures = [(p, f) for p in report["pairs"] for route in ("direct", "dlbridge") for f in p[route]["failures"]]
    if failures:
        parts.append("<h2>Failures</h2><ul>")
        for p, f in failures:
            parts.append(f"<li>{e(p['producer'])} → {e(p['consumer'])} <b>{e(f['case'])}</b>: "
                         f"{e(f['status'])} — {e(_error(f['error']))} {_catalogue_link(f['catalogue'])}</li>")
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
