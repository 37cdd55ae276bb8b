"""What a doctor rule is and what it reports: severities, findings, rules and their registry.

Rules are pure functions over an already collected input (a cluster snapshot or a client
configuration), so each can be tested with a hand-built input and no cluster. A finding carries
everything an operator needs without reading our source: the evidence (which values, from where),
the fix (the exact command or property) and the operational reason.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from strongroom.errors import ConfigError, DoctorError


class Severity(enum.IntEnum):
    """Ordered severities; ``--fail-on`` compares with ``>=``.

    * critical: data loss or an outage is happening now or is certain (the client cannot start,
      writes cannot succeed, retention deletes keys).
    * error: one ordinary event - a broker restart, a leader failover - causes an outage or data loss.
    * warning: a rarer event (two brokers down at once, long maintenance) does, or the operational
      margin the guidance asks for is missing.
    * info: advice; nothing breaks.
    """

    INFO = 10
    WARNING = 20
    ERROR = 30
    CRITICAL = 40

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(s.label for s in cls)
            raise ConfigError(f"unknown severity {text!r}", hint=f"use one of {names}") from None


@dataclass(frozen=True)
class Finding:
    """One problem on one subject (the cluster, a broker, a topic, a client property)."""

    rule_id: str
    severity: Severity
    #: ``cluster``, ``broker``, ``topic`` or ``property``.
    subject_kind: str
    #: The broker id, topic name or property name; the cluster id for ``cluster``.
    subject: str
    #: One line naming the bad values.
    problem: str
    #: What to do, in one or two sentences.
    fix: str
    #: Why it matters operationally.
    why: str
    #: Machine-readable facts: values, where they come from, affected partitions or brokers.
    evidence: dict[str, Any] = field(default_factory=dict)
    #: Exact commands (kafka-configs, kafka-reassign-partitions) or properties to set.
    commands: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule_id,
            "severity": self.severity.label,
            "subject_kind": self.subject_kind,
            "subject": self.subject,
            "problem": self.problem,
            "fix": self.fix,
            "why": self.why,
            "commands": list(self.commands),
            "evidence": self.evidence,
        }


InputT = TypeVar("InputT")
SettingsT = TypeVar("SettingsT")


@dataclass(frozen=True)
class Rule(Generic[InputT, SettingsT]):
    """A check with a stable id. ``severity`` is the highest severity its findings can have."""

    id: str
    severity: Severity
    title: str
    why: str
    check: Callable[[Rule[InputT, SettingsT], InputT, SettingsT], Iterable[Finding]] = field(repr=False)

    def run(self, data: InputT, settings: SettingsT) -> list[Finding]:
        return list(self.check(self, data, settings))

    def finding(
        self,
        subject_kind: str,
        subject: str,
        problem: str,
        fix: str,
        *,
        evidence: dict[str, Any] | None = None,
        commands: Sequence[str] = (),
        severity: Severity | None = None,
        why: str | None = None,
    ) -> Finding:
        """A finding of this rule; the rule's own ``why`` and severity unless overridden."""
        return Finding(
            rule_id=self.id,
            severity=severity if severity is not None else self.severity,
            subject_kind=subject_kind,
            subject=subject,
            problem=problem,
            fix=fix,
            why=why if why is not None else self.why,
            evidence=dict(evidence or {}),
            commands=tuple(commands),
        )

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity.label, "title": self.title, "why": self.why}


class RuleRegistry(Generic[InputT, SettingsT]):
    """Rules in registration order; ``select`` applies ``--rule`` / ``--skip-rule``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._rules: dict[str, Rule[InputT, SettingsT]] = {}

    def rule(
        self, id: str, severity: Severity, title: str, why: str
    ) -> Callable[[Callable[[Rule[InputT, SettingsT], InputT, SettingsT], Iterable[Finding]]], Rule[InputT, SettingsT]]:
        """Decorator: the function receives the rule itself (to build findings), the input and settings."""

        def register(
            fn: Callable[[Rule[InputT, SettingsT], InputT, SettingsT], Iterable[Finding]],
        ) -> Rule[InputT, SettingsT]:
            if id in self._rules:
                raise ValueError(f"duplicate doctor rule id {id!r}")
            rule: Rule[InputT, SettingsT] = Rule(id=id, severity=severity, title=title, why=why, check=fn)
            self._rules[id] = rule
            return rule

        return register

    def __iter__(self) -> Iterator[Rule[InputT, SettingsT]]:
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)

    def ids(self) -> list[str]:
        return list(self._rules)

    def get(self, rule_id: str) -> Rule[InputT, SettingsT]:
        try:
            return self._rules[rule_id]
        except KeyError:
            raise unknown_rule(rule_id, self._rules, self.name) from None

    def select(self, only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[Rule[InputT, SettingsT]]:
        for rule_id in [*only, *skip]:
            self.get(rule_id)  # validates the id
        chosen = [self._rules[r] for r in only] if only else list(self._rules.values())
        return [r for r in chosen if r.id not in set(skip)]

    def run(self, data: InputT, settings: SettingsT, rules: Sequence[Rule[InputT, SettingsT]]) -> list[Finding]:
        findings: list[Finding] = []
        for rule in rules:
            findings.extend(rule.run(data, settings))
        return sort_findings(findings)


def unknown_rule(rule_id: str, known: Iterable[str], kind: str) -> DoctorError:
    names = sorted(known)
    close = difflib.get_close_matches(rule_id, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return DoctorError(f"unknown {kind} rule {rule_id!r}", hint=f"{hint}list the rules with 'strongroom doctor rules'")


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then by rule and subject, so output is stable run to run."""
    return sorted(findings, key=lambda f: (-f.severity, f.rule_id, f.subject_kind, f.subject))


def count_by_severity(findings: Iterable[Finding]) -> dict[str, int]:
    counts = {s.label: 0 for s in sorted(Severity, reverse=True)}
    for f in findings:
        counts[f.severity.label] += 1
    return counts
