"""The tests that ``dlbridge.testing`` adds: one pytest item per rule and per producer or consumer.

Their ids name the rule and the subject (``dlpack-producer::P2.versioned[mylib:make]``), and every report
of them points at the user's factory or callable, not at this file: the location pytest prints and
writes to JUnit XML is the factory's definition, and a skip's location is rewritten to it too.
Imported only under pytest, by ``dlbridge.testing`` once the setup check has passed.
"""

from __future__ import annotations

import pytest

from . import check, check_consumer
from .conformance_setup import Subject


class RuleBroken(Exception):
    """A rule that the subject does not keep: the rule and what was seen."""


class RuleItem(pytest.Item):
    """One rule run against one producer or consumer."""

    def __init__(self, *, subject: Subject, rule: tuple, **kwargs):
        super().__init__(**kwargs)
        self.subject, self.rule = subject, rule

    def runtest(self) -> None:
        _, text, fn = self.rule
        try:
            if self.subject.option == "--dlpack-producer":
                ok, evidence = fn(self.subject.target)
            else:
                spec, consume = self.subject.target
                ok, evidence = check_consumer.call_rule(fn, consume, spec)
        except check.NotObservable as exc:
            pytest.skip(f"{self.rule[0]} ({self.subject.spec}): {exc}")
        except Exception as exc:
            # As in `dlbridge check`: a library that raises where the rule expects an answer breaks the rule.
            ok, evidence = False, f"raised {type(exc).__name__}: {str(exc)[:160]}"
        if not ok:
            raise RuleBroken(f"{text}\nevidence: {evidence}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RuleBroken):
            return (f"{self.subject.option} {self.subject.spec} ({self.subject.where}) breaks {self.rule[0]}: "
                    f"{excinfo.value}")
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        line = self.subject.line - 1 if self.subject.line else None
        return self.subject.path, line, self.name


class SideRules(pytest.Collector):
    """The rules of one side (producer or consumer), for each subject of that side in turn."""

    def __init__(self, *, subjects: list[Subject], rules: list, **kwargs):
        super().__init__(**kwargs)
        self.subjects, self.rules = subjects, rules

    def collect(self):
        return [RuleItem.from_parent(self, name=f"{rule[0]}[{subject.spec}]", subject=subject, rule=rule)
                for subject in self.subjects for rule in self.rules]


class ConformancePlugin:
    """Adds the rule items to the collected tests and keeps their reports pointing at the subject."""

    def __init__(self, subjects: list[Subject]):
        self.subjects = subjects

    # First, so that -k, -m and --deselect see the rule items like any others.
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for option, rules in (("--dlpack-producer", check.RULES), ("--dlpack-consumer", check_consumer.RULES)):
            subjects = [s for s in self.subjects if s.option == option]
            if not subjects:
                continue
            side = option.lstrip("-")  # the node id too: not under the session's, which is ""
            collector = SideRules.from_parent(session, name=side, nodeid=side, subjects=subjects, rules=rules)
            tests = collector.collect()
            # Counted as collected, as pytest's own collection would report them.
            config.hook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, tests))
            items.extend(tests)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if isinstance(item, RuleItem) and report.skipped and isinstance(report.longrepr, tuple):
            _, _, reason = report.longrepr
            report.longrepr = (item.subject.path, item.subject.line, reason.removeprefix("Skipped: "))
        return report
