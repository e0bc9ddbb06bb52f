"""The doctor's report as one self-contained HTML page (inline CSS, no scripts, no network):
the same first screen and findings as the terminal -- libraries, the matrix of pairs, the
verdict (``<section id="verdict">``), the findings grouped by cause -- then every pair and
every failing case under <details>."""

from __future__ import annotations

import html

from .render_text import HEADINGS, LEGEND, SYMBOLS, _direct_words, _reason, _speaks
from .summary import CATEGORIES, FAILING, PARTIAL, UNSAFE, UNTRIED, WORKS, lost_error

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:78em;padding:0 1em;color:#1d1d1f}
h1{font-size:1.5em;margin:0}
h2{font-size:1.15em;margin:1.6em 0 .5em}
h3{font-size:1em;margin:1.2em 0 .3em}
.meta{color:#555;margin:.2em 0 0}
table{border-collapse:collapse;margin:.4em 0}
th,td{border:1px solid #d0d0d0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3;font-weight:600}
.matrix td{text-align:center;font-family:ui-monospace,monospace;white-space:nowrap}
.s{display:inline-block;width:1.3em;border-radius:3px}
.works{background:#d6f0d6}.partial{background:#fff0c2}.fails{background:#f6cfcf}.unsafe{background:#d9534f;color:#fff}
.na{color:#999}
#verdict{border-left:5px solid #2e7d32;background:#f1f8f1;padding:.6em 1em}
#verdict.bad{border-color:#c62828;background:#fdf0f0}
#verdict p{margin:.25em 0}
.finding{margin:.5em 0 .9em}
.finding .head{font-weight:600}
.finding ul{margin:.2em 0;padding-left:1.5em}
.finding .why{color:#333}
.fix{font-family:ui-monospace,monospace;background:#f3f3f3;padding:0 .3em}
code{font-size:.92em}
small{color:#555}
"""


def _e(text) -> str:
    return html.escape("" if text is None else str(text))


def _symbol(state: str) -> str:
    css = {WORKS: "works", PARTIAL: "partial", FAILING: "fails", UNSAFE: "unsafe", UNTRIED: "na"}[state]
    return f'<span class="s {css}" title="{_e(LEGEND[state])}">{_e(SYMBOLS[state])}</span>'


def _catalogue_link(ident: str) -> str:
    from dlbridge.catalogue import by_id

    record = by_id().get(ident)
    if record is None:
        return f"<code>{_e(ident)}</code>"
    return f'<a href="{_e(record.link)}"><code>{_e(ident)}</code></a>'


def _libraries(report: dict) -> list[str]:
    parts = ["<h2>Libraries</h2><p><small>What each exports when asked for DLPack 1.3; + C API: it has the C "
             "exchange API.</small></p><table>"]
    libraries = report["libraries"]
    # Two libraries a row, as on the terminal, so the verdict stays on the first screen.
    for start in range(0, len(libraries), 2):
        cells = [f"<td><b>{_e(lib['name'])}</b></td><td>{_e(lib['version'])}</td><td>{_e(_speaks(lib))}</td>"
                 for lib in libraries[start:start + 2]]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    if report["missing"]:
        parts.append("<p><small>Absent: " + ", ".join(f"{_e(k)} ({_e(v)})" for k, v in report["missing"].items())
                     + "</small></p>")
    return parts


def _matrix(report: dict) -> list[str]:
    cells = {(m["producer"], m["consumer"]): m for m in report["summary"]["matrix"]}
    names = list(dict.fromkeys([p for p, _ in cells] + [c for _, c in cells]))
    if not names:
        return ["<h2>Pairs</h2><p>No pairs: the doctor needs at least one installed library it drives.</p>"]
    legend = " ".join(f"{_symbol(s)} {_e(LEGEND[s])}" for s in (WORKS, PARTIAL, FAILING, UNSAFE))
    parts = ["<h2>Pairs</h2><p>Each cell: the direct call, then through dlbridge, for producer (row) → consumer "
             f"(column).<br>{legend}</p>", '<table class="matrix"><tr><th>producer \\ consumer</th>']
    parts += [f"<th>{_e(n)}</th>" for n in names]
    parts.append("</tr>")
    for producer in names:
        row = [f"<tr><th>{_e(producer)}</th>"]
        for consumer in names:
            m = cells.get((producer, consumer))
            if m is None:
                row.append(f"<td>{_symbol(UNTRIED)}</td>")
                continue
            title = f"{producer} → {consumer}: direct {LEGEND[m['direct']]}; through dlbridge {LEGEND[m['dlbridge']]}"
            row.append(f'<td title="{_e(title)}">{_symbol(m["direct"])} {_symbol(m["dlbridge"])}</td>')
        parts.append("".join(row) + "</tr>")
    parts.append("</table>")
    return parts


def _verdict(report: dict) -> list[str]:
    summary = report["summary"]
    status = summary["exit_status"]
    parts = [f'<h2>Verdict</h2><section id="verdict"{" class=bad" if status else ""}>']
    parts += [f"<p>{_e(sentence)}</p>" for sentence in summary["verdict"]]
    parts.append(f"<p><b>Exit status {status}</b>: " + ("dlbridge does everything it should here." if status == 0 else
                 "dlbridge fails somewhere it should not (see the first findings).") + "</p></section>")
    return parts


def _findings(report: dict) -> list[str]:
    findings = report["summary"]["findings"]
    if not findings:
        return ["<h2>Findings</h2><p>None." + (" Every pair works, directly and through dlbridge." if report["pairs"]
                                              else "") + "</p>"]
    parts = [f"<h2>Findings</h2><p>{len(findings)} causes, most urgent first. Each links to its catalogue entry; "
             "<code>dlbridge explain ID</code> prints it.</p>"]
    words = {"crash": "crash", "wrong": "wrong values", "hangs": "hangs", "lost": "read-only made writable",
             "fails": "refused"}
    for category in CATEGORIES:
        mine = [f for f in findings if f["category"] == category]
        if not mine:
            continue
        parts.append(f"<h3>{_e(HEADINGS[category])}</h3>")
        for f in mine:
            outcome = ", ".join(words[o] for o in f["outcomes"])
            blocks = "".join(f"<li>{_e(', '.join(b['producers']))} → {_e(', '.join(b['consumers']))}: "
                             f"{_e(b['case_words'])}</li>" for b in f["blocks"])
            parts.append(f'<div class="finding" id="finding-{f["id"]}"><div class="head">{f["id"]}. '
                         f"{_catalogue_link(f['catalogue'])} — {_e(outcome)}, {f['cases']} "
                         f"case{'s' if f['cases'] != 1 else ''}</div><ul>{blocks}</ul>"
                         f'<div class="why">{_e(_reason(f["reason"]) + _direct_words(f))}</div>'
                         f'<div>Fix: <span class="fix">{_e(f["fix"])}</span></div></div>')
    return parts


def _cost(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def _details(report: dict) -> list[str]:
    from dlbridge.catalogue import identify

    parts = [f"<details><summary>Every pair ({len(report['pairs'])})</summary><table><tr><th>producer → consumer</th>"
             "<th>direct</th><th>through dlbridge</th><th>asked → answered</th><th>read-only direct / via</th>"
             "<th>µs direct / via</th></tr>"]
    for p in report["pairs"]:
        asked = p.get("asked") or {}
        version = asked.get("max_version") if isinstance(asked, dict) else None
        ask = f"{version[0]}.{version[1]}" if isinstance(version, list) and len(version) == 2 else "legacy"
        answered = p.get("answered")
        got = {"dltensor_versioned": "versioned", "dltensor": "legacy"}.get(answered, answered or "–")
        parts.append(f"<tr><td>{_e(p['producer'])} → {_e(p['consumer'])}</td><td>{_e(p['direct']['summary'])}</td>"
                     f"<td>{_e(p['dlbridge']['summary'])}</td><td>{_e(ask)} → {_e(got)}</td>"
                     f"<td>{_e(p['direct']['readonly'])} / {_e(p['dlbridge']['readonly'])}</td>"
                     f"<td>{_cost(p['cost_us'].get('direct'))} / {_cost(p['cost_us'].get('dlbridge'))}</td></tr>")
    parts.append("</table></details>")
    failing = [r for r in report["results"] if r["status"] in ("fails", "wrong", "crash", "hangs")
               or r.get("readonly") == "lost"]
    parts.append(f"<details><summary>Every failing case ({len(failing)})</summary><table><tr><th>pair</th>"
                 "<th>case</th><th>route</th><th>outcome</th><th>error</th><th>catalogue</th></tr>")
    for r in failing:
        error = r.get("error") or {}
        if r["status"] not in ("fails", "wrong", "crash", "hangs"):
            error = lost_error(r)
        code = f" [{error['code']}]" if error.get("code") else ""
        ident = identify(error.get("message") or "", error.get("type") or "", error.get("code"))
        parts.append(f"<tr><td>{_e(r['producer'])} → {_e(r['consumer'])}</td><td>{_e(r['case'])}</td>"
                     f"<td>{_e(r['route'])}</td><td>{_e(r['status'])}</td>"
                     f"<td>{_e(error.get('type'))}{_e(code)}: {_e(error.get('message'))}</td>"
                     f"<td>{_catalogue_link(ident)}</td></tr>")
    parts.append("</table></details>")
    return parts


def render(report: dict) -> str:
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>dlbridge doctor</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>dlbridge doctor</h1><p class=meta>dlbridge {_e(report['dlbridge'])} · "
        f"Python {_e(report['python'])} · {_e(report['platform'])} · {len(report['libraries'])} libraries, "
        f"{len(report['pairs'])} pairs, {len(report['results']):,} exchanges in {_e(report['seconds'])} s</p></header>",
    ]
    parts += _libraries(report) + _matrix(report) + _verdict(report) + _findings(report)
    parts.append("<h2>Details</h2>")
    parts += _details(report)
    parts.append("</body></html>\n")
    return "\n".join(parts)
