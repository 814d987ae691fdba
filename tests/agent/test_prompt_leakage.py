"""No leakage in prompts (issues 4 and 5): the multi-seat canary test extended to every seat's prompt and
record.

Avalon is played with a unique canary string as each hidden role's label; Diplomacy with private negotiation
messages that carry canaries naming sender and recipient. Every seat is a model seat served by the real tiny
model through the `hf` engine and played by the episode runner (`play_episodes`). For every seat we check
the decoded prompt of every Sample (`prompt_ids` through the tokenizer), its completion, every Step
(observation, features before and after, action, intention) and the whole serialized Trajectory: no canary
that seat may not know appears. Positive controls show that the check can fail: each seat's prompts do hold
the canaries it may know (its own role label; the private messages sent to it).
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from coplay.config import EngineConfig
from coplay.engines.base import Completion, GenerationRequest, SamplingParams
from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, SeatPlayer, play_episodes
from coplay.types import Trajectory, to_dict
from tests.helpers import ScriptedEngine

AVALON_CANARIES = {"merlin": "CANARY_MERLIN_x9", "servant": "CANARY_SERVANT_q4", "minion": "CANARY_MINION_k7",
                   "assassin": "CANARY_ASSASSIN_z2"}
DIPLOMACY_CANARY = re.compile(r"CANARY-([A-Z]+)-([A-Z]+)")


@pytest.fixture(scope="module")
def engine(tiny_model_config):
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_model_len=8192, max_num_seqs=8,
                                                         dtype="float32"))
    yield engine
    engine.close()


def model_player(max_tokens: int = 8) -> SeatPlayer:
    from coplay.agent.decision import ModelSeat

    sampling = SamplingParams(temperature=1.0, max_tokens=max_tokens)
    return SeatPlayer("model", ModelSeat(act=None, retrieve=None, act_sampling=sampling,
                                         retrieve_sampling=sampling, prompt_budget=8192 - max_tokens,
                                         history_len=2))


def play(engine, plans: list[EpisodePlan]) -> list[Trajectory]:
    import coplay_envs

    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None,
                        run_seed=3)
    return asyncio.run(play_episodes(ctx, plans, concurrency=4))


def record_texts(traj: Trajectory, tokenizer) -> dict[str, str]:
    """Everything the seat's record holds, as text, by where it is."""
    texts = {"trajectory": json.dumps(to_dict(traj), ensure_ascii=False)}
    for sample in traj.samples:
        texts[f"{sample.sample_id} prompt"] = tokenizer.decode(sample.prompt_ids)
        texts[f"{sample.sample_id} completion"] = tokenizer.decode(sample.completion_ids)
    for step in traj.steps:
        texts[f"t{step.t} observation"] = step.observation
        texts[f"t{step.t} features"] = json.dumps([step.features_before, step.features_after])
        texts[f"t{step.t} action"] = f"{step.intention}\n{step.action}\n{step.parse_error}"
    return texts


def test_no_avalon_seat_sees_a_role_label_it_may_not_know(engine):
    plans = [EpisodePlan("avalon", seed, f"leak-avalon-{seed}", model_player(),
                         env_kwargs={"role_names": AVALON_CANARIES}, max_steps=20) for seed in (0, 1)]
    trajectories = play(engine, plans)
    roles_seen = set()
    for traj in trajectories:
        role = traj.role  # a seat's record names its own role by id (never by its display label)
        roles_seen.add(role)
        allowed = {role} | ({"merlin"} if role == "assassin" else set())
        assert traj.samples, f"{traj.seat}: no model call recorded"
        for where, text in record_texts(traj, engine.tokenizer).items():
            for other, canary in AVALON_CANARIES.items():
                if other not in allowed:
                    assert canary not in text, (f"{traj.episode_id} {traj.seat} ({role}) sees {canary} "
                                                f"in {where}")
            if role == "assassin" and where != "trajectory":  # the hunted role is named, never beside a seat
                for line in text.splitlines():
                    assert (AVALON_CANARIES["merlin"] not in line
                            or "player_" not in line.replace(traj.seat, "")), \
                        f"{traj.seat} ({role}) {where}: {line[:200]}"
        for sample in traj.samples:  # positive control: the check reads canaries where they are
            assert AVALON_CANARIES[role] in engine.tokenizer.decode(sample.prompt_ids)
    assert roles_seen == set(AVALON_CANARIES) and len(trajectories) == 10


class NegotiatingEngine(ScriptedEngine):
    """Negotiation prompts get scripted private messages carrying canaries (sender -> next power); every
    other call (the orders) goes to the real tiny model."""

    def __init__(self, inner, powers: list[str]) -> None:
        super().__init__(inner.tokenizer, self._messages)
        self.inner, self.powers = inner, powers

    def _messages(self, request: GenerationRequest, prompt: str) -> str:
        me = re.search(r"You are ([A-Z]+)\.", prompt)[1]
        to = self.powers[(self.powers.index(me) + 1) % len(self.powers)]
        return f"INTENTION: SETUP ally\nORDERS:\nto {to}: CANARY-{me}-{to} meet me\nto ALL: public from {me}"

    async def agenerate(self, request: GenerationRequest) -> Completion:
        if "NOW: negotiation round" in self.inner.tokenizer.decode(request.prompt_ids):
            return await super().agenerate(request)
        return await self.inner.agenerate(request)


def test_no_diplomacy_power_sees_a_private_message_it_was_not_part_of(engine):
    import coplay_envs

    powers = list(coplay_envs.seats("diplomacy"))
    negotiating = NegotiatingEngine(engine, powers)
    plans = [EpisodePlan("diplomacy", 0, "leak-diplomacy-0",
                         model_player(max_tokens=96),  # room for the messages
                         env_kwargs={"max_phases": 2, "negotiation_rounds": 1})]
    trajectories = play(negotiating, plans)
    assert sorted(t.seat for t in trajectories) == sorted(powers)
    assert len(negotiating.requests) == 14  # two negotiation rounds, 7 powers each
    for traj in trajectories:
        power = traj.seat
        # 2 negotiations + 2 movement phases, all model
        assert len(traj.steps) == 4 and len(traj.samples) == 4
        for where, text in record_texts(traj, engine.tokenizer).items():
            for sender, recipient in DIPLOMACY_CANARY.findall(text):
                assert power in (sender, recipient), f"{power} sees CANARY-{sender}-{recipient} in {where}"
        # positive control: the message sent to this power reached its next (real-model) prompt
        sender = powers[(powers.index(power) - 1) % len(powers)]
        order_prompts = [engine.tokenizer.decode(s.prompt_ids) for s in traj.samples
                         if "NOW: negotiation round" not in engine.tokenizer.decode(s.prompt_ids)]
        assert len(order_prompts) == 2 and f"CANARY-{sender}-{power}" in order_prompts[0]
