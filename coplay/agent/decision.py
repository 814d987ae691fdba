"""One seat's decision agent for one episode (docs/agents.md): retrieval when due, then one `act` call.

Per step: (1) the active skill is checked against the current features — success, or abort (its
preconditions stopped holding before success, its abort expression holds, or it ran past 2x its mean
duration); the step that ended it is marked; (2) retrieval is due when no skill is active, the previous `act`
answered `SKILL: SWITCH`, or every K steps (K = `retrieve_every`, 0 = never); the `retrieve` adapter picks
among the bank's top k; (3) one `act` call gives the intention, the optional directive and the action.
Every model call becomes a `Sample` with the exact tokens and behaviour log-probs. An empty bank means
playing without skills; a seat with `uses_bank=False` (the ablation variants without a bank) never
retrieves and its `act` prompt has no skill section at all. No ray, no torch: the engine is reached through
`Engine.agenerate`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from coplay.agent.constraint import SUBGOAL_MAX_CHARS, constraint_for
from coplay.agent.parsing import parse_act, parse_retrieve
from coplay.agent.prompts import (
    MULTI_LINE_GAMES,
    HistoryEntry,
    PromptTooLong,
    build_act_prompt,
    build_retrieve_prompt,
)
from coplay.engines.base import Completion, Engine, GenerationRequest, SamplingParams
from coplay.types import Sample, Step

Features = dict[str, Any]


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from (run seed, iteration, episode, seat, step, ...): stable across processes and runs
    (unlike Python's salted `hash`)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class SkillSource(Protocol):
    """What the agent needs from a skill bank (see `coplay.agent.bank_view.BankSkills`)."""

    def __len__(self) -> int: ...

    def candidates(self, features: Features, observation: str, k: int) -> list[tuple[str, str]]:
        """Top-k (skill id, rendered protocol) for the current view."""

    def protocol_text(self, skill_id: str) -> str: ...

    def status(self, skill_id: str, features: Features, steps_active: int) -> str:
        """"active", "success" or "abort" for an activation that has run `steps_active` steps."""

    def preconditions_hold(self, skill_id: str, features: Features) -> bool: ...


@dataclass(frozen=True)
class ModelSeat:
    """How the model plays a seat: engine names of the adapters and the sampling settings."""

    act: str | None  # "act@v3"; None = the base model
    retrieve: str | None
    act_sampling: SamplingParams
    retrieve_sampling: SamplingParams
    prompt_budget: int  # engine.max_model_len minus the largest max_tokens
    retrieve_every: int = 0
    top_k: int = 3
    history_len: int = 4
    constrained_orders: bool = False  # Diplomacy order lines restricted to legal orders (agent/constraint.py)
    constrained_actions: bool = False  # the ACTION line restricted to one legal action (agent/constraint.py)
    intention_chars: int = SUBGOAL_MAX_CHARS  # under a constraint: the INTENTION free text (0: the tag alone)
    uses_bank: bool = True  # False (ablation variants without a bank): no retrieval, no skill section
    prompt_format: str = "full"  # `rollout.prompt_format`: the act prompt's layout (agent/prompts.py)


def _version(engine_name: str | None) -> int:
    return int(engine_name.rsplit("@v", 1)[1]) if engine_name else 0


@dataclass
class DecisionAgent:
    """State of one seat over one episode; `decide` is called once per step of that seat."""

    game: str
    rules: str
    engine: Engine
    seat: ModelSeat
    skills: SkillSource | None
    act_group: str  # `<game>/<role>/seed<start seed>`: GRPO compares act returns within it at each t
    retrieve_group: str  # `<game>/<role>`: leave-one-out baseline over the learner step
    seed_parts: tuple[object, ...]
    sample_prefix: str  # the episode id and seat: sample ids are unique across a run
    counters: dict[str, int] = field(default_factory=dict)
    active: str | None = None
    active_steps: int = 0
    switch_requested: bool = False
    last_retrieval: int = -1
    history: list[HistoryEntry] = field(default_factory=list)
    previous: Step | None = None

    def __post_init__(self) -> None:
        if not self.seat.uses_bank:  # `ablation.variant` without a bank: the skills are never consulted
            self.skills = None

    def _count(self, key: str) -> None:
        self.counters[key] = self.counters.get(key, 0) + 1

    def _sample(self, adapter: str, engine_name: str | None, prompt_ids: list[int], out: Completion,
                sampling: SamplingParams, t: int, sample_id: str) -> Sample:
        return Sample(adapter=adapter, adapter_version=_version(engine_name), prompt_ids=prompt_ids,
                      completion_ids=list(out.token_ids), logprobs=list(out.logprobs),
                      group_id=self.act_group if adapter == "act" else self.retrieve_group,
                      temperature=sampling.temperature, completion_text=out.text,
                      finish_reason=out.finish_reason, sample_id=sample_id,
                      meta={"t": t, "engine_name": engine_name or "base"})

    def _update_active(self, features: Features) -> None:
        if self.active is None or self.skills is None:
            return
        status = self.skills.status(self.active, features, self.active_steps)
        if status != "active":
            if self.previous is not None:
                self.previous.skill_event = status
            self._count(f"skill_{status}")
            self.active = None

    def _retrieval_due(self, t: int) -> bool:
        if self.skills is None or len(self.skills) == 0:
            return False
        every = self.seat.retrieve_every
        return (self.active is None or self.switch_requested
                or (every > 0 and t - self.last_retrieval >= every))

    async def _retrieve(self, t: int, observation: str, features: Features, samples: list[Sample]) -> None:
        assert self.skills is not None
        candidates = self.skills.candidates(features, observation, self.seat.top_k)
        self.switch_requested = False
        self.last_retrieval = t
        if not candidates:
            self.active = None
            return
        text = "\n\n".join(f"[{sid}]\n{body}" for sid, body in candidates)
        try:
            _, ids = build_retrieve_prompt(self.engine.tokenizer, self.seat.prompt_budget, self.game,
                                           observation, text)
        except PromptTooLong:
            self._count("prompt_too_long")
            self.active = None
            return
        sampling = self.seat.retrieve_sampling
        out = await self.engine.agenerate(GenerationRequest(
            ids, self.seat.retrieve, sampling, seed=derive_seed(*self.seed_parts, t, "retrieve")))
        parsed = parse_retrieve(out.text, [sid for sid, _ in candidates])
        if parsed.error:
            self._count("retrieve_parse_error")
        sample = self._sample("retrieve", self.seat.retrieve, ids, out, sampling, t,
                              f"{self.sample_prefix}/t{t}/retrieve")
        sample.meta["skill_id"] = parsed.skill_id
        sample.meta["parse_error"] = parsed.error
        samples.append(sample)
        self.active, self.active_steps = parsed.skill_id, 0

    async def decide(self, t: int, observation: str, info: dict[str, Any]) -> tuple[Step, list[Sample]]:
        """One step: returns the Step (action, intention, skill, samples) and the Samples of this step.
        The caller fills the reward, features after and invalid flag once the game has stepped."""
        features = dict(info.get("features", {}))
        legal = list(info.get("legal_actions", []))
        self._update_active(features)
        samples: list[Sample] = []
        if self._retrieval_due(t):
            await self._retrieve(t, observation, features, samples)
        skill_text = self.skills.protocol_text(self.active) if (self.skills and self.active) else None
        step = Step(t=t, observation=observation, action="", reward=0.0, score=float(info.get("score", 0.0)),
                    skill_id=self.active, features_before=features)
        try:
            _, ids, trims = build_act_prompt(
                self.engine.tokenizer, self.seat.prompt_budget, self.game, self.rules, observation, legal,
                skill_text, self.history[-self.seat.history_len:] if self.seat.history_len else [],
                self.seat.uses_bank, self.seat.prompt_format)
            for trim in trims:  # the prompt was shortened to fit engine.max_model_len
                self._count(f"prompt_trim_{trim}")
        except PromptTooLong as exc:
            self._count("prompt_too_long")
            step.parse_error = str(exc)
            self._finish(step, samples)
            return step, samples
        sampling = self.seat.act_sampling
        regex = constraint_for(self.game, info, self.seat.constrained_orders, self.seat.constrained_actions,
                               self.seat.intention_chars)
        out = await self.engine.agenerate(GenerationRequest(
            ids, self.seat.act, sampling, seed=derive_seed(*self.seed_parts, t, "act"), regex=regex))
        parsed = parse_act(out.text, legal, multi_line=self.game in MULTI_LINE_GAMES)
        sample = self._sample("act", self.seat.act, ids, out, sampling, t, f"{self.sample_prefix}/t{t}/act")
        if regex:
            sample.meta["regex"] = regex  # the learner masks its logits the same way
        samples.append(sample)
        step.action, step.intention, step.parse_error = parsed.action, parsed.intention, parsed.error
        if parsed.error:
            self._count("act_parse_error")
        if parsed.skill_directive == "SWITCH" and self.active is not None:
            step.skill_event = "switch"
            self.switch_requested = True
            self.active = None
        self._finish(step, samples)
        return step, samples

    def _finish(self, step: Step, samples: list[Sample]) -> None:
        step.sample_ids = [s.sample_id for s in samples]
        if self.active is not None:
            self.active_steps += 1
        self.previous = step

    def observe_outcome(self, step: Step) -> None:
        """Called after the game stepped (reward filled): extends the history the next prompt shows."""
        self.history.append(HistoryEntry(step.t, step.intention, step.action, step.reward))
        del self.history[: max(0, len(self.history) - max(self.seat.history_len, 1))]
