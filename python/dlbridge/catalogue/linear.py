"""Why matching the catalogue costs time linear in the text: every pattern's repeats are bounded.

Python's ``re`` backtracks, so a pattern such as ``\\w+ is not supported`` costs time quadratic
in a long word, and ``(?s).*x.*`` in a long text. A pattern whose every repeat has an upper
bound can do only a bounded amount of work at each start position, whatever follows, so a
search costs at most ``positions × budget(pattern)`` steps: linear in the text.
``problems()`` refuses a record whose pattern has an unbounded repeat or a budget above
``MAX_BUDGET``; ``budget`` is that static bound, in steps per start position.
"""

from __future__ import annotations

try:  # the parser behind re.compile: re._parser since 3.11, sre_parse before
    from re import _parser as _sre
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre

# A repeat's upper bound ({0,64}) a catalogue pattern may use, and the most steps per start position.
MAX_REPEAT = 1024
MAX_BUDGET = 1 << 20

_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT}
if hasattr(_sre, "POSSESSIVE_REPEAT"):  # x*+, Python 3.11 and later
    _REPEATS.add(_sre.POSSESSIVE_REPEAT)


def _walk(items, unbounded: list) -> tuple[int, int]:
    """(how many ways the items can match at one position, how many characters at most).

    A backtracking matcher tries each way at most once and each way reads at most that many
    characters, so their product bounds the steps of one attempt. Ways multiply along a
    sequence, add up over alternatives, and a repeat of k..n tries sum(ways ** i, i = k..n)."""
    ways, length = 1, 0
    for op, av in items:
        if op in _REPEATS:
            low, high, sub = av
            if high == _sre.MAXREPEAT or high > MAX_REPEAT:
                unbounded.append("*, + or {n,}" if high == _sre.MAXREPEAT else f"{{{low},{high}}}")
                high = MAX_REPEAT
            sub_ways, sub_length = _walk(sub, unbounded)
            if sub_ways == 1:
                part = high - low + 1
            else:
                part = sum(min(sub_ways ** i, MAX_BUDGET) for i in range(low, high + 1))
            ways, length = ways * part, length + high * sub_length
        elif op is _sre.SUBPATTERN:
            sub_ways, sub_length = _walk(av[-1], unbounded)
            ways, length = ways * sub_ways, length + sub_length
        elif op is _sre.BRANCH:
            walked = [_walk(alternative, unbounded) for alternative in av[1]]
            ways, length = ways * sum(w for w, _ in walked), length + max(n for _, n in walked)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):  # looks without consuming, once per way
            sub_ways, sub_length = _walk(av[1], unbounded)
            length += sub_ways * sub_length
        elif op is _sre.GROUPREF_EXISTS:
            walked = [_walk(branch, unbounded) for branch in av[1:] if branch is not None]
            ways, length = ways * sum(w for w, _ in walked), length + max(n for _, n in walked)
        elif op is _sre.GROUPREF:
            unbounded.append("a back-reference")
            length += MAX_REPEAT
        elif op is _sre.AT:  # ^, $, \b: no character
            pass
        else:  # one character or class
            length += 1
        ways = min(ways, MAX_BUDGET * MAX_BUDGET)
    return ways, length


def analyse(pattern: str) -> tuple[int, list[str]]:
    """(steps per start position at most, the repeats that have no bound)."""
    unbounded = []
    ways, length = _walk(_sre.parse(pattern), unbounded)
    return ways * max(length, 1), unbounded


def budget(pattern: str) -> int:
    return analyse(pattern)[0]


def complaints(pattern: str) -> list[str]:
    """Why a search with this pattern could cost more than linear time, or nothing."""
    steps, unbounded = analyse(pattern)
    found = [f"a repeat without a small upper bound ({what}): bound it, e.g. \\d{{1,20}} (at most {MAX_REPEAT})"
             for what in unbounded]
    if not unbounded and steps > MAX_BUDGET:
        found.append(f"up to {steps} steps per position (the limit is {MAX_BUDGET}): fewer or smaller repeats")
    return found
