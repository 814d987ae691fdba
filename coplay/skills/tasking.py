"""What a skill carries for the proposer of skill-guided self-play (docs/curriculum.md): the rules of the
tasks that fit it, a few example tasks, its validator, and how its tasks have fared.

Kept apart from `schema.py` so the bank records stay small; every field has a default, so a bank file written
before these fields existed still loads. Standard library + the expression language only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from coplay.skills.expressions import parse_expression

MAX_EXAMPLES = 4


@dataclass
class TaskUsage:
    """How a skill's tasks fared: tasks proposed under it, those the gate kept, the solver's attempts at
    them and its successes, and the iteration of the last proposal. Routing reads `solver_success`."""

    proposed: int = 0
    valid: int = 0
    attempts: int = 0
    successes: int = 0
    last_used: int = 0

    @property
    def valid_share(self) -> float:
        return self.valid / self.proposed if self.proposed else 0.0

    @property
    def solver_success(self) -> float | None:
        """Successes / attempts; None before any attempt (routing treats it as unknown, not as 0)."""
        return self.successes / self.attempts if self.attempts else None

    def record(self, iteration: int, valid: bool, outcomes: list[bool]) -> None:
        """Count one proposed task: whether the gate kept it and the solver's K outcomes on it."""
        self.proposed += 1
        self.valid += int(valid)
        self.attempts += len(outcomes)
        self.successes += sum(bool(o) for o in outcomes)
        self.last_used = max(self.last_used, iteration)


@dataclass
class TaskSpec:
    """The proposer's view of a skill. `rules`: which positions and goals fit (text shown in the proposer's
    prompt); `examples`: a few tasks the gate kept (the JSON the proposer answers in); `validator`: an
    expression that must hold at a task's start position (empty: the skill's preconditions); `usage`: the
    statistics routing reads."""

    rules: str = ""
    examples: list[dict[str, Any]] = field(default_factory=list)
    validator: str = ""
    usage: TaskUsage = field(default_factory=TaskUsage)

    def summary(self) -> str:
        """One line for the bank report: the usage statistics, the validator and the rules."""
        u = self.usage
        solved = "-" if u.solver_success is None else f"{u.solver_success:.0%}"
        return (f"{u.proposed} proposed, {u.valid_share:.0%} valid, solver success {solved} over "
                f"{u.attempts} attempts, last used it{u.last_used}; "
                f"validator {self.validator or '(preconditions)'}; "
                f"{len(self.examples)} examples; rules: {self.rules or '-'}")

    def add_example(self, task: Mapping[str, Any]) -> None:
        """Keep the newest `MAX_EXAMPLES` kept tasks (a prompt has room for a few)."""
        self.examples = [*self.examples, dict(task)][-MAX_EXAMPLES:]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TaskSpec:
        """Inverse of `to_json`; None or `{}` (a bank written before tasking existed): the defaults."""
        data = dict(data or {})
        spec = cls(rules=str(data.get("rules", "")), examples=[dict(e) for e in data.get("examples", [])],
                   validator=str(data.get("validator", "")), usage=TaskUsage(**data.get("usage", {})))
        parse_expression(spec.validator)
        return spec


def run_tasking(run_root: str | Path, bank_key: str) -> dict[str, TaskSpec]:
    """The tasking records a run's curriculum kept for the skills of `bank_key`
    (`curriculum/tasking.json`, docs/curriculum.md); {} without one. A file that does not parse is an error
    naming it."""
    path = Path(run_root) / "curriculum" / "tasking.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text()).get(bank_key, {})
        return {sid: TaskSpec.from_json(spec) for sid, spec in data.items()}
    except (ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: not a curriculum tasking file ({err})") from None


def apply_run_tasking(run_root: str | Path, bank: Any) -> Any:
    """`bank` with the run's curriculum tasking records over its skills' own (the report shows live
    statistics: during a run the curriculum keeps them in the run folder, not in bank versions)."""
    for sid, spec in run_tasking(run_root, bank.bank_key).items():
        if sid in bank.skills:
            bank.skills[sid].tasking = spec
    return bank
