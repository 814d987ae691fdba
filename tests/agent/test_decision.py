"""The decision agent (docs/agents.md, issue 5) with the real tiny model's tokenizer and chat template.

Where the logic must be exercised deterministically (retrieval due / not due, skill success and abort), a
`ScriptedEngine` stands in for the model's *choices* only: it answers given completion texts, tokenized by
the real tokenizer, with made-up log-probs, like the skill bank's scripted callers. Everything else is real:
prompts, parsing, the skill bank and its abort rule. The last tests go through the real `HfEngine`.
"""

from __future__ import annotations

import asyncio

import pytest

from coplay.agent.bank_view import BankSkills
from coplay.agent.decision import DecisionAgent, ModelSeat, derive_seed
from coplay.agent.prompts import HistoryEntry, build_act_prompt, build_retrieve_prompt
from coplay.engines.base import Engine, GenerationRequest, SamplingParams
from coplay.skills.schema import Bank, Contract, Skill, SkillStats
from tests.helpers import Answer, ScriptedEngine, scripted_logprob


def is_retrieve(prompt: str) -> bool:
    return "Candidate skills:" in prompt


def answers(act: list[str], retrieve: list[str] | None = None) -> Answer:
    """Answer the i-th act call with act[i] (the last one repeats), likewise retrieve calls."""
    calls = {"act": 0, "retrieve": 0}

    def answer(request: GenerationRequest, prompt: str) -> str:
        kind = "retrieve" if is_retrieve(prompt) else "act"
        script = retrieve if kind == "retrieve" else act
        assert script, f"unexpected {kind} call"
        text = script[min(calls[kind], len(script) - 1)]
        calls[kind] += 1
        return text

    return answer


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


def skill(skill_id: str, name: str, preconditions: str, success: str, abort: str = "false",
          mean_duration: float = 0.0) -> Skill:
    return Skill(id=skill_id, name=name, summary=f"{name} on the board", plan=["look", "act"],
                 preconditions=preconditions, success=success, abort=abort,
                 contract=Contract(add=["max_tile↑"], dele=["empty_cells↓"], n=4),
                 stats=SkillStats(uses=4, successes=3, mean_duration=mean_duration))


def bank(*skills: Skill) -> BankSkills:
    return BankSkills(Bank(bank_key="2048", version=5, skills={s.id: s for s in skills}))


SEAT = ModelSeat(act="act@v3", retrieve="retrieve@v2",
                 act_sampling=SamplingParams(temperature=1.0, max_tokens=48),
                 retrieve_sampling=SamplingParams(temperature=1.0, max_tokens=12),
                 prompt_budget=4000, retrieve_every=0, top_k=3, history_len=2)
RULES = "Slide tiles; equal tiles merge."
LEGAL = ["up", "down", "left", "right"]


def make_agent(engine: Engine, skills: BankSkills | None, seat: ModelSeat = SEAT) -> DecisionAgent:
    return DecisionAgent(game="2048", rules=RULES, engine=engine, seat=seat, skills=skills,
                         act_group="2048/player/seed7", retrieve_group="2048/player",
                         seed_parts=(1, 2, "ep", "p0"), sample_prefix="ep/player_0")


def info(max_tile: int = 8, empty_cells: int = 10) -> dict:
    return {"features": {"max_tile": max_tile, "empty_cells": empty_cells}, "legal_actions": LEGAL,
            "score": 0}


def run_steps(agent: DecisionAgent, infos: list[dict]) -> list[tuple]:
    """Play len(infos) steps through `decide` and `observe_outcome` (reward 1 each)."""

    async def play():
        out = []
        for t, inf in enumerate(infos):
            step, samples = await agent.decide(t, f"board at step {t}\n"
                                                  f"max tile {inf['features']['max_tile']}", inf)
            step.reward = 1.0
            agent.observe_outcome(step)
            out.append((step, samples))
        return out

    return asyncio.run(play())


ACT_KEEP = "INTENTION: MERGE build the corner\nSKILL: KEEP\nACTION: left"
ACT_SWITCH = "INTENTION: SURVIVE free cells\nSKILL: SWITCH\nACTION: up"


