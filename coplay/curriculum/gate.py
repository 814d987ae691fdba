"""The validity gate of skill-guided self-play (docs/curriculum.md): only a valid task earns its proposer a
reward, so an impossible or ill-formed task earns nothing.

A task is valid when, in order: the answer parses (`unparseable`) and fits the schema (`schema`); the env
accepts the position and the game is not already over there (`illegal_position`); the contract parses under
the bank's expression language with the game's feature names (`contract`); every threshold it compares a
feature with is on that feature's scale (`off_scale`: `coplay_envs.feature_scales`, e.g. `max_tile == 6.25`
names a 2048 tile that cannot exist); the skill's validator holds at
the start (`validator`); the contract does not already hold there (`trivial`, configurable); and a reference
reaches the contract at least once within the bound (`unreachable`): the game's expert bot, or one of the K
solver attempts. Every rejection is counted by reason in `Gate.counts`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coplay.curriculum.task import Task, TaskRejected, parse_task
from coplay.skills.expressions import Expression, ExpressionError, parse_expression

REASONS = ("unparseable", "schema", "illegal_position", "contract", "off_scale", "validator", "trivial",
           "unreachable")

Policy = Callable[[str, dict[str, Any]], str]  # (observation, info) -> action


def passed_share(reason: str | None) -> float:
    """The share of the gate's checks (`REASONS`, in the order they run) a task passed before `reason`
    refused it; 1.0 for a valid task (None)."""
    if reason is None:
        return 1.0
    return REASONS.index(reason) / len(REASONS) if reason in REASONS else 0.0


@dataclass(frozen=True)
class Attempt:
    """One play of a task from its start: whether the contract held within the bound, after how many steps
    (0: at the start), and the game reward collected."""

    satisfied: bool
    steps: int
    game_reward: float
    tag: str = ""  # the intention tag the solver named most often (empty when none parsed)
    start_view: Mapping[str, Any] = field(default_factory=dict)  # features at the task's start position
    end_view: Mapping[str, Any] = field(default_factory=dict)  # ... and where the attempt ended


@dataclass(frozen=True)
class Verdict:
    """The gate's answer: valid, or the first reason it failed (one of `REASONS`) and why."""

    valid: bool
    reason: str | None = None
    detail: str = ""
    task: Task | None = None
    start_state: dict[str, Any] | None = None
    reference: Attempt | None = None


def play(env: Any, start_state: Mapping[str, Any], policy: Policy, contract: Expression,
         bound: int) -> Attempt:
    """Play `policy` from `start_state` for at most `bound` steps; stop as soon as `contract` holds (it is
    checked at the start and after every step) or the game ends."""
    obs, info = env.reset(options={"state": dict(start_state)})
    total = 0.0
    if contract.holds(info["features"]):
        return Attempt(True, 0, 0.0)
    for step in range(1, bound + 1):
        obs, reward, terminated, truncated, info = env.step(policy(obs, info))
        total += float(reward)
        if contract.holds(info["features"]):
            return Attempt(True, step, total)
        if terminated or truncated:
            break
    return Attempt(False, min(step, bound), total)


