"""Prompts that do not fit the context: the system turn stays whole, what was cut is reported and counted,
and the chat template gets `enable_thinking` as configured. Real tiny-model tokenizer and template."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from coplay.agent.prompts import (
    HistoryEntry,
    PromptTooLong,
    build_act_prompt,
    encode,
    fit_messages,
)
from coplay.engines.base import SamplingParams
from tests.agent.test_decision import ACT_KEEP, SEAT, answers, info, make_agent, run_steps
from tests.helpers import ScriptedEngine

SYSTEM = "You rank game segments. Answer on one line: RANK: <id> > <id>. Use NEW for none of these."


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


def _bank_prompt(lines: int) -> list[dict[str, str]]:
    body = "\n".join(f"[s{i}] merge row {i}: keep the big tile in the corner" for i in range(lines))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Game: 2048\nCandidates:\n{body}\n\nRank these ids: s0, s1, NEW"}]


def test_a_prompt_that_fits_is_untouched(tokenizer):
    messages = _bank_prompt(3)
    fitted, ids, cut = fit_messages(tokenizer, messages, 4000)
    assert (fitted, ids, cut) == (messages, encode(tokenizer, messages), 0)


def test_a_long_bank_prompt_keeps_its_system_turn_and_its_question(tokenizer):
    messages = _bank_prompt(200)
    full = len(encode(tokenizer, messages))
    budget = full // 3
    fitted, ids, cut = fit_messages(tokenizer, messages, budget)
    assert len(ids) <= budget and cut == full - len(ids) > 0
    assert fitted[0] == messages[0]  # the system turn (task and answer format) is whole
    user = fitted[1]["content"]
    assert user.startswith("Game: 2048") and user.endswith("Rank these ids: s0, s1, NEW")
    assert "tokens cut" in user and ids == encode(tokenizer, fitted)


def test_a_prompt_whose_system_turn_alone_is_too_long_is_refused(tokenizer):
    system_only = len(encode(tokenizer, [{"role": "system", "content": SYSTEM}]))
    with pytest.raises(PromptTooLong):
        fit_messages(tokenizer, _bank_prompt(50), system_only + 5)


def test_act_prompt_reports_each_trim(tokenizer):
    history = [HistoryEntry(t, "MERGE corner", "left", 1.0) for t in range(12)]
    legal = [f"move piece {i} to column {i % 10}" for i in range(120)]
    _, ids, trims = build_act_prompt(tokenizer, 4000, "2048", "Slide tiles.", "board", legal[:4], None,
                                     history)
    assert trims == ()
    full = len(ids)
    _, ids, trims = build_act_prompt(tokenizer, full - 20, "2048", "Slide tiles.", "board", legal[:4], None,
                                     history)
    assert trims == ("history",) and len(ids) <= full - 20
    no_history = len(build_act_prompt(tokenizer, 10_000, "2048", "Slide tiles.", "board", legal, None, [])[1])
    _, _, trims = build_act_prompt(tokenizer, no_history - 50, "2048", "Slide tiles.", "board", legal, None,
                                   history)
    assert trims == ("history", "legal")


def test_the_decision_agent_counts_history_trims(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP]))
    seat = replace(SEAT, prompt_budget=4000, history_len=8,
                   act_sampling=SamplingParams(temperature=1.0, max_tokens=48))
    agent = make_agent(engine, None, seat)
    run_steps(agent, [info()] * 3)
    assert agent.counters.get("prompt_trim_history", 0) == 0
    one_step = len(engine.requests[1].prompt_ids)  # the prompt with one step of history
    tight_seat = replace(seat, prompt_budget=one_step)
    tight = make_agent(ScriptedEngine(tokenizer, answers([ACT_KEEP])), None, tight_seat)
    run_steps(tight, [info()] * 4)  # steps 2 and 3 would show 2 and 3 history entries
    assert tight.counters["prompt_trim_history"] == 2


def test_enable_thinking_reaches_the_chat_template(tokenizer):
    thinking = copy.deepcopy(tokenizer)
    thinking.chat_template = ("{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
                              "{% if enable_thinking %}<think>{% else %}<answer>{% endif %}")
    messages = [{"role": "user", "content": "hi"}]
    assert thinking.decode(encode(thinking, messages)).endswith("<answer>")  # default: off
    thinking.coplay_enable_thinking = True
    assert thinking.decode(encode(thinking, messages)).endswith("<think>")


def test_load_tokenizer_takes_enable_thinking_from_the_config(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    tok = load_tokenizer(tiny_model_config.with_values({"enable_thinking": True}))
    assert tok.coplay_enable_thinking is True


def test_every_kind_of_trim_reaches_the_iteration_metrics():
    from coplay.driver.metrics import iteration_record
    from coplay.driver.records import CollectStats, IterationData
    from coplay.types import BankUpdate, RolloutResult

    results = [RolloutResult(b"", [], 1.0, counters={"steps": 10, "prompt_trim_history": 3,
                                                      "prompt_trim_legal": 1, "prompt_too_long": 1}),
               RolloutResult(b"", [], 2.0, counters={"steps": 5, "prompt_trim_history": 2})]
    bank = BankUpdate(reports=[{"bank_key": "2048", "prompts_trimmed": 4}, {"bank_key": "x"}])
    record = iteration_record(0, IterationData(0, [], [], {}), CollectStats.of(results, 3.0), bank, None, {},
                              3.0, {})
    assert record["prompt_trims"] == {"history": 5, "legal": 1, "too_long": 1, "bank": 4}
