"""The proposer's prompt and the solver's view of a task (docs/curriculum.md).

The proposer sees the game's rules, its feature names, the answer schema and, unless the prompt is of the
exploration stream (or the run is unguided), one skill: its protocol, its generation rules and a few tasks
the gate kept. The solver sees the goal and the bound as its active skill, never the contract.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from coplay.curriculum.task import Task
from coplay.skills.schema import Skill

ChatMessages = list[dict[str, str]]

ANSWER_FORMAT = (
    "Answer with one JSON object and nothing else:\n"
    '{"position": {<fields of the game state to start from>}, "goal": "<what the player is asked to do>", '
    '"contract": "<a condition over the features that must hold within the bound>", "bound": <steps>}\n'
    "The contract uses feature names, numbers, comparisons (< <= > >= == !=), and, or, not, parentheses."
)


def _skill_text(skill: Skill) -> str:
    spec = skill.tasking
    lines = [f"Skill {skill.id} ({skill.name}): {skill.summary}",
             f"It starts when: {skill.preconditions or 'true'}; it is done when: {skill.success or 'true'}."]
    if spec.rules:
        lines.append(f"Tasks that fit it: {spec.rules}")
    for example in spec.examples:
        lines.append(f"Example task: {json.dumps(example, sort_keys=True)}")
    return "\n".join(lines)


def proposer_messages(game: str, rules: str, features: Sequence[str], skill: Skill | None,
                      max_bound: int, state_hint: str, dealt: bool = False) -> ChatMessages:
    """The `propose` prompt: write one task for `skill` (None: any task, the exploration stream). `dealt`
    (`curriculum.position: dealt`): `state_hint` is the start position the game dealt, and the answer's
    position is `{}`."""
    answer = (ANSWER_FORMAT.replace("{<fields of the game state to start from>}", "{}") if dealt
              else ANSWER_FORMAT)
    system = (f"You write practice tasks for a player of the game {game}.\nRules:\n{rules.strip()}\n\n"
              f"{answer}")
    focus = (_skill_text(skill) + "\nWrite a task that practises this skill." if skill is not None
             else "Write any task that a good player could solve, but not trivially.")
    where = (f"Start position (dealt by the game; the task's position is {{}}): {state_hint}" if dealt
             else f"Position fields: {state_hint}")
    user = "\n\n".join([f"Features: {', '.join(features)}", where,
                        f"The bound is at most {max_bound} steps.", focus, "Your task:"])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def solver_goal(task: Task) -> str:
    """What the solver's `act` prompt shows as its active skill: the goal and the bound, never c."""
    return f"Task: {task.goal} (within {task.bound} steps)"
