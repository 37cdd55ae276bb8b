"""A doctor run's result: findings grouped by severity, as text for people and JSON for CI.

Exit codes (documented in docs/doctor.md and the command help):

* 0 - nothing at or above ``--fail-on``;
* 1 - doctor could not run (unreachable cluster, authentication failed, unreadable file);
* 2 - usage error (unknown option, bad option value);
* 3 - internal error (a bug in strongroom);
* 4 - findings at or above ``--fail-on`` (default ``error``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from strongroom.doctor.model import Finding, Rule, Severity, count_by_severity, sort_findings

EXIT_OK = 0
EXIT_FINDINGS = 4

#: How many findings of one rule the text output lists (JSON always has all of them).
TEXT_FINDINGS_PER_RULE = 20


@dataclass
class DoctorReport:
    #: ``cluster`` or ``client``.
    kind: str
    target: dict[str, Any]
    rules: Sequence[Rule[Any, Any]]
    findings: list[Finding]
    fail_on: Severity = Severity.ERROR
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.findings = sort_findings(self.findings)

    @property
    def failed(self) -> bool:
        return any(f.severity >= self.fail_on for f in self.findings)

    @property
    def exit_code(self) -> int:
        return EXIT_FINDINGS if self.failed else EXIT_OK

    def rule_ids(self, subject: str | None = None) -> set[str]:
        """Ids of the rules that found something (about ``subject``, if given) - handy in tests and scripts."""
        return {f.rule_id for f in self.findings if subject is None or f.subject == subject}

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "fail_on": self.fail_on.label,
            "failed": self.failed,
            "exit_code": self.exit_code,
            "summary": count_by_severity(self.findings),
            "rules_run": [r.id for r in self.rules],
            "findings": [f.to_dict() for f in self.findings],
            "notes": self.notes,
        }

    # ------------------------------------------------------------------ text
    def render_text(self) -> str:
        lines = [self._headline(), ""]
        if self.findings:
            lines += [self._summary_table(), ""]
            lines += self._details()
        else:
            lines.append("No findings.")
        for note in self.notes:
            lines.append(f"note: {note}")
        counts = count_by_severity(self.findings)
        tally = ", ".join(f"{n} {label}" for label, n in counts.items())
        verdict = (
            f"FAIL: findings at or above --fail-on {self.fail_on.label} (exit {EXIT_FINDINGS})"
            if self.failed
            else f"PASS: nothing at or above --fail-on {self.fail_on.label}"
        )
        lines += ["", f"{tally}. {verdict}"]
        return "\n".join(lines)

    def _headline(self) -> str:
        t = self.target
        if self.kind == "cluster":
            return (
                f"strongroom doctor: cluster {t.get('cluster_id')} at {t.get('bootstrap_servers')} - "
                f"{_plural(len(t.get('brokers', [])), 'live broker')}, "
                f"{t.get('topics_checked')} of {t.get('topics_total')} topics checked, {len(self.rules)} rules"
            )
        return (
            f"strongroom doctor client: {t.get('config')} as {'+'.join(t.get('roles', [])) or 'unknown role'} "
            f"({t.get('role_reason')}) - librdkafka {t.get('librdkafka')}, {len(self.rules)} rules"
        )

    def _summary_table(self) -> str:
        rows = []
        for (severity, rule_id), group in groupby(self.findings, key=lambda f: (f.severity, f.rule_id)):
            found = list(group)
            subjects = ", ".join(f.subject for f in found[:4]) + (f", +{len(found) - 4}" if len(found) > 4 else "")
            rows.append([severity.label, rule_id, len(found), subjects])
        return table(rows, ["severity", "rule", "findings", "subjects"])

    def _details(self) -> list[str]:
        titles = {r.id: r for r in self.rules}
        lines: list[str] = []
        for severity, by_severity in groupby(self.findings, key=lambda f: f.severity):
            lines.append(f"== {severity.label.upper()} ==")
            for rule_id, group in groupby(by_severity, key=lambda f: f.rule_id):
                found = list(group)
                rule = titles.get(rule_id)
                lines.append(f"[{rule_id}] {rule.title if rule else ''}")
                lines += _wrap(f"why: {found[0].why}", "    ")
                for f in found[:TEXT_FINDINGS_PER_RULE]:
                    lines += _wrap(f"- {f.subject_kind} {f.subject}: {f.problem}", "  ", "    ")
                    lines += _wrap(f"fix: {f.fix}", "      ")
                    for command in f.commands:
                        first, *rest = command.splitlines()
                        lines.append(f"      {'set' if f.subject_kind == 'property' else '$'} {first}")
                        lines += [f"        {line}" for line in rest]
                if len(found) > TEXT_FINDINGS_PER_RULE:
                    lines.append(f"  ... and {len(found) - TEXT_FINDINGS_PER_RULE} more (see --output json)")
                lines.append("")
        return lines


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain aligned table (doctor renders its own text; it does not depend on the CLI package)."""
    cells = [[str(h) for h in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _wrap(text: str, indent: str, subsequent: str | None = None) -> list[str]:
    return textwrap.wrap(
        text, width=110, initial_indent=indent, subsequent_indent=subsequent or indent + "  ",
        break_long_words=False, break_on_hyphens=False,
    )  # fmt: skip
