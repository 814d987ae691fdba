"""Rewards and GRPO advantages on hand-made trajectories; every expected number is worked out by hand."""

from __future__ import annotations

import math

import pytest

from coplay.config.rewards import ActShaping, RetrieveShaping
from coplay.learn.advantages import (
    act_advantages,
    all_advantages,
    group_normalized,
    leave_one_out,
    retrieve_advantages,
)
from coplay.learn.rewards import (
    act_step_rewards,
    assign_rewards,
    retrieve_rewards,
    returns_to_go,
    skill_activations,
)
from coplay.skills.literals import segment_literals
from coplay.types import Sample, Step, Trajectory

# the paper's weights (docs/rewards.md), which the hand-worked numbers below use; the defaults are a tenth
PAPER_ACT = ActShaping(contract_literal=0.1, skill_success=0.3, skill_abort=0.1, skill_switch=0.1)
PAPER_RETRIEVE = RetrieveShaping(contract_share=0.5, precondition_miss=0.5)
CONTRACTS = {"merge": ["max_tile↑", "empty↓", "corner=true"], "clear": ["empty↑"]}


def contract_of(skill_id: str) -> list[str]:
    return CONTRACTS[skill_id]


def preconditions_hold(skill_id: str, features) -> bool:
    return bool(features.get("ready", False))


def _sample(sid: str, adapter: str = "act", reward: float | None = None) -> Sample:
    return Sample(adapter=adapter, adapter_version=0, prompt_ids=[1], completion_ids=[2], logprobs=[-1.0],
                  group_id="g", reward=reward, sample_id=sid)


def _traj(eid: str, rewards: list[float], seed: int = 0, role: str = "solo",
          game: str = "2048") -> Trajectory:
    steps = [Step(t=t, observation="", action="", reward=r, score=0.0, sample_ids=[f"{eid}-a{t}"])
             for t, r in enumerate(rewards)]
    samples = [_sample(f"{eid}-a{t}") for t in range(len(rewards))]
    return Trajectory(episode_id=eid, game=game, seat=role, role=role, seed=seed, steps=steps,
                      samples=samples)


def test_act_reward_reads_contract_literals_as_the_bank_does():
    """The +0.1 per newly satisfied literal uses the bank's definition of an effect (window means over the
    activation so far, `skill_bank.contracts.literal_window`), not a comparison of the first and the last
    step: here x ends where it started (2 -> 2), yet over windows of 2 steps it rose (mean 1 -> 1.5)."""
    befores, afters = [2, 0, 0, 1, 2], [0, 0, 1, 2, 2]
    steps = [Step(t=t, observation="", action="", reward=0.0, score=0, skill_id="rise",
                  features_before={"x": b}, features_after={"x": a}, sample_ids=[f"a{t}"])
             for t, (b, a) in enumerate(zip(befores, afters, strict=True))]
    traj = Trajectory(episode_id="e", game="2048", seat="solo", role="solo", seed=0, steps=steps,
                      samples=[_sample(f"a{t}") for t in range(len(steps))])
    assert "x↑" in segment_literals(steps[:4], window=2)  # what the bank reads as the segment's effect
    rewards = act_step_rewards(traj, 1.0, lambda _: ["x↑"], lambda *_: False, window=2, weights=PAPER_ACT)
    assert rewards == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.0])


