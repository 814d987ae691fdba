"""A bank's quality figures beside their chance levels (issue 41: a check that cannot tell a good bank from a
bad one must say so). A contract's held-out pass rate means something only above the rate at which the same
contract passes on randomly placed windows of the same length (`coplay.skills.heldout`, "shuffled"): 100%
held out beside 100% shuffled is a contract that holds whatever the skill did.

A rate beats its chance level when the lower end of its 95% Wilson interval (over the skill-labelled held-out
segments it counts) lies above the chance level; a bank written before the counts were kept is judged on the
point rates alone. The quality Q = pass rate x coverage - size penalty has the chance level
shuffled rate x coverage - size penalty, so it beats chance exactly when its pass rate does. A skill's use
pass rate (share of its uses that reached its success condition) has no measured chance level and says so.
Pure Python on the bank's metrics dict; never imports ray or torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coplay.eval.stats import wilson_interval

NOT_ABOVE = "not above chance"


@dataclass(frozen=True)
class VersusChance:
    """A pass rate, its chance level (None: not measured), the count behind the rate (None: not recorded) and
    whether the rate beats the chance level (None when there is none to beat)."""

    rate: float
    chance: float | None
    n: int | None = None
    passes: int | None = None

    @property
    def beats(self) -> bool | None:
        if self.chance is None:
            return None
        if self.n is not None and self.passes is not None:
            if self.n == 0:
                return False
            low, _ = wilson_interval(self.passes, self.n)
            return low > self.chance
        return self.rate > self.chance

    def text(self, decimals: int = 0) -> str:
        """`100% (chance 100%: not above chance)`, `92% of 24 (chance 31%)`, `60% (no chance level)`."""
        count = f" of {self.n}" if self.n is not None else ""
        if self.chance is None:
            return f"{self.rate:.{decimals}%}{count} (no chance level)"
        flag = f": {NOT_ABOVE}" if not self.beats else ""
        return f"{self.rate:.{decimals}%}{count} (chance {self.chance:.{decimals}%}{flag})"


def heldout_vs_chance(metrics: Mapping[str, Any]) -> VersusChance:
    """The bank's held-out contract pass rate against the shuffled windows' rate, counted over its
    skill-labelled held-out segments (`per_skill_heldout`) when the bank recorded them."""
    per_skill = metrics.get("per_skill_heldout")
    n = passes = None
    if isinstance(per_skill, Mapping) and per_skill:
        n = sum(int(e.get("n", 0)) for e in per_skill.values())
        passes = sum(int(e.get("passes", 0)) for e in per_skill.values())
    chance = metrics.get("shuffled_pass_rate")
    return VersusChance(float(metrics.get("heldout_pass_rate", 0.0)),
                        None if chance is None else float(chance), n, passes)


def skill_vs_chance(entry: Mapping[str, Any]) -> VersusChance:
    """One skill's held-out pass rate (`per_skill_heldout[id]`) against its own shuffled windows' rate."""
    chance = entry.get("shuffled_pass_rate")
    return VersusChance(float(entry.get("pass_rate", 0.0)), None if chance is None else float(chance),
                        int(entry.get("n", 0)), int(entry.get("passes", 0)))


def quality_vs_chance(metrics: Mapping[str, Any]) -> tuple[float, float | None]:
    """(Q, Q at chance): the bank quality and what it would be with the shuffled pass rate in place of the
    held-out one (same coverage, same size penalty); None without a chance level."""
    quality = float(metrics.get("quality", 0.0))
    rate, chance = float(metrics.get("heldout_pass_rate", 0.0)), metrics.get("shuffled_pass_rate")
    if chance is None:
        return quality, None
    return quality, quality - (rate - float(chance)) * float(metrics.get("coverage", 0.0))
