"""The doctor's report for a terminal: a first screen (libraries, the matrix of pairs, the
verdict) that fits 40 lines of 100 columns, then the findings grouped by cause, and with
``verbose`` every failing case. Lines are wrapped at spaces, never cut inside a word.
Colour only when asked (a TTY); plain symbols where the terminal cannot print them."""

from __future__ import annotations

import io
import textwrap

from .summary import CATEGORIES, FAILING, PARTIAL, UNSAFE, UNTRIED, WORKS

WIDTH = 100
SYMBOLS = {WORKS: "✓", PARTIAL: "~", FAILING: "✗", UNSAFE: "!", UNTRIED: "·"}
ASCII_SYMBOLS = {WORKS: "+", PARTIAL: "~", FAILING: "x", UNSAFE: "!", UNTRIED: "."}
LEGEND = {WORKS: "all cases work", PARTIAL: "some refused", FAILING: "all refused",
          UNSAFE: "crash, wrong values, hang, or read-only lost", UNTRIED: "not tried"}
HEADINGS = {
    "dlbridge-broken": "dlbridge misbehaves (a bug: exit status 1)",
    "dlbridge-refuses": "dlbridge refuses what it should do (exit status 1)",
    "fixed": "Direct calls that fail or misbehave, and dlbridge.convert works",
    "impossible": "Cannot be done either way: dlbridge says why",
    "not-tried": "Direct calls that fail (dlbridge's route was not tried)",
}
_OUTCOME_WORDS = {"crash": "crash", "wrong": "wrong values", "hangs": "hangs", "lost": "read-only made writable",
                  "fails": "refused"}
_COLORS = {WORKS: "32", PARTIAL: "33", FAILING: "31", UNSAFE: "31;1"}


# What the text uses beyond ASCII, and what it becomes where the terminal cannot print it.
_TO_ASCII = str.maketrans({"·": "-", "—": "-", "…": "...", "→": "->", "µ": "u"})


def can_print_symbols(stream) -> bool:
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        ("".join(SYMBOLS.values()) + "·—…→µ").encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class _Writer:
    def __init__(self, color: bool, unicode: bool):
        self.out = io.StringIO()
        self.color = color
        self.symbols = SYMBOLS if unicode else ASCII_SYMBOLS
        self.arrow = "→" if unicode else "->"

    def line(self, text: str = "", indent: int = 0, hang: int | None = None, bold: bool = False) -> None:
        """text wrapped at WIDTH on spaces; continuation lines indented by hang. Colour codes are
        added after wrapping, so they do not count as columns."""
        if not text:
            self.out.write("\n")
            return
        prefix = " " * indent
        later = " " * (indent if hang is None else hang)
        for line in textwrap.wrap(text, WIDTH, initial_indent=prefix, subsequent_indent=later,
                                  break_long_words=False, break_on_hyphens=False):
            line = line.replace("\u00a0", " ")
            self.out.write((self.bold(line) if bold else line) + "\n")

    def raw(self, text: str) -> None:
        self.out.write(text + "\n")

    def bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.color else text

    def symbol(self, state: str) -> str:
        text = self.symbols[state]
        code = _COLORS.get(state)
        return f"\033[{code}m{text}\033[0m" if self.color and code else text


def _speaks(lib: dict) -> str:
    speaks = lib.get("speaks") or ("not driven by the doctor" if not lib.get("driven") else "unknown")
    speaks = speaks.replace("legacy (no max_version keyword)", "legacy, no max_version")
    if speaks.startswith("failed: "):
        speaks = f"no export ({speaks[len('failed: '):]})"
    if lib.get("c_exchange_api") not in (None, "no", "n/a"):
        speaks += " + C API"
    return speaks


def _header(w: _Writer, report: dict) -> None:
    w.line(f"dlbridge doctor · dlbridge {report['dlbridge'] or '(not importable)'} · "
           f"Python {report['python']} · {report['platform']}", bold=True)
    exchanges = len(report["results"])
    absent = ", ".join(f"{name} ({why})" if why != "not installed" else name
                       for name, why in report["missing"].items())
    count = len(report["libraries"])
    w.line(f"{count} librar{'y' if count == 1 else 'ies'}, {len(report['pairs'])} pair"
           f"{'' if len(report['pairs']) == 1 else 's'}, {exchanges:,} exchanges in {report['seconds']} s"
           + (f"; absent: {absent}" if absent else ""))


