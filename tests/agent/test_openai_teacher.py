"""An OpenAI-compatible endpoint as the cold-start teacher: it answers the same `act` prompts as the expert
bots' examples; its answers become canonical `act` completions, and what does not parse (or fails) is
dropped and counted, never guessed."""

from __future__ import annotations

import pytest
from test_openai_endpoint import MODEL, EndpointServer, closed_port_url

import coplay_envs
from coplay.agent.openai_player import OpenAIEndpoint
from coplay.agent.parsing import parse_act
from coplay.agent.prompts import act_messages
from coplay.config import ConfigError, load_config
from coplay.driver.cold_start import openai_teacher
from coplay.engines.base import SamplingParams
from coplay.learn.teacher import ChatExample, expert_examples, legal_actions_shown, openai_act_examples

GREEDY = SamplingParams(temperature=0.0, max_tokens=64)


@pytest.fixture(scope="module")
def avalon_examples() -> list[ChatExample]:
    return expert_examples("avalon", [7], coplay_envs.rules("avalon"), history_len=2, max_steps=12)


def test_legal_actions_shown_recovers_the_prompts_list():
    legal = ["propose 0,1", "say <text>", "approve"]
    assert legal_actions_shown(act_messages("avalon", "r", "obs", legal, None, [])) == legal
    assert legal_actions_shown(act_messages("avalon", "r", "obs", legal, None, [], legal_limit=2)) is None
    assert legal_actions_shown(act_messages("diplomacy", "r", "obs", [], None, [])) == []


def test_teacher_answers_the_same_prompts_in_the_act_format(avalon_examples):
    with EndpointServer() as server:
        examples, counts = openai_act_examples("avalon", avalon_examples, server.endpoint(), GREEDY)
    assert counts == {"prompts": len(avalon_examples), "kept": len(avalon_examples), "dropped_unparseable": 0,
                      "endpoint_errors": 0}
    assert [e.messages for e in examples] == [e.messages for e in avalon_examples]
    assert (sorted(str(r["body"]["messages"]) for r in server.requests)
            == sorted(str(e.messages) for e in examples))
    assert {(r["body"]["model"], r["body"]["temperature"]) for r in server.requests} == {(MODEL, 0.0)}
    for example in examples:
        legal = legal_actions_shown(example.messages)
        parsed = parse_act(example.completion, legal)
        assert example.adapter == "act" and parsed.error == ""
        assert example.completion == f"INTENTION: EXPLORE take the first option\nACTION: {parsed.action}"
        assert parsed.action == legal[0].replace("<text>", "I trust player_2")
    assert examples != avalon_examples  # the bots' own completions were replaced


def test_unusable_answers_are_dropped_and_counted(avalon_examples):
    modes = ["legal", "garbage", "illegal", "error500"]
    other = ChatExample("retrieve", [{"role": "user", "content": "pick"}], "SKILL: NONE")
    with EndpointServer(lambda n: modes[n % 4]) as server:
        examples, counts = openai_act_examples("avalon", avalon_examples + [other],
                                               server.endpoint(max_retries=0), GREEDY, concurrency=1)
    n = len(avalon_examples)
    assert len(server.requests) == n  # one request per act prompt; the retrieve example is not asked
    assert n >= 8 and counts["prompts"] == n
    assert counts["endpoint_errors"] == sum(1 for i in range(n) if modes[i % 4] == "error500")
    assert counts["dropped_unparseable"] == sum(1 for i in range(n) if modes[i % 4] in ("garbage", "illegal"))
    assert counts["kept"] == sum(1 for i in range(n) if i % 4 == 0) == len(examples) - 1
    assert examples[-1] == other
    assert all(parse_act(e.completion, legal_actions_shown(e.messages)).error == "" for e in examples[:-1])


def test_cold_start_refuses_a_teacher_that_gave_nothing(avalon_examples):
    cfg = load_config(overrides=["sft.teacher=openai", f"sft.endpoint.base_url={closed_port_url()}",
                                 f"sft.endpoint.model={MODEL}", "sft.endpoint.max_retries=0"])
    with pytest.raises(RuntimeError, match="gave no usable answer"):
        openai_teacher(cfg, "avalon", avalon_examples[:3])


def test_cold_start_teacher_uses_the_sft_endpoint(avalon_examples, monkeypatch):
    monkeypatch.setenv("COPLAY_TEACHER_KEY", "teacher-key")
    with EndpointServer() as server:
        cfg = load_config(overrides=["sft.teacher=openai", f"sft.endpoint.base_url={server.base_url}",
                                     f"sft.endpoint.model={MODEL}",
                                     "sft.endpoint.api_key_env=COPLAY_TEACHER_KEY"])
        examples, counts = openai_teacher(cfg, "avalon", avalon_examples[:5])
    assert counts["kept"] == len(examples) == 5
    assert {r["authorization"] for r in server.requests} == {"Bearer teacher-key"}
    assert {r["body"]["max_tokens"] for r in server.requests} == {cfg.sampling.max_tokens["act"]}


def test_openai_teacher_without_an_endpoint_is_rejected_at_load():
    with pytest.raises(ConfigError, match="sft.endpoint.base_url and sft.endpoint.model"):
        load_config(overrides=["sft.teacher=openai"])
    with pytest.raises(ConfigError, match="sft.endpoint.model"):
        load_config(overrides=["sft.teacher=openai", "sft.endpoint.base_url=http://127.0.0.1:8000/v1"])
    assert load_config(overrides=["sft.teacher=openai", "sft.enabled=false"]).sft.teacher == "openai"
    cfg = load_config(overrides=["sft.teacher=openai", "sft.endpoint.base_url=https://api.example.com/v1",
                                 "sft.endpoint.model=m", "sft.endpoint.api_key_env=K"])
    assert OpenAIEndpoint.from_config(cfg.sft.endpoint) == OpenAIEndpoint("https://api.example.com/v1", "m",
                                                                          "K", 60.0, 2)
