"""One curriculum round on the real 2048 env: the proposer's G samples form one group, the solver's K attempts
at a task form another, rewards follow the issue's rules, and skill usage is recorded. The proposer and the
solver are scripted callers here (exact answers, exact rewards); the last test runs the real tiny model."""

from __future__ import annotations

import json

import pytest

from coplay.agent.prompts import encode
from coplay.config import CurriculumConfig, EngineConfig
from coplay.curriculum.gate import Gate
from coplay.curriculum.round import run_round
from coplay.curriculum.routing import Router
from coplay.engines.base import GenerationRequest, SamplingParams
from coplay.learn.advantages import sample_group_advantages
from coplay.skills.caller import Completion, FunctionCaller
from coplay.skills.schema import Contract, Skill

EASY = {"position": {"board": [[2, 2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]}, "goal": "make a 4",
        "contract": "max_tile >= 4", "bound": 3}
IMPOSSIBLE = {**EASY, "goal": "make 2048", "contract": "max_tile >= 2048", "bound": 5}
TOKENS = {"propose": 256, "act": 32}


def skill() -> Skill:
    return Skill(id="s1", name="merge", summary="merge equal tiles", plan=["slide"],
                 preconditions="merges >= 1", success="max_tile >= 4", abort="legal_moves == 0",
                 contract=Contract(add=["max_tile↑"]))


def scripted() -> FunctionCaller:
    """The proposer writes a solvable task, an impossible one and prose; the solver's first step alternates
    `left` (merges the two 2s) and `up` (changes nothing), later steps are all `up`: p = 2/4 on EASY."""
    calls = {"act": 0}

    def generate(adapter, prompts, n):
        if adapter == "propose":
            return [[json.dumps(EASY), "Task: " + json.dumps(IMPOSSIBLE), "make the biggest tile!"][:n]
                    for _ in prompts]
        first = calls["act"] == 0
        calls["act"] += 1
        return [[f"INTENTION: MERGE go\nACTION: {'left' if first and i % 2 == 0 else 'up'}"]
                for i in range(len(prompts))]

    return FunctionCaller(generate)


@pytest.mark.parametrize("reference", ["expert", "solver"])
def test_a_round_rewards_proposer_and_solver_by_the_rules(reference: str) -> None:
    cfg = CurriculumConfig(enabled=True, prompts=1, proposals=3, attempts=4, exploration_share=0.0)
    gate, skills = Gate("2048", max_bound=cfg.max_bound, reference=reference), {"s1": skill()}
    result = run_round(scripted(), gate, Router(exploration_share=0.0), skills, cfg, 1, "rules", TOKENS)
    proposer = [s for s in result.samples if s.adapter == "propose"]
    # p = 0.5; unreachable (passed 7 of the gate's 8 checks: gate_credit 0.2 x 7/8); unparseable
    assert [s.reward for s in proposer] == pytest.approx([1.0, 0.2 * 7 / 8, 0.0])
    assert len({s.group_id for s in proposer}) == 1
    assert [o.verdict.reason for o in result.outcomes] == [None, "unreachable", "unparseable"]
    log = result.metrics()["tasks"]  # what the proposer wrote and why the gate refused it, in the summary
    assert [(t["reason"], t["skill"], t["reward"]) for t in log] == [
        (None, "s1", 1.0), ("unreachable", "s1", pytest.approx(0.175)), ("unparseable", None, 0.0)]
    assert log[0]["task"] == EASY and log[0]["p"] == 0.5 and log[2]["task"] is None
    assert result.counts["unreachable"] == result.counts["unparseable"] == result.counts["valid"] == 1
    solver = [s for s in result.samples if s.adapter == "act"]
    # the impossible task trains nothing
    assert {s.group_id for s in solver} == {"it1/curriculum/2048/solve/0"}
    assert sorted(s.reward for s in solver) == [0.0] * 6 + [1.0] * 2  # 2 one-step wins, 2 three-step losses
    advantages = sample_group_advantages(result.samples)
    assert advantages[proposer[0].sample_id] > 0 > advantages[proposer[1].sample_id]
    assert any(advantages[s.sample_id] > 0 for s in solver)
    assert any(advantages[s.sample_id] < 0 for s in solver)
    usage = skills["s1"].tasking.usage
    assert (usage.proposed, usage.valid, usage.attempts, usage.successes, usage.last_used) == (3, 1, 4, 2, 1)
    assert skills["s1"].tasking.examples == [EASY]
    metrics = result.metrics()
    assert metrics["valid_rate"] == pytest.approx(1 / 3) and metrics["mid_share"] == pytest.approx(1 / 3)


def test_the_solver_never_sees_the_contract() -> None:
    seen: list[str] = []
    inner = scripted()

    def spy(adapter, prompts, n):
        if adapter == "act":
            seen.extend(m["content"] for p in prompts for m in p)
        return inner.generate(adapter, prompts, n)

    cfg = CurriculumConfig(enabled=True, prompts=1, proposals=1, attempts=2)
    run_round(FunctionCaller(spy), Gate("2048"), Router(), {}, cfg, 1, "rules", TOKENS)
    assert seen and any("make a 4 (within 3 steps)" in text for text in seen)
    assert not any("max_tile >= 4" in text for text in seen)


def test_tasks_beyond_the_mix_cap_are_not_played_nor_trained() -> None:
    cfg = CurriculumConfig(enabled=True, prompts=2, proposals=3, attempts=2, exploration_share=1.0)
    result = run_round(scripted(), Gate("2048"), Router(exploration_share=1.0), {}, cfg, 2, "rules", TOKENS,
                       max_tasks=1)
    assert result.counts["unplayed"] >= 1
    assert result.metrics()["exploration_kept"] == [EASY]  # p = 1/2 on the exploration stream
    assert {s.group_id for s in result.samples if s.adapter == "propose"} == {"it2/curriculum/2048/propose/0"}


def test_a_group_too_large_for_the_cap_is_skipped_and_a_smaller_one_played() -> None:
    inner = scripted()

    def generate(adapter, prompts, n):  # group 0: two valid tasks; group 1: one valid and prose
        if adapter == "propose":
            return [[json.dumps(EASY)] * n if i == 0 else [json.dumps(EASY), "prose"][:n]
                    for i in range(len(prompts))]
        return inner.generate(adapter, prompts, n)

    cfg = CurriculumConfig(enabled=True, prompts=2, proposals=2, attempts=2, exploration_share=1.0)
    result = run_round(FunctionCaller(generate), Gate("2048"), Router(exploration_share=1.0), {}, cfg, 3,
                       "rules", TOKENS, max_tasks=1)
    assert result.counts["unplayed"] == 2
    assert {s.group_id for s in result.samples if s.adapter == "propose"} == {"it3/curriculum/2048/propose/1"}
    assert len([s for s in result.samples if s.adapter == "act"]) > 0


def test_exploration_tasks_the_solver_reached_are_the_induction_candidates() -> None:
    cfg = CurriculumConfig(enabled=True, prompts=1, proposals=3, attempts=4, exploration_share=1.0)
    result = run_round(scripted(), Gate("2048"), Router(exploration_share=1.0), {}, cfg, 2, "rules", TOKENS)
    (found,) = result.metrics()["induction_candidates"]  # EASY (p = 1/2); the impossible task never counts
    assert found["task"] == EASY and found["p"] == 0.5 and len(found["attempts"]) == 2
    for attempt in found["attempts"]:  # one `left` merged the two 2s into a 4
        assert "max_tile↑" in attempt["effects"] and attempt["tag"] == "MERGE" and attempt["steps"] == 1
        assert attempt["start_view"]["max_tile"] == 2 and attempt["end_view"]["max_tile"] == 4
    routed = run_round(scripted(), Gate("2048"), Router(exploration_share=0.0), {"s1": skill()},
                       CurriculumConfig(enabled=True, prompts=1, proposals=3, attempts=4,
                                        exploration_share=0.0), 2, "rules", TOKENS)
    assert routed.metrics()["induction_candidates"] == []  # a skill's own tasks induce nothing


def test_unguided_prompts_name_no_skill() -> None:
    seen: list[str] = []
    inner = scripted()

    def spy(adapter, prompts, n):
        if adapter == "propose":
            seen.extend(p[1]["content"] for p in prompts)
        return inner.generate(adapter, prompts, n)

    cfg = CurriculumConfig(enabled=True, prompts=2, proposals=1, attempts=1, unguided=True)
    run_round(FunctionCaller(spy), Gate("2048"), Router(exploration_share=0.0), {"s1": skill()}, cfg, 1, "r",
              TOKENS)
    assert len(seen) == 2 and not any("Skill s1" in text for text in seen)


def test_a_round_with_the_real_tiny_model_counts_what_it_cannot_use(tiny_model_config) -> None:
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_model_len=4096))
    try:
        def generate(adapter, prompts, n, max_tokens):
            requests = [GenerationRequest(encode(engine.tokenizer, p), None,
                                          SamplingParams(temperature=1.0, max_tokens=min(max_tokens, 48)),
                                          seed=31 * i + j) for i, p in enumerate(prompts) for j in range(n)]
            outs = engine.generate(requests)
            pairs = list(zip(requests, outs, strict=True))
            return [[Completion(text=o.text, prompt_ids=list(r.prompt_ids),
                                completion_ids=list(o.token_ids), logprobs=list(o.logprobs))
                     for r, o in pairs[i * n:(i + 1) * n]] for i in range(len(prompts))]

        cfg = CurriculumConfig(enabled=True, prompts=1, proposals=2, attempts=2)
        result = run_round(FunctionCaller(generate, pass_max_tokens=True), Gate("2048"), Router(),
                           {"s1": skill()}, cfg, 1, "rules", TOKENS)
    finally:
        engine.close()
    proposer = [s for s in result.samples if s.adapter == "propose"]
    assert len(proposer) == 2 and all(s.completion_ids and s.reward is not None for s in proposer)
    assert sum(result.counts.values()) == 2  # every answer got a verdict, counted by reason
    assert all(o.reward == 0.0 for o in result.outcomes if not o.verdict.valid)


def test_constrained_solver_answers_carry_the_rollouts_intention_budget() -> None:
    from coplay.agent.constraint import actions_regex
    from coplay.curriculum.round import _act_answers

    seen: list[str | None] = []

    class Recording:
        def complete(self, adapter, prompts, n, max_tokens, regex=None):
            seen.append(regex)
            return [[None] for _ in prompts]

    active = [{"info": {"legal_actions": ["left", "up"]}}]
    _act_answers(Recording(), "2048", active, ["p"], 32, True, intention_chars=0)
    _act_answers(Recording(), "2048", active, ["p"], 32, True)
    assert seen == [actions_regex(["left", "up"], 0), actions_regex(["left", "up"])]
