"""The ablation switch (`ablation.variant`, docs/ablations.md): per variant, what runs and what does not, at
the level of the functions the loop calls (the config's meaning table, the seat the policy plays with, the
decision agent's prompts and retrieval, the teacher data, the learner step, the final bank). The loop end to
end runs in tests/test_coevolution_bench.py (`benchmarks/coevolution.py --quick`)."""

from __future__ import annotations

import pytest

from coplay.config import VARIANT_PARTS, ConfigError, CoplayConfig, load_config, require_trainable
from coplay.driver.batch import train_on
from coplay.driver.cold_start import final_banks
from coplay.driver.plans import model_seat
from coplay.driver.records import IterationData
from coplay.driver.schedule import VersionLedger
from coplay.learn.teacher import expert_examples
from coplay.skills.schema import Bank
from tests.agent.test_decision import (
    ACT_KEEP,
    LEGAL,
    RULES,
    answers,
    bank,
    info,
    make_agent,
    run_steps,
    skill,
)
from tests.helpers import DEMO_CONFIG, ScriptedEngine

VERSIONS = {"act": 3, "retrieve": 2}


def variant(name: str, **extra: object) -> CoplayConfig:
    return CoplayConfig.model_validate({"ablation": {"variant": name, **extra}})


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


def test_full_is_the_default_and_turns_nothing_off():
    cfg = CoplayConfig()
    assert cfg.ablation.variant == "full"
    assert (cfg.ablation.runs_sft, cfg.ablation.trains_grpo, cfg.ablation.uses_bank,
            cfg.ablation.updates_bank, cfg.ablation.uses_adapters) == (True, True, True, True, True)


@pytest.mark.parametrize("name, sft, grpo, bank_in_prompts, bank_updates", [
    ("sft_only", True, False, False, False),
    ("sft_first_bank", True, False, True, False),
    ("sft_final_bank", True, False, True, False),
    ("grpo_no_bank", True, True, False, False),
    ("grpo_first_bank", True, True, True, False),
    ("base", False, False, False, False),
])
def test_each_variant_turns_off_what_the_paper_turns_off(name, sft, grpo, bank_in_prompts, bank_updates,
                                                         tmp_path):
    extra = {"bank_from": str(tmp_path)} if name == "sft_final_bank" else {}
    ab = variant(name, **extra).ablation
    assert (ab.runs_sft, ab.trains_grpo, ab.uses_bank, ab.updates_bank) == (sft, grpo, bank_in_prompts,
                                                                           bank_updates)
    assert set(VARIANT_PARTS) == {"full", "sft_only", "sft_first_bank", "sft_final_bank", "grpo_no_bank",
                                  "grpo_first_bank", "base"}


def test_invalid_combinations_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ConfigError, match="needs ablation.bank_from"):
        load_config(DEMO_CONFIG, ["ablation.variant=sft_final_bank"])
    with pytest.raises(ConfigError, match="only read by ablation.variant=sft_final_bank"):
        load_config(DEMO_CONFIG, ["ablation.variant=grpo_no_bank", f"ablation.bank_from={tmp_path}"])
    with pytest.raises(ConfigError, match="ablation.variant"):
        load_config(DEMO_CONFIG, ["ablation.variant=no_skills"])
    empty = load_config(DEMO_CONFIG, ["ablation.variant=sft_final_bank", f"ablation.bank_from={tmp_path}"])
    with pytest.raises(ConfigError, match="banks/<game>/v<n>.json"):
        require_trainable(empty)
    (tmp_path / "banks" / "tetris").mkdir(parents=True)
    (tmp_path / "banks" / "tetris" / "v1.json").write_bytes(Bank(bank_key="tetris").to_bytes())
    with pytest.raises(ConfigError, match="no bank of game 2048"):
        require_trainable(empty)


