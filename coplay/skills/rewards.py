"""Rewards of the skill-bank adapters, exactly as docs/rewards.md. Pure, deterministic functions: no hashing,
no noise, no randomness. Standard library only; never imports ray or torch.

- segment:  R = mean held-out pass rate of the contracts the segmentation implies
                + share of positive game reward inside segments labelled with existing skills
- contract: R = F1(proposed effect literals, literals holding in >= eff_freq of held-out instances)
                + 0.5 if the expressions parse and validate
- curator:  R = (Q_after - Q_before) signed by the verdict (+ approve, - reject), where
            Q = mean contract pass rate x coverage of steps by skills - size_penalty x bank size.
            docs/rewards.md is silent on an answer with no verdict: it is applied as a rejection, and scored
            -|ΔQ| - UNPARSEABLE_VERDICT_PENALTY: strictly worse than either verdict, so GRPO always prefers an
            answer to garbage (with -|ΔQ| alone garbage would tie with the worse verdict, and with both when
            the operation leaves Q unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from coplay.skills.contracts import literal_frequencies

VALID_PROTOCOL_BONUS = 0.5
UNPARSEABLE_VERDICT_PENALTY = 0.05  # ten skills' worth of size penalty at the default 0.005


def segment_reward(heldout_pass_rate: float, positive_reward_in_skills: float,
                   positive_reward_total: float) -> float:
    """Held-out pass rate of the implied contracts + share of positive reward inside existing-skill
    segments."""
    share = positive_reward_in_skills / positive_reward_total if positive_reward_total > 0 else 0.0
    return heldout_pass_rate + share


def f1(proposed: Iterable[str], reference: Iterable[str]) -> float:
    """F1 of two literal sets; two empty sets agree perfectly (1.0)."""
    p, r = set(proposed), set(reference)
    if not p and not r:
        return 1.0
    hits = len(p & r)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(p), hits / len(r)
    return 2 * precision * recall / (precision + recall)


def reference_effects(heldout_effects: Sequence[Iterable[str]], eff_freq: float) -> set[str]:
    """Literals holding in >= eff_freq of the held-out instances."""
    return {lit for lit, f in literal_frequencies(heldout_effects).items() if f >= eff_freq}


def contract_reward(proposed_effects: Iterable[str], heldout_effects: Sequence[Iterable[str]],
                    eff_freq: float, valid: bool) -> float:
    """F1 against the held-out reference + 0.5 when the protocol parsed and validated."""
    return (f1(proposed_effects, reference_effects(heldout_effects, eff_freq))
            + (VALID_PROTOCOL_BONUS if valid else 0.0))


def bank_quality(mean_pass_rate: float, step_coverage: float, size: int, size_penalty: float) -> float:
    """Q = mean contract pass rate x coverage of steps by skills - size penalty x size."""
    return mean_pass_rate * step_coverage - size_penalty * size


def curator_reward(verdict: str | None, quality_before: float, quality_after: float) -> float:
    """ΔQ for approve, -ΔQ for reject, -|ΔQ| - UNPARSEABLE_VERDICT_PENALTY for an answer with no verdict."""
    delta = quality_after - quality_before
    if verdict == "approve":
        return delta
    if verdict == "reject":
        return -delta
    return -abs(delta) - UNPARSEABLE_VERDICT_PENALTY
