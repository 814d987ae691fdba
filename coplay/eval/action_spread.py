"""How a policy's choices spread over the actions on the probe's positions, beside the expert bot's on the
same positions, and the collapse warning (docs/evaluation.md). Pure Python: never imports an engine.

Why: a cold start can teach a small model one action (after SFT on 2048 the demo's policy played `left` on
44 of 64 moves); its regret alone does not say so. The probe asks every policy the same positions, so the
two distributions compare directly. The warning fires when one action takes more than `COLLAPSE_SHARE` of
the policy's choices while the expert chose that action on no more than `COLLAPSE_SHARE` of the same
positions: a preference the expert does not share (an expert that itself plays one move most of the time
raises none).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

#: One action on more than this share of the positions, where the expert's share of it is not: collapse.
COLLAPSE_SHARE = 0.5


def action_counts(actions: list[str | None]) -> dict[str, int]:
    """How often each action was chosen (None, an unusable answer, is left out: `invalid_share` counts it),
    most frequent first, ties by name."""
    counts = Counter(a for a in actions if a is not None)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def compare_spread(model: dict[str, int], expert: dict[str, int], n: int) -> dict[str, Any]:
    """The model's and the expert's choices over the same `n` positions: per action both counts and shares
    (most frequent model action first), the model's top action with its share and the expert's share of it,
    the expert's own top action, the total variation distance between the two distributions (unusable answers
    as one more outcome), and whether the model collapsed (module docstring)."""
    names = sorted(set(model) | set(expert), key=lambda a: (-model.get(a, 0), -expert.get(a, 0), a))
    rows = [{"action": a, "model": model.get(a, 0), "model_share": model.get(a, 0) / n if n else 0.0,
             "expert": expert.get(a, 0), "expert_share": expert.get(a, 0) / n if n else 0.0} for a in names]
    model_invalid = n - sum(model.values())
    expert_invalid = n - sum(expert.values())
    tv = 0.5 * (sum(abs(r["model"] - r["expert"]) for r in rows) + abs(model_invalid - expert_invalid))
    top = names[0] if model else None
    expert_top = min(expert, key=lambda a: (-expert[a], a), default=None)
    top_share = model[top] / n if top is not None and n else 0.0
    expert_share_of_top = expert.get(top, 0) / n if top is not None and n else 0.0
    collapsed = top_share > COLLAPSE_SHARE and expert_share_of_top <= COLLAPSE_SHARE
    return {"n": n, "actions": rows, "model_invalid": model_invalid,
            "model_top": top, "model_top_share": top_share, "expert_share_of_model_top": expert_share_of_top,
            "expert_top": expert_top, "expert_top_share": expert[expert_top] / n if expert_top and n else 0.0,
            "total_variation": tv / n if n else 0.0, "collapsed": collapsed}


def collapse_warning(game: str, iteration: int, spread: dict[str, Any], who: str | None = None,
                     file: str | None = None) -> str | None:
    """The warning line for a collapsed policy (None otherwise), naming the action, both shares and where
    to look: in a run the iteration's probe file; `who` and `file` name another policy and file
    (`coplay eval --probe`)."""
    if not spread.get("collapsed"):
        return None
    when = who or ("after the cold start" if iteration == 0 else f"after iteration {iteration}")
    file = file or f"eval/probe-it{iteration:05d}.json"
    return (f"probe: {when} the policy chose {spread['model_top']!r} on "
            f"{spread['model_top_share']:.0%} of the {game} probe positions, the expert bot on "
            f"{spread['expert_share_of_model_top']:.0%} of them: one action dominates where the expert's "
            f"choices spread ({file}, sft.act_balance)")


def brief_spread(spread: dict[str, Any]) -> dict[str, Any]:
    """The metrics line's form: the top actions of both and the comparison, without the full table."""
    keys = ("model_top", "model_top_share", "expert_share_of_model_top", "expert_top", "expert_top_share",
            "total_variation", "collapsed")
    return {k: spread[k] for k in keys}


def spread_text(spread: dict[str, Any]) -> str:
    """One line: the policy's top action and share beside the expert's share of it on the same positions,
    the distance between the two spreads, and the warning's verdict."""
    if spread.get("model_top") is None:
        return "no usable answer: no action spread"
    verdict = "  COLLAPSED onto one action" if spread.get("collapsed") else ""
    return (f"most chosen {spread['model_top']!r} {spread['model_top_share']:.0%} (expert bot "
            f"{spread['expert_share_of_model_top']:.0%} on the same positions; its own most chosen "
            f"{spread['expert_top']!r} {spread['expert_top_share']:.0%}), total variation "
            f"{spread['total_variation']:.2f}{verdict}")
