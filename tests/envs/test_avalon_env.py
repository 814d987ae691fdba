"""The Avalon AEC env: PettingZoo API and seed tests, determinism, state round trip, garbage actions never
raise, no leakage of hidden roles (canary labels), and observations faithful to the public history."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, seed_test

from coplay_envs.avalon.bots import ExpertBot, RandomBot
from coplay_envs.avalon.env import RULES
from coplay_envs.avalon.features import features_from_view
from coplay_envs.avalon.text import render
from coplay_envs.avalon_v0 import env as make_env
from coplay_envs.avalon_v0 import raw_env


def trajectory(env, seed: int, bot_seed: int, steps: int | None = None) -> list[str]:
    """Play random bots; return every observation and info (JSON) seen, for bit-for-bit comparison."""
    env.reset(seed=seed)
    bots = {a: RandomBot(seed=bot_seed + i, agent=a) for i, a in enumerate(env.possible_agents)}
    seen = []
    for n, agent in enumerate(env.agent_iter()):
        obs, reward, terminated, truncated, info = env.last()
        seen.append(obs + json.dumps(info, sort_keys=True) + repr((reward, terminated, truncated)))
        if steps is not None and n >= steps:
            break
        env.step(None if terminated or truncated else bots[agent].act(obs, info).action)
    return seen


@pytest.mark.parametrize("kwargs", [{}, {"discussion_rounds": 0, "auto_approve_fifth": True},
                                    {"discussion_rounds": 2, "max_message_chars": 50}])
def test_pettingzoo_api_and_seed_tests(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api_test(make_env(**kwargs), num_cycles=200)
        seed_test(lambda: make_env(**kwargs), num_cycles=200)


def test_same_seed_same_trajectory_bit_for_bit():
    first = trajectory(raw_env(), seed=7, bot_seed=3)
    assert first == trajectory(raw_env(), seed=7, bot_seed=3)
    assert first != trajectory(raw_env(), seed=8, bot_seed=3)


def test_seeds_shuffle_roles_and_first_leader():
    deals = set()
    for seed in range(40):
        env = raw_env()
        env.reset(seed=seed)
        deals.add((tuple(env.game.roles), env.game.leader))
    assert len(deals) > 30
    roles_of_seat0 = set()
    for seed in range(40):
        env = raw_env()
        env.reset(seed=seed)
        roles_of_seat0.add(env.game.roles[0])
    assert roles_of_seat0 == {"merlin", "servant", "minion", "assassin"}


def test_state_round_trip_mid_game_continues_identically():
    env = raw_env()
    trajectory(env, seed=11, bot_seed=5, steps=37)
    state = env.infos[env.agent_selection]["state"]
    assert json.loads(json.dumps(state)) == state
    restored = raw_env()
    restored.reset(options={"state": json.loads(json.dumps(state))})
    assert restored.agent_selection == env.agent_selection
    for agent in env.agents:
        assert restored.infos[agent] == env.infos[agent]
        assert restored.observe(agent) == env.observe(agent)
    bots = {a: RandomBot(seed=99 + i, agent=a) for i, a in enumerate(env.possible_agents)}
    twin = {a: RandomBot(seed=99 + i, agent=a) for i, a in enumerate(env.possible_agents)}
    for agent, agent2 in zip(env.agent_iter(), restored.agent_iter(), strict=True):
        one, two = env.last(), restored.last()
        assert agent == agent2 and one[0] == two[0] and one[1:4] == two[1:4] and one[4] == two[4]
        done = one[2] or one[3]
        env.step(None if done else bots[agent].act(one[0], one[4]).action)
        restored.step(None if done else twin[agent].act(two[0], two[4]).action)
    assert not env.agents and not restored.agents


def test_restoring_a_finished_game_terminates_everyone():
    env = raw_env()
    env.reset(seed=3)
    bots = {a: RandomBot(seed=1 + i, agent=a) for i, a in enumerate(env.possible_agents)}
    final_state = None
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        if terminated:
            final_state = info["state"]
            break
        env.step(bots[agent].act(obs, info).action)
    restored = raw_env()
    restored.reset(options={"state": final_state})
    assert all(restored.terminations.values()) and restored.infos["player_0"]["legal_actions"] == []
    assert restored.infos["player_0"]["score"] == env.infos["player_0"]["score"] != 0
    for _agent in restored.agent_iter():
        restored.step("ignored")  # a dead agent's action is ignored, never raised on
    assert restored.agents == []
    restored.step("after the end")  # stepping once every seat is removed is a no-op
    raw_env().step("before reset")


def garbage_actions(rng: np.random.Generator, space) -> list[object]:
    return [None, "", b"\xff\xfe propose 0,1", "x" * 100_000, "\u2603 \U0001f600 say \u00e9", 3, 2.5,
            float("nan"), ["approve"], {"a": 1}, space.sample(), "propose " + ",".join(["1"] * 50),
            "assassinate -1", "say " + "\n" * 10, "approve\x00", "PROPOSE 0,1,2,3,4,5"]


def test_thousand_random_and_garbage_actions_never_raise():
    env = make_env()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    space = env.action_space("player_0")
    space.seed(0)
    invalid = 0
    for _ in range(1000):
        if not env.agents:
            env.reset()
        agent = env.agent_selection
        legal = env.infos[agent]["legal_actions"]
        pool = garbage_actions(rng, space) + list(legal)
        action = pool[int(rng.integers(len(pool)))]
        env.step(action)
        if agent in env.infos:
            invalid += bool(env.infos[agent]["invalid_action"])
        for a in env.agents:
            assert env.observation_space(a).contains(env.observe(a))
    assert invalid > 100


CANARIES = {"merlin": "CANARY_MERLIN_x9", "servant": "CANARY_SERVANT_q4", "minion": "CANARY_MINION_k7",
            "assassin": "CANARY_ASSASSIN_z2"}


def check_no_leak(env, agent: str) -> None:
    view = env.infos[agent]["view"]
    role = env.game.roles[int(agent.split("_")[1])]
    texts = {
        "observation": str(env.observe(agent)),
        "view": json.dumps({k: v for k, v in view.items() if k != "merlin_label"}),
        "features": json.dumps(env.infos[agent]["features"]),
        "legal_actions": json.dumps(env.infos[agent]["legal_actions"]),
    }
    allowed = {role} | ({"merlin"} if role == "assassin" else set())
    for where, text in texts.items():
        for other, canary in CANARIES.items():
            if other not in allowed or (other != role and where != "observation"):
                assert canary not in text, f"{agent} ({role}) sees {canary} in its {where}"
    if role == "assassin":  # the hunted role is named, never next to a seat
        for line in texts["observation"].splitlines():
            assert CANARIES["merlin"] not in line or "player_" not in line.replace(agent, ""), line
        assert view["merlin_label"] == CANARIES["merlin"]
    else:
        assert view["merlin_label"] is None
    assert view["role"] == CANARIES[role]


@pytest.mark.parametrize("bot_class", [ExpertBot, RandomBot])
def test_no_seat_sees_a_role_label_it_may_not_know(bot_class):
    for seed in range(6):
        env = raw_env(role_names=CANARIES)
        env.reset(seed=seed)
        bots = {a: bot_class(seed=seed * 10 + i, agent=a) for i, a in enumerate(env.possible_agents)}
        reached = set()
        for agent in env.agent_iter():
            for other in env.agents:
                check_no_leak(env, other)
            obs, _, terminated, truncated, info = env.last()
            reached.add(env.game.phase)
            env.step(None if terminated or truncated else bots[agent].act(obs, info).action)
        assert "over" in reached


def test_knowledge_per_role():
    env = raw_env()
    env.reset(seed=5)
    roles = env.game.roles
    evil = sorted(s for s, r in enumerate(roles) if r in ("minion", "assassin"))
    for seat, role in enumerate(roles):
        view = env.infos[f"player_{seat}"]["view"]
        expected = {"merlin": evil, "servant": [], "minion": [s for s in evil if s != seat],
                    "assassin": [s for s in evil if s != seat]}[role]
        assert view["known_evil"] == expected and view["side"] == ("evil" if seat in evil else "good")
        assert "roles" not in view and "votes" not in view


def test_observation_holds_the_whole_public_history():
    env = raw_env()
    env.reset(seed=21)
    bots = {a: ExpertBot(seed=i, agent=a) for i, a in enumerate(env.possible_agents)}
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        if terminated:
            break
        env.step(bots[agent].act(obs, info).action)
    events = env.game.events
    text = env.observe("player_2")
    for event in events:
        if event["kind"] == "message":
            assert f"player_{event['seat']} says: \"{event['text']}\"" in text
        if event["kind"] == "proposal":
            team = ",".join(map(str, event["team"]))
            assert (f"Quest {event['quest'] + 1}, proposal {event['attempt'] + 1}: player_{event['leader']} "
                    f"(leader) proposed team {team}.") in text
        if event["kind"] == "vote" and not event["auto"]:
            assert ", ".join(f"player_{s} {v}" for s, v in enumerate(event["votes"])) in text
    assert f"Game over: {env.game.winner} wins" in text


def test_infos_hold_the_contract_keys_and_features_come_from_the_view():
    env = raw_env()
    env.reset(seed=2)
    for _ in range(30):
        for agent in env.agents:
            info = env.infos[agent]
            assert set(info) >= {"legal_actions", "view", "features", "state", "score", "invalid_action"}
            assert info["features"] == features_from_view(info["view"])
            assert env.observe(agent) == render(info["view"], info["legal_actions"])
            assert all(isinstance(v, (int, float, bool)) for v in info["features"].values())
            assert (info["legal_actions"] != []) == (agent == env.agent_selection)
        env.step(env.infos[env.agent_selection]["legal_actions"][0].replace("<text>", "hello"))


def test_rules_text_is_short():
    assert len(RULES.splitlines()) <= 12


def test_bad_configuration_is_refused_with_the_key():
    with pytest.raises(ValueError, match="role_names"):
        raw_env(role_names={"oberon": "x"})
    with pytest.raises(ValueError, match="printable"):
        raw_env(role_names={"merlin": "Mer\nlin"})
    with pytest.raises(ValueError, match="discussion_rounds"):
        raw_env(discussion_rounds=-1)
    env = raw_env()
    env.reset(seed=0)
    state = dict(env.infos["player_0"]["state"])
    state["roles"] = ["merlin"] * 5
    with pytest.raises(ValueError, match="roles"):
        env.reset(options={"state": state})
    with pytest.raises(ValueError, match="discussion_rounds"):
        raw_env(discussion_rounds=2).reset(options={"state": env.infos["player_0"]["state"]})


def test_longest_game_with_longest_messages_stays_inside_the_observation_space():
    env = raw_env(discussion_rounds=2)
    env.reset(seed=0)
    state = dict(env.infos["player_0"]["state"])
    state.update(roles=["merlin", "servant", "servant", "minion", "assassin"], leader=0, pending=[0])
    env.reset(options={"state": state})
    longest = 0
    for team in ("0,1", "0,1,3", "0,1", "0,1,3", "0,1,2"):  # S, F, S, F, then five rejections
        for attempt in range(5):
            env.step(f"propose {team}")
            for _ in range(10):
                env.step("say " + "W" * 500)
            last = attempt == 4 and team != "0,1,2"
            for _ in range(5):
                env.step("approve" if last else "reject")
            for agent in env.agents if attempt == 4 else []:
                obs = env.observe(agent)
                assert env.observation_space(agent).contains(obs)
                longest = max(longest, len(obs))
        for _ in team.split(","):
            env.step("fail")
    assert env.game.winner == "evil" and env.game.quest_results == ["success", "fail", "success", "fail"]
    assert env.game.reason.startswith("five proposals")
    assert longest > env.observation_space("player_0").max_length / 2  # the bound is tight, not absurd


def test_a_seat_cannot_tell_apart_deals_it_may_not_distinguish():
    """Counterfactual check: re-deal the other seats' roles in every way the seat's knowledge allows; its
    observation, view, features and legal actions must not change (assassination phase excluded: there the
    Assassin acts in public, as at the table)."""
    import itertools

    snapshots = []
    for seed in range(3):
        env = raw_env()
        env.reset(seed=seed)
        bots = {a: RandomBot(seed=seed * 7 + i, agent=a) for i, a in enumerate(env.possible_agents)}
        for n, agent in enumerate(env.agent_iter()):
            obs, _, terminated, _, info = env.last()
            if terminated:
                break
            if n % 23 == 5 and env.game.phase != "assassinate":
                snapshots.append(info["state"])
            env.step(bots[agent].act(obs, info).action)
    assert len(snapshots) >= 9
    compared = 0
    for state in snapshots:
        roles = state["roles"]
        evil = {s for s, r in enumerate(roles) if r in ("minion", "assassin")}
        for seat in range(5):
            agent = f"player_{seat}"

            def seen(roles_: list[str], agent: str = agent, state: dict = state) -> str:
                env = raw_env()
                env.reset(options={"state": {**state, "roles": list(roles_)}})
                info = {k: v for k, v in env.infos[agent].items() if k != "state"}
                return env.observe(agent) + json.dumps(info, sort_keys=True)

            reference = seen(roles)
            for perm in set(itertools.permutations(roles)):
                perm_evil = {s for s, r in enumerate(perm) if r in ("minion", "assassin")}
                if perm[seat] != roles[seat] or (roles[seat] != "servant" and perm_evil != evil):
                    continue
                assert seen(list(perm)) == reference, (agent, roles[seat], perm)
                compared += 1
    assert compared > 300


def test_registry_builds_the_env_bots_and_rules():
    import coplay_envs

    env = coplay_envs.make_env("avalon")
    env.reset(seed=1)
    agent = env.agent_selection
    bot = coplay_envs.make_bot("avalon", "expert", seed=3, agent=agent)
    obs, _, _, _, info = env.last()
    assert bot.act(obs, info).action in info["legal_actions"]
    assert (coplay_envs.make_bot("avalon", "random", seed=3, agent=agent).act(obs, info).action
            in info["legal_actions"])
    assert coplay_envs.rules("avalon") == RULES


def test_ansi_render_is_a_spectator_view_with_every_role():
    env = raw_env(render_mode="ansi", role_names=CANARIES)
    env.reset(seed=4)
    env.step("propose 0,1")
    spectator = env.render()
    assert all(canary in spectator for canary in CANARIES.values()) and "proposed team 0,1" in spectator
    assert raw_env().render() is None