def test_samples_carry_the_exact_tokens_logprobs_versions_and_groups(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP], ["SKILL: s1"]))
    agent = make_agent(engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096")))
    (step0, samples0), (step1, samples1) = run_steps(agent, [info(), info()])
    retrieve, act = samples0
    assert (retrieve.adapter, retrieve.adapter_version, retrieve.group_id) == ("retrieve", 2, "2048/player")
    assert (act.adapter, act.adapter_version, act.group_id) == ("act", 3, "2048/player/seed7")
    # exactly what the engine was asked and answered
    assert [retrieve.prompt_ids, act.prompt_ids] == [engine.requests[0].prompt_ids,
                                                     engine.requests[1].prompt_ids]
    expected_ids = tokenizer(ACT_KEEP, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert act.completion_ids == expected_ids
    assert act.logprobs == [scripted_logprob(t, i) for i, t in enumerate(expected_ids)]
    assert act.temperature == 1.0 and act.finish_reason == "stop" and act.completion_text == ACT_KEEP
    # the prompt is the one prompt builder's, with the active skill's protocol in it
    _, ids, _ = build_act_prompt(tokenizer, SEAT.prompt_budget, "2048", RULES, "board at step 0\nmax tile 8",
                              LEGAL, agent.skills.protocol_text("s1"), [])
    assert act.prompt_ids == ids
    assert "[s1] merge corner" in tokenizer.decode(act.prompt_ids)
    # seeds derive from (run seed, iteration, episode, seat, step, call), so a replay samples the same
    assert engine.requests[1].seed == derive_seed(1, 2, "ep", "p0", 0, "act") != engine.requests[0].seed
    assert step0.sample_ids == ["ep/player_0/t0/retrieve", "ep/player_0/t0/act"]
    assert [s.sample_id for s in samples1] == ["ep/player_0/t1/act"]
    assert (step0.action, step0.intention, step0.skill_id, step0.parse_error) == (
        "left", "MERGE build the corner", "s1", "")
    # the second prompt shows the first step in its history
    _, ids1, _ = build_act_prompt(tokenizer, SEAT.prompt_budget, "2048", RULES, "board at step 1\nmax tile 8",
                               LEGAL, agent.skills.protocol_text("s1"),
                               [HistoryEntry(0, "MERGE build the corner", "left", 1.0)])
    assert samples1[0].prompt_ids == ids1


def test_an_empty_bank_means_playing_without_retrieval(tokenizer):
    for skills in (None, bank()):
        engine = ScriptedEngine(tokenizer, answers([ACT_KEEP]))
        results = run_steps(make_agent(engine, skills), [info()] * 3)
        assert [len(samples) for _, samples in results] == [1, 1, 1]
        assert all(s.adapter == "act" for _, samples in results for s in samples)
        assert all(step.skill_id is None for step, _ in results)
        assert "Active skill: none." in engine.prompts[0]


def test_retrieval_is_due_when_no_skill_is_active_and_after_switch(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP, ACT_KEEP, ACT_SWITCH, ACT_KEEP], ["SKILL: s1"]))
    agent = make_agent(engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096")))
    results = run_steps(agent, [info()] * 6)
    retrieved_at = [step.t for step, samples in results if any(s.adapter == "retrieve" for s in samples)]
    assert retrieved_at == [0, 3]  # t=0: no skill active; t=3: the act at t=2 answered SWITCH
    assert results[2][0].skill_event == "switch" and results[2][0].skill_id == "s1"
    assert [step.skill_id for step, _ in results] == ["s1"] * 6


def test_retrieve_none_leaves_no_skill_so_retrieval_is_due_again(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP], ["SKILL: NONE", "SKILL: s9", "SKILL: s1"]))
    agent = make_agent(engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096")))
    results = run_steps(agent, [info()] * 4)
    retrieves = [s for _, samples in results for s in samples if s.adapter == "retrieve"]
    assert [s.meta["t"] for s in retrieves] == [0, 1, 2]
    assert [s.meta["skill_id"] for s in retrieves] == [None, None, "s1"]
    assert "s9" in retrieves[1].meta["parse_error"] and agent.counters["retrieve_parse_error"] == 1
    assert [step.skill_id for step, _ in results] == [None, None, "s1", "s1"]


def test_retrieval_every_k_steps_while_a_skill_stays_active(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP], ["SKILL: s1"]))
    seat = ModelSeat(**{**SEAT.__dict__, "retrieve_every": 2})
    agent = make_agent(engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096")),
                       seat)
    results = run_steps(agent, [info()] * 5)
    assert [step.t for step, samples in results if len(samples) == 2] == [0, 2, 4]


def test_success_and_abort_mark_the_step_that_ended_the_skill(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP], ["SKILL: s1", "SKILL: s2", "SKILL: NONE"]))
    agent = make_agent(engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 64"),
                                    skill("s2", "free cells", "empty_cells >= 2", "empty_cells >= 12")))
    # t0: retrieve s1; t1: max_tile 64 -> s1 succeeded (marks t0), retrieve s2;
    # t2: empty_cells 1 -> s2's preconditions stopped holding before success -> abort (marks t1)
    results = run_steps(agent, [info(32, 5), info(64, 5), info(64, 1)])
    assert [step.skill_event for step, _ in results] == ["success", "abort", ""]
    assert [step.skill_id for step, _ in results] == ["s1", "s2", None]
    assert [len(samples) for _, samples in results] == [2, 2, 2]
    assert agent.counters["skill_success"] == 1 and agent.counters["skill_abort"] == 1


def test_a_skill_running_past_twice_its_mean_duration_aborts(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP], ["SKILL: s1"]))
    agent = make_agent(engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096",
                                          mean_duration=1.0)))
    results = run_steps(agent, [info()] * 5)
    # activated at t0; after 3 active steps (> 2 x 1) the check at t3 aborts it and marks t2
    assert [step.skill_event for step, _ in results] == ["", "", "abort", "", ""]
    assert [step.t for step, samples in results if len(samples) == 2] == [0, 3]