def test_act_reward_adds_contract_success_abort_and_switch_terms():
    f0 = {"max_tile": 4, "empty": 10, "corner": False, "ready": True}
    steps = [
        # activation of "merge" starts here (retrieve sample r0 at t=0)
        Step(t=0, observation="", action="", reward=4.0, score=4, skill_id="merge", features_before=f0,
             features_after={**f0, "max_tile": 8}, sample_ids=["r0", "a0"]),
        Step(t=1, observation="", action="", reward=0.0, score=4, skill_id="merge", skill_event="success",
             features_before={**f0, "max_tile": 8},
             features_after={**f0, "max_tile": 8, "empty": 9, "corner": True}, sample_ids=["a1"]),
        # a new activation of "clear" (retrieve r2): switch while preconditions hold
        Step(t=2, observation="", action="", reward=8.0, score=12, skill_id="clear", skill_event="switch",
             features_before={**f0, "empty": 9}, features_after={**f0, "empty": 9}, sample_ids=["r2", "a2"]),
        Step(t=3, observation="", action="", reward=0.0, score=12, skill_id="clear", skill_event="abort",
             features_before={**f0, "ready": False}, features_after=f0, sample_ids=["r3", "a3"]),
    ]
    samples = [_sample(s, "retrieve" if s.startswith("r") else "act")
               for s in ("r0", "a0", "a1", "r2", "a2", "r3", "a3")]
    traj = Trajectory(episode_id="e", game="2048", seat="solo", role="solo", seed=1, steps=steps,
                      samples=samples)
    assert [(a.start, a.end, a.skill_id) for a in skill_activations(traj)] == [
        (0, 1, "merge"), (2, 2, "clear"), (3, 3, "clear")]
    r = act_step_rewards(traj, 0.01, contract_of, preconditions_hold, weights=PAPER_ACT)
    # t0: 0.04 game + max_tile↑ newly (0.1)
    # t1: 0 game + empty↓ and corner=true newly (0.2), max_tile↑ already counted, success +0.3
    # t2: 0.08 game, empty↑ does not hold (9 vs 9), switch while ready -> -0.1
    # t3: 0 game, abort -0.1 (the switch term never applies to an abort)
    assert r == pytest.approx([0.14, 0.5, -0.02, -0.1])
    assert returns_to_go(r) == pytest.approx([0.52, 0.38, -0.12, -0.1])
    assert returns_to_go([1.0, 1.0, 1.0], gamma=0.5) == pytest.approx([1.75, 1.5, 1.0])
    rr = retrieve_rewards(traj, 0.01, contract_of, preconditions_hold, weights=PAPER_RETRIEVE)
    # r0: merge over t0..t1: 0.04 game + 0.5 * 3/3 (all three literals hold at the end); ready -> no penalty
    # r2: clear over t2: 0.08 + 0.5 * 0/1; ready at t2 -> no penalty
    # r3: clear over t3: 0 + 0.5 * (empty 10 vs 10: 0) - 0.5 (not ready when chosen)
    assert rr == pytest.approx({"r0": 0.54, "r2": 0.08, "r3": -0.5})
    assign_rewards(traj, 0.01, contract_of, preconditions_hold, act_weights=PAPER_ACT,
                   retrieve_weights=PAPER_RETRIEVE)
    got = {s.sample_id: s.reward for s in traj.samples}
    assert got == pytest.approx({"r0": 0.54, "a0": 0.52, "a1": 0.38, "r2": 0.08, "a2": -0.12, "r3": -0.5,
                                 "a3": -0.1})


