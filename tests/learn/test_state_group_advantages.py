"""State grouping's advantages on hand-made trajectories (issue 36): a branch's group is its anchor at t = 0
and sums to zero; a branch's later steps, a trunk's `act` samples and a branch's retrieval samples never
train; a trunk's retrieval samples do; opponents still never train."""

from __future__ import annotations

import math

import pytest

from coplay.learn.advantages import act_advantages, act_steps, all_advantages, retrieve_advantages, trains
from coplay.learn.rewards import assign_rewards
from coplay.types import Sample, Step, Trajectory


def _traj(eid: str, rewards: list[float], kind: str = "episode", policy: str = "model", group: str = "",
          retrieve_at: tuple[int, ...] = ()) -> Trajectory:
    steps, samples = [], []
    for t, r in enumerate(rewards):
        ids = [f"{eid}/t{t}/act"] + ([f"{eid}/t{t}/retrieve"] if t in retrieve_at else [])
        steps.append(Step(t=t, observation="", action="", reward=r, score=0.0, sample_ids=ids))
        samples += [Sample(adapter=i.rsplit("/", 1)[1], adapter_version=0, prompt_ids=[1], completion_ids=[2],
                           logprobs=[-1.0], group_id=group, sample_id=i) for i in ids]
    return Trajectory(episode_id=eid, game="2048", seat="player_0", role="player", seed=7, steps=steps,
                      samples=samples, policy=policy, group=group, kind=kind)


def _rewarded(*trajectories: Trajectory) -> list[Trajectory]:
    for traj in trajectories:
        assign_rewards(traj, 1.0, lambda skill: [], lambda skill, features: True)
    return list(trajectories)


def test_a_branch_group_is_its_anchor_at_step_zero_and_sums_to_zero():
    # two anchors, three branches each: the model's reward at t = 0, then the continuation's rewards
    a = [_traj(f"a-g{g}", r, "branch", "model+random", "a") for g, r in
         enumerate([[4.0, 0.0, 2.0], [0.0, 0.0, 0.0], [8.0, 4.0, 0.0]])]
    b = [_traj(f"b-g{g}", r, "branch", "model+random", "b") for g, r in
         enumerate([[2.0, 2.0], [2.0, 2.0], [0.0, 0.0]])]
    adv = act_advantages(_rewarded(*a, *b))
    assert sorted(adv) == sorted(f"{x}-g{g}/t0/act" for x in "ab" for g in range(3))  # only t = 0 trains
    # R_0 = reward + continuation return: a: 6, 0, 12 (mean 6, std sqrt(24)); b: 4, 4, 0
    std_a = math.sqrt(24.0)
    assert adv["a-g0/t0/act"] == pytest.approx(0.0)
    assert adv["a-g2/t0/act"] == pytest.approx(6.0 / (std_a + 1e-6))
    for group in "ab":
        assert sum(v for k, v in adv.items() if k.startswith(f"{group}-")) == pytest.approx(0.0, abs=1e-9)
    assert adv["b-g0/t0/act"] == adv["b-g1/t0/act"] > 0 > adv["b-g2/t0/act"]


def test_trunk_act_samples_never_train_but_its_retrievals_do_and_branch_retrievals_do_not():
    trunks = [_traj(f"trunk{i}", [1.0 + i, 2.0, 3.0], "trunk", "model", f"trunk{i}", retrieve_at=(0, 2))
              for i in range(2)]
    branches = [_traj(f"a-g{g}", [float(g), 1.0], "branch", "model+expert", "a", retrieve_at=(0,))
                for g in range(2)]
    trajectories = _rewarded(*trunks, *branches)
    assert [act_steps(t) for t in trajectories] == [0, 0, 1, 1]
    assert all(trains(t) for t in trajectories)
    act = act_advantages(trajectories)
    assert sorted(act) == ["a-g0/t0/act", "a-g1/t0/act"]
    retrieve = retrieve_advantages(trajectories)
    assert sorted(retrieve) == sorted(f"trunk{i}/t{t}/retrieve" for i in range(2) for t in (0, 2))
    everything = all_advantages(trajectories)
    assert set(everything) == set(act) | set(retrieve)  # the batch is exactly these samples


def test_episode_grouping_and_opponents_are_unchanged():
    episodes = _rewarded(*[_traj(f"e{g}", [float(g), 1.0], group="s7") for g in range(2)])
    assert sorted(act_advantages(episodes)) == ["e0/t0/act", "e0/t1/act", "e1/t0/act", "e1/t1/act"]
    opponent = _traj("opp", [1.0, 2.0], policy="current", group="s7")
    assert not trains(opponent) and act_advantages([opponent]) == {}