def test_unparseable_and_illegal_answers_take_the_fallback_and_are_recorded(tokenizer):
    engine = ScriptedEngine(tokenizer, answers(["I think left is good",
                                                "INTENTION: MERGE x\nACTION: diagonal",
                                                "intention: merge corner\n**Action:** `Left`"]))
    results = run_steps(make_agent(engine, None), [info()] * 3)
    errors = [step.parse_error for step, _ in results]
    assert "no INTENTION line" in errors[0] and "no ACTION line" in errors[0]
    assert "illegal action 'diagonal'" in errors[1] and results[1][0].action == "diagonal"
    assert errors[2] == "" and results[2][0].action == "left"  # tolerant of case, markdown, quotes
    assert all(len(samples) == 1 for _, samples in results)  # unparseable answers are still trained on


def test_a_prompt_that_cannot_fit_is_counted_and_makes_no_call(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP]))
    seat = ModelSeat(**{**SEAT.__dict__, "prompt_budget": 50})
    step, samples = run_steps(make_agent(engine, None, seat), [info()])[0]
    assert samples == [] and engine.requests == [] and "budget is 50" in step.parse_error


# ---- the real tiny model through the `hf` engine -----------------------------------------------------------

@pytest.fixture(scope="module")
def hf_engine(tiny_model_config, tmp_path_factory):
    """The real `hf` engine with `act@v1` (a LoRA adapter with random non-zero weights) loaded."""
    from coplay.artifacts import AdapterBundle
    from coplay.config import EngineConfig
    from coplay.engines.factory import make_engine
    from coplay.models.lora import random_adapter_folder

    bundle = AdapterBundle.read(random_adapter_folder(tiny_model_config, tmp_path_factory.mktemp("act-v1"),
                                                      seed=5))
    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_lora_rank=8, max_model_len=2048,
                                                         max_num_seqs=8, dtype="float32"))
    engine.load_adapter("act", 1, bundle.files, bundle.sha256)
    yield engine
    engine.close()


def test_real_model_samples_are_what_the_engine_scores(hf_engine):
    seat = ModelSeat(**{**SEAT.__dict__, "act": "act@v1", "retrieve": None,
                        "act_sampling": SamplingParams(temperature=1.0, max_tokens=24)})
    agents = [make_agent(hf_engine, None, seat) for _ in range(2)]
    first, again = (run_steps(agent, [info(), info()]) for agent in agents)
    for (step, samples), (step_again, samples_again) in zip(first, again, strict=True):
        (sample,) = samples
        assert sample.adapter_version == 1 and sample.group_id == "2048/player/seed7"
        assert "Observation:\nboard at step" in hf_engine.tokenizer.decode(sample.prompt_ids)
        assert 0 < len(sample.completion_ids) == len(sample.logprobs) <= 24
        # the behaviour log-probs at temperature 1 are the model's own: the engine scores them alike
        scored = hf_engine.score(sample.prompt_ids, sample.completion_ids, "act@v1")
        assert max(abs(a - b) for a, b in zip(scored, sample.logprobs, strict=True)) < 1e-4
        assert sample.completion_text == hf_engine.tokenizer.decode(sample.completion_ids,
                                                                    skip_special_tokens=True)
        # same (run seed, iteration, episode, seat, step): the same tokens
        assert samples_again[0].completion_ids == sample.completion_ids and step_again.action == step.action
        assert step.parse_error  # the untrained tiny model answers garbage: recorded, game fallback
    base = hf_engine.score(first[0][1][0].prompt_ids, first[0][1][0].completion_ids, None)
    # the adapter acted
    assert max(abs(a - b) for a, b in zip(base, first[0][1][0].logprobs, strict=True)) > 1e-3


def test_real_model_retrieval_prompt_matches_the_builder(hf_engine):
    agent = make_agent(hf_engine, bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096"),
                                       skill("s2", "free cells", "empty_cells < 4", "empty_cells >= 8")),
                       ModelSeat(**{**SEAT.__dict__, "act": None, "retrieve": None,
                                    "retrieve_sampling": SamplingParams(temperature=0.0, max_tokens=8),
                                    "act_sampling": SamplingParams(temperature=0.0, max_tokens=8)}))
    (step, samples), = run_steps(agent, [info()])
    retrieve, act = samples
    text = "\n\n".join(f"[{sid}]\n{body}"
                       for sid, body in agent.skills.candidates(info()["features"],
                                                                "board at step 0\nmax tile 8", 3))
    _, ids = build_retrieve_prompt(hf_engine.tokenizer, SEAT.prompt_budget, "2048",
                                   "board at step 0\nmax tile 8", text)
    assert retrieve.prompt_ids == ids and retrieve.adapter_version == 0 and act.adapter_version == 0
    assert retrieve.meta["parse_error"] and step.skill_id is None  # garbage answer: no skill, counted
    assert agent.counters["retrieve_parse_error"] == 1
    (_, again), = run_steps(make_agent(hf_engine, agent.skills, agent.seat), [info()])
    assert again[0].completion_ids == retrieve.completion_ids
