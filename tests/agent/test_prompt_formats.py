"""The `act` prompt's two layouts (`rollout.prompt_format`, docs/agents.md). `full` is the prompt every run so
far trained and served on, byte for byte. `compact` says the rules once (the system turn), lists each legal
action at most once, shows history only when there is some, keeps the answer format the parser reads, still
shortens itself to fit a budget, and is what both the cold start's teacher data and the served seats get for
the same config. Real games (the bots' states), the real tiny-model tokenizer and chat template.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from test_openai_endpoint import EndpointServer

import coplay_envs
from coplay.agent.decision import DecisionAgent
from coplay.agent.prompts import (
    ACT_FORMAT,
    ORDERS_FORMAT,
    HistoryEntry,
    PromptTooLong,
    act_messages,
    build_act_prompt,
    encode,
    listing_lines,
)
from coplay.config import load_config
from coplay.driver.plans import model_seat
from coplay.learn.teacher import expert_examples
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, SeatPlayer, play_episodes
from tests.agent.test_decision import ACT_KEEP, SEAT, answers, info, make_agent, run_steps
from tests.helpers import ScriptedEngine

GAMES = ("2048", "candy_crush", "tetris", "mario", "avalon", "diplomacy")
SYSTEM_2048 = ("You are an expert player of the game 2048.\nRules:\nSlide tiles.\n\nAnswer in exactly "
               "this format:\nINTENTION: <TAG> <your subgoal in a few words>\nSKILL: KEEP or SWITCH   (only "
               "when a skill is active)\nACTION: <one legal action>\nTAG is one of: SETUP CLEAR MERGE ATTACK "
               "DEFEND NAVIGATE POSITION COLLECT BUILD SURVIVE OPTIMIZE EXPLORE EXECUTE.")
OBS_2048 = "Board\nYour move: one of up, left.\n"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


@pytest.fixture(scope="module")
def states() -> dict[str, list[tuple[str, list[str]]]]:
    """(observation, legal actions) of the first decisions of one seeded random-bot episode per game."""
    out: dict[str, list[tuple[str, list[str]]]] = {game: [] for game in GAMES}
    for game in GAMES:
        def hook(seat: str, obs: str, inf: dict, seen: list = out[game]) -> None:
            seen.append((str(obs), list(inf.get("legal_actions", []))))

        play_bot_episodes(game, "random", [5], max_steps=4, hook=hook)
    return {game: seen[:12] for game, seen in out.items()}


def test_full_is_the_prompt_of_every_earlier_run_byte_for_byte():
    history = [HistoryEntry(3, "MERGE corner", "left", 4.0)]
    first = act_messages("2048", "Slide tiles.\n", OBS_2048, ["up", "left"], None, [])
    assert first == act_messages("2048", "Slide tiles.\n", OBS_2048, ["up", "left"], None, [],
                                 prompt_format="full")
    assert first == [
        {"role": "system", "content": SYSTEM_2048},
        {"role": "user", "content": "Observation:\nBoard\nYour move: one of up, left.\n\nLegal actions:"
                                    "\nup\nleft\n\nActive skill: none.\n\nRecent steps: none yet.\n\n"
                                    "Your answer:"}]
    assert act_messages("2048", "Slide tiles.", "Board", ["up", "left", "down"], "Keep the corner.", history,
                        legal_limit=2)[1]["content"] == (
        "Observation:\nBoard\n\nLegal actions:\nup\nleft\n... and 1 more legal actions of the same forms\n\n"
        "Active skill:\nKeep the corner.\n\nRecent steps (oldest first):\nt=3: MERGE corner | action: left | "
        "reward 4\n\nYour answer:")
    diplomacy = act_messages("diplomacy", "Orders.", "Units", [], None, history, skill_section=False)
    assert diplomacy[1]["content"] == (
        "Observation:\nUnits\n\nLegal actions: see the observation.\n\nRecent steps (oldest first):\nt=3: "
        "MERGE corner | action: left | reward 4\n\nYour answer:")
    with pytest.raises(ValueError, match="prompt format 'short'"):
        act_messages("2048", "r", "o", ["up"], None, [], prompt_format="short")


def _expand(listing: str) -> list[str]:
    """The actions a compact `Legal actions (n...): a; head x|y` line stands for (its inverse)."""
    items = listing.split("): ", 1)[1].split("; ")
    out: list[str] = []
    for item in items:
        head, _, last = item.rpartition(" ")
        out += [f"{head} {alt}" for alt in last.split("|")] if "|" in last else [item]
    return out


def test_compact_lists_each_legal_action_once_and_completely(states, tokenizer):
    referred = listed = 0
    for game, seen in states.items():
        rules = coplay_envs.rules(game)
        for obs, legal in seen:
            full, compact = (act_messages(game, rules, obs, legal, None, [], prompt_format=f)
                             for f in ("full", "compact"))
            user = compact[1]["content"]
            assert compact[0] == full[0]  # the rules and the answer format: once, in the same system turn
            assert "none yet" not in user and "Active skill: none." not in user
            lines = listing_lines(obs, legal)
            if lines:  # the observation lists them: the prompt keeps those lines, points there, adds no list
                referred += 1
                assert all(line in user for line in lines) and "\nLegal actions: see " in user
                assert "\nLegal actions:\n" not in user and "Legal actions (" not in user
                assert "\nLegal actions:\n" in full[1]["content"]  # where `full` lists them once more
            elif any(legal):  # one list, each action once, in the given order
                listed += 1
                block, = (p for p in user.split("\n\n") if p.startswith("Legal actions ("))
                assert _expand(block) == [a for a in legal if a], (game, block)
            assert not any(ln.startswith("Your move:") and ln not in lines for ln in user.splitlines())
            assert len(encode(tokenizer, compact)) < len(encode(tokenizer, full)), (game, obs)
    assert referred and listed  # both kinds occur among the six games' states


def test_compact_keeps_the_answer_format_and_its_answers_parse(states, tokenizer):
    for game, seen in states.items():
        obs, legal = seen[0]
        system = act_messages(game, coplay_envs.rules(game), obs, legal, None, [], prompt_format="compact")[0]
        assert (ORDERS_FORMAT if game == "diplomacy" else ACT_FORMAT) in system["content"]
    # a decision agent on compact prompts: answers in that format parse, legal, no error
    for history_len in (0, 2):
        engine = ScriptedEngine(tokenizer, answers([ACT_KEEP]))
        agent = make_agent(engine, None, replace(SEAT, history_len=history_len, prompt_format="compact"))
        steps = run_steps(agent, [info()] * 4)
        assert all(step.action == "left" and not step.parse_error for step, _ in steps)
        prompts = engine.prompts
        if history_len == 0:
            assert not any("Recent steps" in p for p in prompts)  # no history section at all
        else:
            assert "Recent steps" not in prompts[0]  # none yet: no filler either
            assert all(0 < p.count("\nt=") <= 2 for p in prompts[1:])


def test_full_with_history_zero_keeps_its_none_yet_line(tokenizer):
    engine = ScriptedEngine(tokenizer, answers([ACT_KEEP]))
    run_steps(make_agent(engine, None, replace(SEAT, history_len=0)), [info()] * 2)
    assert all("Recent steps: none yet." in p for p in engine.prompts)


def test_compact_prompts_shorten_to_fit_and_refuse_what_cannot(tokenizer):
    history = [HistoryEntry(t, "MERGE corner", "left", 1.0) for t in range(12)]
    legal = [f"move piece {i} to column {i % 10}" for i in range(120)]

    def build(budget: int, actions: list[str], hist: list[HistoryEntry], obs: str = "board"):
        return build_act_prompt(tokenizer, budget, "2048", "Slide tiles.", obs, actions, None, hist,
                                prompt_format="compact")

    messages, ids, trims = build(10_000, legal[:4], history)
    assert trims == () and messages[1]["content"].count("\nt=") == 12
    _, ids, trims = build(len(ids) - 20, legal[:4], history)
    assert trims == ("history",) and len(ids) <= len(build(10_000, legal[:4], history)[1]) - 20
    no_history = len(build(10_000, legal, [])[1])
    messages, ids, trims = build(no_history - 50, legal, history)
    assert trims == ("history", "legal") and len(ids) <= no_history - 50
    assert "... and " in messages[1]["content"] and "Recent steps" not in messages[1]["content"]
    with pytest.raises(PromptTooLong):  # not even 4 legal actions and no history fit
        build(len(build(10_000, legal[:4], [])[1]) - 1, legal, history)
    # actions the observation lists are not repeated, so there is no list to cut: too long is refused
    listed_obs = "Legal moves: " + ", ".join(legal)
    shortest = len(build(10_000, legal, [], listed_obs)[1])
    assert 'Legal actions: see "Legal moves" above.' in build(10_000, legal, [], listed_obs)[0][1]["content"]
    with pytest.raises(PromptTooLong):
        build(shortest - 1, legal, history, listed_obs)


@pytest.mark.parametrize("prompt_format", ["full", "compact"])
def test_teacher_examples_and_served_prompts_share_the_configs_format(tokenizer, prompt_format):
    cfg = load_config(overrides=[f"rollout.prompt_format={prompt_format}", "rollout.history_len=2"])
    seat = replace(model_seat(cfg, {"act": 1, "retrieve": 1}), prompt_budget=100_000)
    assert seat.prompt_format == prompt_format
    game, rules = "candy_crush", coplay_envs.rules("candy_crush")
    examples = expert_examples(game, [5], rules, cfg.rollout.history_len, max_steps=1,
                               prompt_format=cfg.rollout.prompt_format)
    seen: list[tuple[str, dict]] = []
    play_bot_episodes(game, "expert", [5], max_steps=1, hook=lambda seat, obs, inf: seen.append((obs, inf)))
    legal = seen[0][1]["legal_actions"]
    engine = ScriptedEngine(tokenizer, answers([f"INTENTION: CLEAR x\nACTION: {legal[0]}"]))
    agent = DecisionAgent(game=game, rules=rules, engine=engine, seat=seat, skills=None, act_group="g",
                          retrieve_group="r", seed_parts=(1,), sample_prefix="p")
    step, _ = asyncio.run(agent.decide(0, seen[0][0], seen[0][1]))
    assert not step.parse_error
    assert engine.requests[0].prompt_ids == encode(tokenizer, examples[0].messages)
    assert examples[0].legal == tuple(legal)  # what an OpenAI teacher's answer is checked against
    compact = "Legal actions: see \"Swaps" in examples[0].messages[1]["content"]
    assert compact == (prompt_format == "compact")
    # an endpoint seat of that config is asked the same layout (the rollout runner passes it on)
    with EndpointServer(lambda n: "garbage") as server:
        ctx = RunnerContext(engine=None, rules=coplay_envs.rules, skills_for=lambda g, r: None, run_seed=1)
        plan = EpisodePlan(game, 5, "ep", SeatPlayer("openai", seat, server.endpoint(max_retries=0)),
                           max_steps=1)
        trajectory, = asyncio.run(play_episodes(ctx, [plan], concurrency=1))
        asked = server.requests[0]["body"]["messages"]
    assert asked == act_messages(game, rules, trajectory.steps[0].observation, legal, None, [],
                                 prompt_format=prompt_format)


@pytest.mark.parametrize("order", ["count", "board"])
def test_a_compact_prompt_refers_to_candy_crushs_swaps_listed_by_their_clears(order: str) -> None:
    """With `show_clears` the observation's one swaps line holds every legal swap (grouped by count, or in
    reading order with their counts), so the compact prompt lists them no second time."""
    env = coplay_envs.make_env("candy_crush", max_moves=6, show_clears=True, clears_order=order)
    obs, info = env.reset(seed=3)
    user = act_messages("candy_crush", "rules", obs, info["legal_actions"], None, [],
                        prompt_format="compact", skill_section=False)[1]["content"]
    assert "Legal actions: see the observation." in user
    assert all(user.count(a) == 1 for a in info["legal_actions"])
