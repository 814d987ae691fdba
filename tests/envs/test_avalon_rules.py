"""Avalon rules on scripted games: votes and ties, five rejections, one fail, assassination hit and miss,
leader rotation, and the documented fallbacks for invalid actions."""

from __future__ import annotations

from typing import Any

import pytest

from coplay_envs.avalon.rules import majority_approves
from coplay_envs.avalon_v0 import raw_env

# Seat 0 Merlin, 1 and 2 Servants, 3 Minion, 4 Assassin.
ROLES = ["merlin", "servant", "servant", "minion", "assassin"]


def scripted_env(leader: int = 0, roles: list[str] | None = None, **kwargs: Any):
    env = raw_env(**kwargs)
    env.reset(seed=0)
    state = dict(env.infos["player_0"]["state"])
    state.update(roles=list(roles or ROLES), leader=leader, pending=[leader])
    env.reset(options={"state": state})
    return env


def proposal_round(env, team: str, votes: str, say: str = "say hi") -> None:
    """Propose `team`, everybody speaks once per round, then votes given as a string like 'aarrr'."""
    env.step(f"propose {team}")
    for _ in range(5 * env.discussion_rounds):
        env.step(say)
    for v in votes:
        env.step({"a": "approve", "r": "reject"}[v])


def final_rewards(env) -> dict[str, float]:
    rewards = {}
    for agent in env.agent_iter():
        _, reward, terminated, truncated, _ = env.last()
        assert terminated and not truncated
        rewards[agent] = reward
        env.step(None)
    return rewards


def test_majority_strict_and_tie_rejects():
    assert not majority_approves(2, 4)  # a tie rejects
    assert majority_approves(3, 4)
    assert not majority_approves(2, 5) and majority_approves(3, 5)


def test_two_of_five_rejects_three_passes_and_votes_revealed_by_seat():
    env = scripted_env(leader=1)
    proposal_round(env, "1,2", "aarrr")
    game = env.game
    assert game.phase == "propose" and game.proposal == 1 and game.leader == 2  # rotated after a rejection
    text = env.observe("player_4")
    assert ("player_0 approve, player_1 approve, player_2 reject, player_3 reject, player_4 reject "
            "-> rejected" in text)
    proposal_round(env, "1,2", "raaar")
    assert game.phase == "quest" and game.leader == 3 and game.pending == [1, 2]  # rotated after approval


def test_votes_are_secret_until_all_are_in():
    env = scripted_env()
    proposal_round(env, "0,1", "rr")  # two of five voted
    for agent in env.agents:
        assert "reject" not in env.observe(agent).split("History:")[1].split("To do:")[0]
        assert all(e["kind"] != "vote" for e in env.infos[agent]["view"]["history"])


def test_five_rejections_win_for_evil():
    env = scripted_env(leader=2)
    for _ in range(5):
        proposal_round(env, "0,1", "rrrrr")
    assert env.game.winner == "evil" and "five proposals" in env.game.reason
    assert final_rewards(env) == {"player_0": -1.0, "player_1": -1.0, "player_2": -1.0,
                                  "player_3": 1.0, "player_4": 1.0}


def test_auto_approve_fifth_sends_the_team_without_a_vote():
    env = scripted_env(auto_approve_fifth=True)
    for _ in range(4):
        proposal_round(env, "0,1", "rrrrr")
    leader = env.game.leader
    env.step("propose 1,2")
    for _ in range(5):
        env.step("say go")
    assert env.game.phase == "quest" and env.game.team == [1, 2] and env.game.leader == (leader + 1) % 5
    assert "approved automatically" in env.observe("player_0")


def test_one_fail_fails_the_quest_and_reveals_only_the_count():
    env = scripted_env()
    proposal_round(env, "0,3", "aaaaa")
    env.step("success")
    env.step("fail")
    game = env.game
    assert game.quest_results == ["fail"] and game.quest_fails == [1] and game.quest == 1
    event = [e for e in env.infos["player_1"]["view"]["history"] if e["kind"] == "quest"][0]
    assert set(event) == {"kind", "quest", "team", "fails", "result"}
    assert "Quest 1 result: FAIL (1 fail card) with team 0,3." in env.observe("player_1")


def test_good_seat_cannot_fail():
    env = scripted_env()
    proposal_round(env, "0,1", "aaaaa")
    env.step("fail")
    assert env.infos["player_0"]["invalid_action"] is True
    env.step("success")
    assert env.infos["player_1"]["invalid_action"] is False
    assert env.game.quest_results == ["success"]


