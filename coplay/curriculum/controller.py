"""The curriculum's skill controller (docs/curriculum.md), the deterministic part: refine a skill's
generation rules from how its tasks fared, and name the skills the solver has saturated (routing stops
drawing them). Inducing new skills from exploration-stream tasks happens in the next bank update
(`coplay.skills.induction`), through the curator like every maintenance operation.
"""

from __future__ import annotations

from collections.abc import Mapping

from coplay.curriculum.routing import saturated
from coplay.skills.expressions import ExpressionError, parse_expression
from coplay.skills.schema import Skill
from coplay.skills.tasking import TaskSpec

EASY, HARD = 0.75, 0.25


def refine_rules(spec: TaskSpec) -> str:
    """Generation rules from feedback: what the kept tasks looked like (bounds, features their contracts
    read) and which way to move: harder when the solver succeeds above 0.75, easier below 0.25, or when the
    gate keeps under half of the tasks."""
    usage = spec.usage
    if not usage.proposed:
        return spec.rules
    parts = []
    bounds = sorted(int(e["bound"]) for e in spec.examples if isinstance(e.get("bound"), int))
    features: set[str] = set()
    for example in spec.examples:
        try:
            features |= parse_expression(str(example.get("contract", ""))).features
        except ExpressionError:
            continue
    if bounds:
        parts.append(f"kept tasks used bounds {bounds[0]}-{bounds[-1]}")
    if features:
        parts.append(f"contracts over {', '.join(sorted(features))}")
    success = usage.solver_success
    if usage.valid_share < 0.5:
        parts.append(f"only {usage.valid_share:.0%} of tasks were valid: write positions the game accepts "
                     "and goals a good player reaches within the bound")
    elif success is not None and success > EASY:
        parts.append(f"the solver succeeds {success:.0%} of the time: make the tasks harder (tighter bound "
                     "or a higher target)")
    elif success is not None and success < HARD:
        parts.append(f"the solver succeeds {success:.0%} of the time: make the tasks easier (looser bound or "
                     "a lower target)")
    else:
        parts.append("the difficulty is about right")
    return "; ".join(parts)


def saturated_skills(skills: Mapping[str, Skill], retire_success: float, retire_after: int) -> list[str]:
    """Ids of the skills the solver has saturated, in id order."""
    return sorted(k for k, s in skills.items() if saturated(s.tasking.usage, retire_success, retire_after))