def test_group_normalized_and_degenerate_groups():
    # mean 2, population std sqrt(2/3)
    std = math.sqrt(2 / 3)
    assert group_normalized([1.0, 2.0, 3.0]) == pytest.approx([-1 / (std + 1e-6), 0.0, 1 / (std + 1e-6)])
    assert group_normalized([5.0]) == [0.0]
    assert group_normalized([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]


def test_leave_one_out_baseline():
    # values 1, 2, 6: others' means 4, 3.5, 1.5;
    # population std = sqrt(((1-3)^2+(2-3)^2+(6-3)^2)/3) = sqrt(14/3)
    std = math.sqrt(14 / 3) + 1e-6
    assert leave_one_out([1.0, 2.0, 6.0]) == pytest.approx([-3 / std, -1.5 / std, 4.5 / std])
    assert leave_one_out([3.0]) == [0.0]
    assert leave_one_out([2.0, 2.0]) == [0.0, 0.0]


def test_act_groups_by_start_state_role_and_step_index_with_unequal_lengths():
    # start state seed 7, two roles; role "good" has 3 episodes of lengths 3, 2, 1; role "evil" 2 episodes.
    good = [_traj("g1", [0, 0, 0], seed=7, role="good"), _traj("g2", [0, 0], seed=7, role="good"),
            _traj("g3", [0], seed=7, role="good")]
    evil = [_traj("e1", [0, 0], seed=7, role="evil"), _traj("e2", [0, 0], seed=7, role="evil")]
    other_seed = [_traj("o1", [0], seed=8, role="good")]
    returns = {"g1": [3.0, 2.0, 1.0], "g2": [1.0, 0.0], "g3": [2.0], "e1": [1.0, 1.0], "e2": [0.0, 1.0],
               "o1": [9.0]}
    for traj in good + evil + other_seed:
        for sample, value in zip(traj.samples, returns[traj.episode_id], strict=True):
            sample.reward = value
    adv = act_advantages(good + evil + other_seed)
    z3 = 1 / (math.sqrt(2 / 3) + 1e-6)  # three values a, a+1, a+2 -> -z3, 0, z3
    z2 = 1 / (0.5 + 1e-6)  # two values differing by 1 -> -0.5 / (0.5 + eps), +0.5 / (0.5 + eps)
    # good, t=0: {3, 1, 2}; t=1: {2, 0} (g3 has ended: not in the statistics); t=2: {1} alone -> 0
    assert adv["g1-a0"] == pytest.approx(z3) and adv["g2-a0"] == pytest.approx(-z3) and adv["g3-a0"] == 0.0
    assert adv["g1-a1"] == pytest.approx(1 / (1 + 1e-6)) and adv["g2-a1"] == pytest.approx(-1 / (1 + 1e-6))
    assert adv["g1-a2"] == 0.0
    # evil, t=0: {1, 0}; t=1: {1, 1} zero variance -> 0
    assert adv["e1-a0"] == pytest.approx(0.5 * z2) and adv["e2-a0"] == pytest.approx(-0.5 * z2)
    assert adv["e1-a1"] == 0.0 and adv["e2-a1"] == 0.0
    # another start state is its own group of one
    assert adv["o1-a0"] == 0.0


def test_non_model_policies_and_missing_rewards():
    traj = _traj("x", [0.0], seed=1)
    traj.policy = "expert"
    assert act_advantages([traj]) == {}
    traj.policy = "model"
    with pytest.raises(ValueError, match="has no reward"):
        act_advantages([traj])


def test_retrieve_groups_per_game_and_role_with_leave_one_out():
    trajs = []
    for eid, role, game, r in [("a", "good", "avalon", 1.0), ("b", "good", "avalon", 2.0),
                               ("c", "good", "avalon", 6.0), ("d", "evil", "avalon", 5.0),
                               ("e", "good", "2048", 1.0)]:
        t = Trajectory(episode_id=eid, game=game, seat=role, role=role, seed=0,
                       samples=[_sample(f"{eid}-r", "retrieve", reward=r)])
        trajs.append(t)
    adv = retrieve_advantages(trajs)
    std = math.sqrt(14 / 3) + 1e-6
    assert adv["a-r"] == pytest.approx(-3 / std) and adv["c-r"] == pytest.approx(4.5 / std)
    assert adv["d-r"] == 0.0 and adv["e-r"] == 0.0


def test_all_advantages_groups_bank_samples_by_group_id():
    bank = [_sample("s1", "curator", 1.0), _sample("s2", "curator", 0.0)]
    bank[1].group_id = "g"
    lone = _sample("s3", "contract", 4.0)
    lone.group_id = "other"
    adv = all_advantages([], [*bank, lone])
    assert adv["s1"] == pytest.approx(0.5 / (0.5 + 1e-6)) and adv["s2"] == pytest.approx(-0.5 / (0.5 + 1e-6))
    assert adv["s3"] == 0.0