def test_double_fail_counts_two():
    env = scripted_env()
    env.step("propose 0,1,2")  # quest 1 needs 2 seats, so the fallback team (leader and next) is used
    assert env.infos["player_0"]["invalid_action"] is True and env.game.team == [0, 1]
    for action in ["say ok"] * 5 + ["approve"] * 5:
        env.step(action)
    env.step("success")
    env.step("success")
    proposal_round(env, "1,3,4", "aaaaa")
    for play in ("success", "fail", "fail"):
        env.step(play)
    assert env.game.quest_fails == [0, 2] and env.game.quest_results == ["success", "fail"]


def test_three_failed_quests_win_for_evil():
    env = scripted_env()
    for team in ("0,3", "0,1,3", "2,3"):
        proposal_round(env, team, "aaaaa")
        for seat in map(int, team.split(",")):
            env.step("fail" if seat == 3 else "success")
    assert env.game.winner == "evil" and env.game.reason == "three quests failed"


def win_three_quests(env) -> None:
    for team in ("0,1", "0,1,2", "1,2"):
        proposal_round(env, team, "aaaaa")
        for _ in team.split(","):
            env.step("success")


@pytest.mark.parametrize(("target", "winner"), [("0", "evil"), ("1", "good"), ("player_3", "good")])
def test_assassination_hit_and_miss(target, winner):
    env = scripted_env()
    win_three_quests(env)
    assert env.game.phase == "assassinate" and env.agent_selection == "player_4"
    assert env.infos["player_4"]["legal_actions"] == ["assassinate 0", "assassinate 1", "assassinate 2",
                                                      "assassinate 3"]
    env.step(f"assassinate {target}")
    assert env.game.winner == winner and env.infos["player_4"]["invalid_action"] is False
    rewards = final_rewards(env)
    assert rewards["player_0"] == (1.0 if winner == "good" else -1.0) == -rewards["player_4"]


def test_assassinating_oneself_falls_back_to_lowest_other_seat():
    env = scripted_env()
    win_three_quests(env)
    env.step("assassinate 4")
    assert env.infos["player_4"]["invalid_action"] is True
    assert env.game.events[-2] == {"kind": "assassination", "target": 0, "hit": True}


@pytest.mark.parametrize(("leader", "action", "team", "invalid"), [
    (2, "garbage", [2, 3], True),
    (4, "propose 1", [0, 4], True),
    (4, "propose 1,1", [0, 4], True),
    (4, "propose 1,7", [0, 4], True),
    (1, "  PROPOSE player_4, PLAYER_0 ", [0, 4], False),
    (1, "propose 3 1", [1, 3], False),
])
def test_propose_parsing_and_fallback(leader, action, team, invalid):
    env = scripted_env(leader=leader)
    env.step(action)
    assert env.game.team == team and env.infos[f"player_{leader}"]["invalid_action"] is invalid


def test_vote_fallback_is_approve():
    env = scripted_env(discussion_rounds=0)
    env.step("propose 0,1")
    for action in ("yes please", None, "Vote Reject", "REJECT", "approve"):
        env.step(action)
    assert env.game.events[-1]["votes"] == ["approve", "approve", "reject", "reject", "approve"]
    assert [env.infos[f"player_{s}"]["invalid_action"] for s in range(5)] == [True, True, False, False, False]


def test_say_is_cleaned_bounded_and_falls_back_to_empty():
    env = scripted_env(max_message_chars=20)
    env.step("propose 0,1")
    env.step("say héllo\nworld\t\x00!")
    env.step("SAY " + "x" * 100)
    env.step("sayhello")
    env.step("say")
    env.step(b"say bytes")
    texts = [e["text"] for e in env.game.events if e["kind"] == "message"]
    assert texts == ["hllo world !", "x" * 20, "", "", "bytes"]
    assert [env.infos[f"player_{s}"]["invalid_action"] for s in range(5)] == [False, False, True, False,
                                                                                False]
    assert env.game.phase == "vote"


def test_discussion_rounds_order_starts_with_leader():
    env = scripted_env(leader=3, discussion_rounds=2)
    env.step("propose 3,4")
    order = []
    while env.game.phase == "discuss":
        order.append(env.agent_selection)
        env.step(f"say from {env.agent_selection}")
    assert order == ["player_3", "player_4", "player_0", "player_1", "player_2"] * 2
    assert "player_0 says: \"from player_0\"" in env.observe("player_1")