def _libraries(w: _Writer, report: dict) -> None:
    w.raw("")
    w.raw(w.bold("Libraries") + " (what each exports when asked for DLPack 1.3; + C API: it has the C exchange API)")
    entries = [f"{lib['name']} {lib['version']} {_speaks(lib)}" for lib in report["libraries"]]
    if not entries:
        w.line("none found", indent=2)
        return
    column = max(len(e) for e in entries) + 3
    per_line = max(1, (WIDTH - 2) // column)
    for start in range(0, len(entries), per_line):
        row = entries[start:start + per_line]
        w.raw("  " + "".join(e.ljust(column) for e in row[:-1]) + row[-1])
    # What convert's facts rest on where they are not all observed: the cautious readings of a
    # release dlbridge has not measured.
    for lib in report["libraries"]:
        facts = lib.get("facts") or {}
        for text in facts.get("assumed", ()):
            w.line(f"{lib['name']}: assumed: {text}", indent=2)


def _matrix(w: _Writer, report: dict) -> None:
    cells = {(m["producer"], m["consumer"]): m for m in report["summary"]["matrix"]}
    names = list(dict.fromkeys([p for p, _ in cells] + [c for _, c in cells]))
    w.raw("")
    w.raw(w.bold("Pairs") + f": direct call, then through dlbridge, for producer (row) {w.arrow} consumer (column)")
    w.line("  ".join(f"{w.symbols[s]} {LEGEND[s]}" for s in (WORKS, PARTIAL, FAILING, UNSAFE)), indent=2)
    if not names:
        w.line("no pairs: the doctor needs at least one installed library it drives", indent=2)
        return
    label = max(len(n) for n in names)
    widths = [max(len(n), 3) for n in names]
    w.raw(" " * (label + 2) + "  ".join(n.ljust(width) for n, width in zip(names, widths)).rstrip())
    for producer in names:
        row = []
        for consumer, width in zip(names, widths):
            m = cells.get((producer, consumer))
            pair = (w.symbol(m["direct"]) + " " + w.symbol(m["dlbridge"])) if m else w.symbols[UNTRIED] * 2
            row.append(pair + " " * (width - 3))
        w.raw(producer.ljust(label + 2) + "  ".join(row).rstrip())


def _verdict(w: _Writer, report: dict) -> None:
    summary = report["summary"]
    w.raw("")
    w.raw(w.bold("Verdict"))
    for sentence in summary["verdict"]:
        w.line(sentence, indent=2, hang=4)
    status = summary["exit_status"]
    w.line(f"Exit status {status}: " + ("dlbridge does everything it should here." if status == 0 else
                                         "dlbridge fails somewhere it should not (see the first findings)."),
           indent=2, hang=4)


# Errors the doctor words itself (a crash, a wrong result...): their type adds nothing to the message.
_OWN_WORDS = ("WrongResult", "ReadOnlyLost", "Hang")


def _reason(reason: str) -> str:
    kind, _, message = reason.partition(": ")
    own = kind in _OWN_WORDS or kind.startswith(("SIG", "signal ", "exit status"))
    return _short(message if own else reason)


def _short(text: str, limit: int = 200) -> str:
    """The first sentence or clause of a message, whole words only."""
    stops = [(text.find(stop), stop) for stop in (". ", "; ") if text.find(stop) >= 20]
    if stops:
        at, stop = min(stops)
        if at <= limit:
            return text[:at] + ("." if stop == ". " else "")
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def _unbroken(text: str) -> str:
    """text kept on one line by the wrapping (a command is not split between lines)."""
    return text.replace(" ", "\u00a0")


def _direct_words(finding: dict) -> str:
    """What the direct call did in the cases of a finding about dlbridge's refusal."""
    by_outcome = {}
    for d in finding.get("direct", []):
        ids, count = by_outcome.get(_OUTCOME_WORDS[d["outcome"]], ([], 0))
        by_outcome[_OUTCOME_WORDS[d["outcome"]]] = (ids + [d["catalogue"]], count + d["cases"])
    if not by_outcome:
        return ""
    rest = finding["cases"] - sum(count for _, count in by_outcome.values())
    parts = ([f"{rest} work"] if rest else []) + [f"{words} in {count} [{', '.join(ids)}]"
                                                   for words, (ids, count) in by_outcome.items()]
    return f" Directly: {'; '.join(parts)}."


def _pairs_text(block: dict) -> str:
    return f"{', '.join(block['producers'])} -> {', '.join(block['consumers'])}: {block['case_words']}"


def _findings(w: _Writer, report: dict) -> None:
    findings = report["summary"]["findings"]
    w.raw("")
    if not findings:
        w.raw(w.bold("Findings") + ": none." + (" Every pair works, directly and through dlbridge."
                                                if report["pairs"] else ""))
        return
    w.raw(w.bold("Findings") + f" ({len(findings)} causes, most urgent first; `dlbridge explain ID` "
                               "gives the cause and the fixes)")
    for category in CATEGORIES:
        mine = [f for f in findings if f["category"] == category]
        if not mine:
            continue
        w.raw(w.bold(HEADINGS[category]))
        for f in mine:
            outcome = ", ".join(_OUTCOME_WORDS[o] for o in f["outcomes"])
            lead = f"{f['id']:>2}. "
            head = f"[{f['catalogue']}] {outcome}, {f['cases']} case{'s' if f['cases'] != 1 else ''}"
            blocks = f["blocks"]
            if len(blocks) == 1:
                w.line(f"{lead}{head}: {_pairs_text(blocks[0])}", indent=1, hang=6)
            else:
                w.line(f"{lead}{head}:", indent=1, hang=6)
                for block in blocks:
                    w.line(_pairs_text(block), indent=6, hang=8)
            w.line(f"{_reason(f['reason'])}{_direct_words(f)} — fix: {_unbroken(f['fix'])}", indent=6, hang=8)


def _micros(us: float) -> str:
    """A cost in at most five characters, so that a loaded machine's slow exchanges keep the table in
    its width (the JSON report has the exact figure)."""
    return f"{us:.1f}" if us < 100 else f"{us:.0f}" if us < 10000 else ">9999"


def _details(w: _Writer, report: dict) -> None:
    """Today's per-case detail: the pairs with versions and costs, then every failing case."""
    w.raw("")
    w.line(f"Every pair ({len(report['cases'])} cases each: {', '.join(report['cases'])})", hang=2, bold=True)
    w.line("Per route, direct/dlbridge: read-only data kept its flag, lost it, went to a consumer that never "
           "writes (imm) or was refused; the µs one exchange takes.", indent=2, hang=2)
    rows = [("producer -> consumer", "direct", "dlbridge", "asked -> answered", "read-only", "µs")]
    for p in report["pairs"]:
        asked = p.get("asked") or {}
        version = asked.get("max_version") if isinstance(asked, dict) else None
        ask = f"{version[0]}.{version[1]}" if isinstance(version, list) and len(version) == 2 else "legacy"
        answered = p.get("answered")
        got = {"dltensor_versioned": "versioned", "dltensor": "legacy"}.get(answered, answered or "-")
        cost = p["cost_us"]
        rows.append((f"{p['producer']} -> {p['consumer']}", p["direct"]["summary"], p["dlbridge"]["summary"],
                     f"{ask} -> {got}", f"{p['direct']['readonly']}/{p['dlbridge']['readonly']}".replace("immutable", "imm"),
                     "/".join("-" if cost.get(r) is None else _micros(cost[r]) for r in ("direct", "dlbridge"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        w.raw("  " + " ".join(text.ljust(width) for text, width in zip(r, widths)).rstrip())
    from dlbridge.catalogue import identify

    failing = [r for r in report["results"] if r["status"] in ("fails", "wrong", "crash", "hangs")
               or r.get("readonly") == "lost"]
    w.raw("")
    w.raw(w.bold(f"Every failing case ({len(failing)})"))
    for r in failing:
        error = r.get("error") or {}
        if r.get("readonly") == "lost" and r["status"] not in ("fails", "wrong", "crash", "hangs"):
            from .summary import lost_error

            error = lost_error(r)
        code = f" [{error['code']}]" if error.get("code") else ""
        ident = identify(error.get("message") or "", error.get("type") or "", error.get("code"))
        w.line(f"{r['producer']} -> {r['consumer']} {r['case']} ({r['route']}): {r['status']} — "
               f"{error.get('type')}{code}: {error.get('message')} [{ident}]", indent=2, hang=6)


def render(report: dict, color: bool = False, verbose: bool = False, unicode: bool = True) -> str:
    w = _Writer(color, unicode)
    _header(w, report)
    _libraries(w, report)
    _matrix(w, report)
    _verdict(w, report)
    _findings(w, report)
    if verbose:
        _details(w, report)
    w.raw("")
    w.line("-v shows every failing case; --json the whole report (docs/doctor.md); --html FILE a page to share.")
    text = w.out.getvalue()
    return text if unicode else text.translate(_TO_ASCII)


def progress_bar(stream, width: int = 30):
    def show(done: int, total: int) -> None:
        filled = width * done // max(total, 1)
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} exchanges")
        stream.flush()

    return show
