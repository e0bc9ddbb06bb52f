"""One source for the names convert and check take: dlbridge.libraries. Every text that lists
them is compared with it here, so a library added or removed shows up everywhere."""

import pathlib
import re

import dlbridge
from dlbridge import libraries
from dlbridge.convert import target_names

ROOT = pathlib.Path(__file__).resolve().parents[2]


def listed(text: str, start: str) -> list[str]:
    """The names in the parenthesised list that follows `start` in text."""
    after = text[text.index(start) + len(start):]
    inside = after[after.index("(") + 1: after.index(";") if ";" in after.split(")")[0] else after.index(")")]
    return [name.strip(" `\n") for name in inside.split(",")]


def test_target_names_are_the_library_modules_and_dlbridge():
    assert target_names() == ["dlbridge", *libraries.TARGETS]
    assert set(libraries.TARGETS) == set(libraries.LIBRARIES)


def test_the_readme_lists_every_target():
    readme = (ROOT / "README.md").read_text()
    assert listed(readme, "any library of `dlbridge.libraries.TARGETS`") == list(libraries.TARGETS)


def test_the_docstrings_name_the_one_source():
    from dlbridge import check

    assert "dlbridge.libraries.TARGETS" in dlbridge.convert.__doc__
    assert "dlbridge.libraries" in check.__doc__


def test_an_unknown_name_lists_what_is_known():
    import pytest

    with pytest.raises(ValueError) as excinfo:
        dlbridge.convert([1.0], "no_such_library_xyz")
    names = re.search(r"use one of (.*?), or pass", str(excinfo.value)).group(1).split(", ")
    assert names == target_names()


def test_check_answers_an_unknown_name_with_every_producer_it_knows(capsys):
    from dlbridge import check
    from dlbridge.cli import build_parser, main

    check_help = build_parser()._subparsers._group_actions[0].choices["check"].format_help()
    assert "dlbridge.libraries" in check_help
    assert main(["check", "no_such_library_xyz"]) == 2
    names = re.search(r"use (.*?) or module:factory", capsys.readouterr().err).group(1).split(", ")
    assert names == list(check.BUILTIN)
    assert set(names) == {"dlbridge", *(n for n, m in libraries.LIBRARIES.items() if hasattr(m, "make"))}
