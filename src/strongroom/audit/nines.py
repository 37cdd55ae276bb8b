"""Durability scores in nines, defined precisely.

score = durable / audited, where *audited* counts every ledgered record the scrub classified and
*durable* those classified ``ok`` or ``expired-justified``. Unledgered records are not audited.

nines = -log10(lost / audited), lost = audited - durable, computed from the integer counts (so 1 lost
in 1,000,000 is exactly 6.0, never 5.99999 from float rounding) and shown floored to one decimal:
99.9999% -> "6 nines", 99.95% -> "3.3 nines", 50% -> "0.3 nines".

Two special cases: nothing lost is ``perfect`` (infinite nines), but a perfect score over N records
only *demonstrates* log10(N) nines - 100 clean records prove "at least 2 nines", not "9 nines" - so
every score also carries ``demonstrable_nines`` = log10(audited); nothing audited is ``n/a``, never a
perfect score (a score never claims more than the audit saw).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def _floor1(x: float) -> float:
    return math.floor(round(x, 9) * 10) / 10


@dataclass(frozen=True)
class Score:
    durable: int
    audited: int

    def __post_init__(self) -> None:
        if self.audited < 0 or self.durable < 0 or self.durable > self.audited:
            raise ValueError(f"invalid score {self.durable}/{self.audited}")

    @property
    def lost(self) -> int:
        return self.audited - self.durable

    @property
    def ratio(self) -> float | None:
        return None if self.audited == 0 else self.durable / self.audited

    @property
    def perfect(self) -> bool:
        return self.audited > 0 and self.lost == 0

    @property
    def nines(self) -> float | None:
        """-log10(lost/audited), floored to 0.1; ``inf`` when perfect, ``None`` when nothing audited."""
        if self.audited == 0:
            return None
        if self.lost == 0:
            return math.inf
        return _floor1(math.log10(self.audited) - math.log10(self.lost))

    @property
    def demonstrable_nines(self) -> float | None:
        """The most nines this many audited records can show: log10(audited), floored to 0.1."""
        return None if self.audited == 0 else _floor1(math.log10(self.audited))

    @property
    def display(self) -> str:
        nines = self.nines
        if nines is None:
            return "n/a"
        if math.isinf(nines):
            return "perfect"
        return f"{nines:g} nines"

    def percent(self) -> str:
        if self.audited == 0:
            return "n/a"
        if self.lost == 0:
            return "100%"
        digits = max(1, math.ceil(round(-math.log10(self.lost / self.audited), 9)) - 2)
        value = 100.0 * self.durable / self.audited
        text = f"{value:.{digits}f}"
        # never round a loss up to 100%
        return f"{text}%" if float(text) < 100.0 else f"{100 - 10**-digits:.{digits}f}%"

    def to_json(self) -> dict[str, Any]:
        nines = self.nines
        return {
            "durable": self.durable,
            "audited": self.audited,
            "lost": self.lost,
            "ratio": self.ratio,
            "percent": self.percent(),
            "nines": None if nines is None or math.isinf(nines) else nines,
            "perfect": self.perfect,
            "demonstrable_nines": self.demonstrable_nines,
            "display": self.display,
        }