class Gate:
    """Validity of the tasks of one single-player game. Holds one env (reset per check) and the counts."""

    def __init__(self, game: str, *, env_kwargs: Mapping[str, Any] | None = None, max_bound: int = 50,
                 reference: str = "expert", reference_attempts: int = 1, reject_trivial: bool = True) -> None:
        import coplay_envs

        if coplay_envs.spec(game).api != "gymnasium":
            raise ValueError(f"curriculum tasks need a single-player game; {game!r} has several seats")
        if reference not in ("expert", "solver"):
            raise ValueError(f"reference {reference!r}; expected 'expert' or 'solver'")
        self.game = game
        self.max_bound = max_bound
        self.reference = reference
        self.reference_attempts = reference_attempts
        self.reject_trivial = reject_trivial
        self.env_kwargs = dict(env_kwargs or {})
        self.env = coplay_envs.make_env(game, **self.env_kwargs)
        self.counts: Counter[str] = Counter()
        _, info = self.env.reset(seed=0)
        self.features: tuple[str, ...] = tuple(info["features"])
        self.scales: dict[str, tuple[int, ...]] = coplay_envs.feature_scales(game)

    def check_answer(self, text: str, *, seed: int = 0, skill_id: str | None = None, validator: str = "",
                     solver: Sequence[Attempt] | None = None) -> Verdict:
        """Parse a proposer's answer and check the task it holds (see `check`)."""
        try:
            task = parse_task(text, self.game, max_bound=self.max_bound, seed=seed, skill_id=skill_id)
        except TaskRejected as rejected:
            return self.reject(rejected.reason, rejected.detail, None)
        return self.check(task, validator=validator, solver=solver)

    def precheck(self, task: Task, validator: str = "") -> Verdict:
        """Every check but the reference (not counted): a valid verdict carries the start state. The solver
        plays only tasks that pass it."""
        try:
            start = self.start_state(task)
            contract = self._parse(task.contract, "contract")
            self._check_scale(contract)
            check_start = self._parse(validator, "validator")
        except TaskRejected as rejected:
            return Verdict(False, rejected.reason, rejected.detail, task)
        _, info = self.env.reset(options={"state": start})
        if not check_start.holds(info["features"]):
            return Verdict(False, "validator", f"the skill's validator {validator!r} does not hold at the "
                                               "start", task)
        if self.reject_trivial and contract.holds(info["features"]):
            return Verdict(False, "trivial", f"the contract {task.contract!r} already holds at the start",
                           task)
        return Verdict(True, None, "", task, start)

    def check(self, task: Task, *, validator: str = "", solver: Sequence[Attempt] | None = None) -> Verdict:
        """The verdict on `task`. With `reference="solver"`, `solver` holds the K attempts already played
        (`play`); without them the task cannot be judged reachable and is rejected as `unreachable`."""
        pre = self.precheck(task, validator)
        if not pre.valid or pre.start_state is None:
            return self.reject(pre.reason or "schema", pre.detail, task)
        start, contract = pre.start_state, parse_expression(task.contract)
        reached = self._reference(task, start, contract, solver)
        if reached is None:
            return self.reject("unreachable", f"no {self.reference} reference reached {task.contract!r} "
                                               f"within {task.bound} steps", task)
        self.counts["valid"] += 1
        return Verdict(True, None, "", task, start, reached)

    def start_state(self, task: Task) -> dict[str, Any]:
        """The full state a task starts from: the deal of `reset(seed=task.seed)` with the task's position
        fields over it; `TaskRejected("illegal_position")` when the env refuses it or the game is over."""
        _, info = self.env.reset(seed=task.seed)
        base = info["state"]
        unknown = sorted(set(task.position) - set(base))
        if unknown:
            raise TaskRejected("illegal_position", f"position keys {unknown} are not {self.game} state keys "
                                                   f"{sorted(base)}")
        state = {**base, **task.position}
        try:
            _, info = self.env.reset(options={"state": state})
        except (ValueError, TypeError, KeyError, IndexError) as err:
            raise TaskRejected("illegal_position",
                               f"the {self.game} env refuses the position ({err})") from None
        if not info["legal_actions"]:
            raise TaskRejected("illegal_position", "the game is already over at this position")
        return info["state"]

    def _check_scale(self, contract: Expression) -> None:
        """`TaskRejected("off_scale")` when the contract compares a feature with a value off its scale."""
        for name, value in contract.thresholds:
            scale = self.scales.get(name)
            if scale and value not in scale:
                raise TaskRejected("off_scale", f"{name} {value:g} is not on {self.game}'s scale for {name} "
                                                f"({min(scale)}..{max(scale)}: {len(scale)} values)")

    def _parse(self, text: str, reason: str) -> Expression:
        try:
            return parse_expression(text, self.features)
        except ExpressionError as err:
            raise TaskRejected(reason, str(err)) from None

    def _reference(self, task: Task, start: dict[str, Any], contract: Expression,
                   solver: Sequence[Attempt] | None) -> Attempt | None:
        if self.reference == "solver":
            return next((a for a in solver or () if a.satisfied), None)
        import coplay_envs

        for k in range(self.reference_attempts):
            bot = coplay_envs.make_bot(self.game, "expert", seed=task.seed + k)
            attempt = play(self.env, start, lambda obs, info, b=bot: b.act(obs, info).action, contract,
                           task.bound)
            if attempt.satisfied:
                return attempt
        return None

    def reject(self, reason: str, detail: str, task: Task | None) -> Verdict:
        """A counted rejection."""
        self.counts[reason] += 1
        return Verdict(False, reason, detail, task)
