"""A task of skill-guided self-play and the JSON the proposer answers in (docs/curriculum.md).

A task is (x, c): x = a start position (fields of the game's `info["state"]` that override the position
`reset(seed=seed)` deals), a goal in the skill's feature language and a step bound; c = the hidden contract,
an expression over `info["features"]` that must hold within the bound. The solver sees x, never c.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_GOAL_CHARS = 300

# What the proposer must answer: one JSON object (prose or a code fence around it is tolerated).
TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "position": {"type": "object", "description": "fields of the game's state to start from, e.g. "
                                                      "2048: {\"board\": [[2, 2, 0, 0], ...]}"},
        "goal": {"type": "string", "maxLength": MAX_GOAL_CHARS, "description": "what the solver is told"},
        "contract": {"type": "string", "description": "hidden: an expression over the game's features"},
        "bound": {"type": "integer", "minimum": 1,
                  "description": "steps within which the contract must hold"},
    },
    "required": ["position", "goal", "contract", "bound"],
    "additionalProperties": False,
}


class TaskRejected(ValueError):
    """A proposer answer or task that is not valid; `reason` is one of `gate.REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Task:
    """One proposed task. `skill_id` None: the exploration stream; `seed`: the deal the position edits."""

    game: str
    position: dict[str, Any]
    goal: str
    contract: str
    bound: int
    seed: int = 0
    skill_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def answer(self) -> dict[str, Any]:
        """The task as the proposer writes it (a skill's example)."""
        return {"position": self.position, "goal": self.goal, "contract": self.contract, "bound": self.bound}


def _first_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`: models wrap answers in prose or ``` fences."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise TaskRejected("unparseable", f"no JSON object in the answer {text[:80]!r}")


def validate_answer(data: Mapping[str, Any], max_bound: int) -> None:
    """Check `data` against `TASK_SCHEMA` (and the configured largest bound); `TaskRejected("schema")`."""
    missing = [k for k in TASK_SCHEMA["required"] if k not in data]
    extra = sorted(set(data) - set(TASK_SCHEMA["properties"]))
    if missing or extra:
        raise TaskRejected("schema", f"missing {missing}, unexpected {extra}")
    if not isinstance(data["position"], dict):
        raise TaskRejected("schema", f"position must be an object, got {type(data['position']).__name__}")
    for key in ("goal", "contract"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise TaskRejected("schema", f"{key} must be a non-empty string")
    if len(data["goal"]) > MAX_GOAL_CHARS:
        raise TaskRejected("schema", f"goal is {len(data['goal'])} characters; at most {MAX_GOAL_CHARS}")
    bound = data["bound"]
    if isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= max_bound:
        raise TaskRejected("schema", f"bound {bound!r} must be an integer in [1, {max_bound}]")


def parse_task(text: str, game: str, *, max_bound: int, seed: int = 0, skill_id: str | None = None,
               dealt: bool = False) -> Task:
    """The task in a proposer's answer, or `TaskRejected` with reason `unparseable` or `schema`. `dealt`
    (`curriculum.position: dealt`): the game deals the position, so the answer's must be `{}`."""
    if not isinstance(text, str):
        raise TaskRejected("unparseable", f"answer is {type(text).__name__}, not text")
    data = _first_object(text)
    validate_answer(data, max_bound)
    if dealt and data["position"]:
        raise TaskRejected("schema", f"positions are dealt (curriculum.position: dealt): position must be "
                                     f"{{}}, got keys {sorted(data['position'])}")
    return Task(game=game, position=dict(data["position"]), goal=data["goal"].strip(),
                contract=data["contract"].strip(), bound=int(data["bound"]), seed=seed, skill_id=skill_id)