def test_sft_final_bank_starts_from_the_newest_bank_of_the_finished_run_renumbered(tmp_path):
    folder = tmp_path / "banks" / "2048"
    folder.mkdir(parents=True)
    old = Bank(bank_key="2048", version=2, iteration=3, skills={})
    newest = bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096")).bank
    newest.version, newest.iteration = 9, 7
    (folder / "v2.json").write_bytes(old.to_bytes())
    (folder / "v9.json").write_bytes(newest.to_bytes())
    cfg = load_config(DEMO_CONFIG, ["ablation.variant=sft_final_bank", f"ablation.bank_from={tmp_path}"])
    require_trainable(cfg)
    adopted = final_banks(cfg, {"2048": 4})
    assert list(adopted) == ["2048"]
    assert (adopted["2048"].version, adopted["2048"].iteration) == (5, 0)  # follows this run's seed v4
    assert list(adopted["2048"].skills) == ["s1"]
    assert final_banks(variant("grpo_first_bank"), {"2048": 4}) == {}


def test_the_seat_reads_the_variant():
    full = model_seat(CoplayConfig(), VERSIONS)
    assert (full.act, full.retrieve, full.uses_bank) == ("act@v3", "retrieve@v2", True)
    no_bank = model_seat(variant("grpo_no_bank"), VERSIONS, evaluation=True)
    assert (no_bank.act, no_bank.uses_bank) == ("act@v3", False)
    base = model_seat(variant("base"), VERSIONS)
    assert (base.act, base.retrieve, base.uses_bank) == (None, None, False)  # the model without adapters


def test_without_a_bank_the_act_prompt_has_no_skill_section_and_retrieve_is_never_called(tokenizer):
    skills = bank(skill("s1", "merge corner", "empty_cells >= 2", "max_tile >= 4096"))
    seat = model_seat(variant("grpo_no_bank"), VERSIONS)
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP]))  # a retrieve call would fail the script
    results = run_steps(make_agent(engine, skills, seat), [info()] * 3)
    assert [s.adapter for _, samples in results for s in samples] == ["act"] * 3
    assert all(step.skill_id is None for step, _ in results)
    for prompt in engine.prompts:
        assert "Active skill" not in prompt and "SKILL:" not in prompt and "merge corner" not in prompt
    # the same bank under `full` is retrieved and shown
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP], ["SKILL: s1"]))
    results = run_steps(make_agent(engine, skills, model_seat(CoplayConfig(), VERSIONS)), [info()])
    assert [s.adapter for s in results[0][1]] == ["retrieve", "act"]
    assert "Active skill:" in engine.prompts[-1] and "SKILL: KEEP or SWITCH" in engine.prompts[-1]


def test_teacher_prompts_without_a_bank_match_the_agent_s_prompts():
    examples = expert_examples("2048", [7], RULES, max_steps=3, skill_section=False)
    assert [e.adapter for e in examples] == ["act"] * 3
    for e in examples:
        text = "\n".join(m["content"] for m in e.messages)
        assert "Active skill" not in text and "SKILL:" not in text
    with_bank = expert_examples("2048", [7], RULES, max_steps=1)
    assert "Active skill: none." in with_bank[0].messages[-1]["content"]


@pytest.mark.parametrize("name", ["sft_only", "sft_first_bank", "base"])
def test_variants_without_grpo_take_no_learner_step(name):
    ledger = VersionLedger({0: {"act": 1, "retrieve": 1}})
    data = IterationData(1, [], [], {"2048": 0})
    # no learner is reached: the system argument is never touched
    assert train_on(None, variant(name), data, ledger) is None
    assert ledger.latest_step == 0 and ledger.latest() == {"act": 1, "retrieve": 1}


def test_a_legal_list_is_still_there_without_the_skill_section(tokenizer):
    from coplay.agent.prompts import build_act_prompt

    _, ids, trims = build_act_prompt(tokenizer, 4000, "2048", RULES, "board", LEGAL, None, [],
                                     skill_section=False)
    text = tokenizer.decode(ids)
    assert trims == () and "Legal actions:\nup\ndown" in text and "ACTION:" in text
    assert "Active skill" not in text
