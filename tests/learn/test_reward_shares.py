"""Rewards in proportion (docs/rewards.md): every decision-agent reward is the sum of named parts, each
learner step's metrics line says which share of the reward's magnitude each part contributed, the default
weights let the game's own return outweigh the skill shaping on a short 2048 episode, and every weight is
set in the one `rewards` section of the config."""

from __future__ import annotations

import pytest

from coplay.config import ConfigError, CoplayConfig, load_config
from coplay.config.rewards import ActShaping, RetrieveShaping
from coplay.driver.batch import training_batch
from coplay.driver.metrics import console_line, iteration_record
from coplay.driver.records import CollectStats, IterationData
from coplay.learn.rewards import ACT_PARTS, act_step_parts, assign_rewards, retrieve_parts, reward_shares
from coplay.types import BankUpdate, Sample, Step, TrainStep, Trajectory

PAPER_ACT = ActShaping(contract_literal=0.1, skill_success=0.3, skill_abort=0.1, skill_switch=0.1)
PAPER_RETRIEVE = RetrieveShaping(contract_share=0.5, precondition_miss=0.5)


def _sample(sid: str, adapter: str) -> Sample:
    return Sample(adapter=adapter, adapter_version=0, prompt_ids=[1], completion_ids=[2], logprobs=[-1.0],
                  group_id="g", sample_id=sid)


def short_2048_episode(eid: str = "e", seed: int = 0) -> Trajectory:
    """12 moves scoring 36 (a 2048 episode of the committed `full` run's length and score), four skill
    activations of three moves, each meeting its one-literal contract (`x↑`) on its first move; three end
    in success and the last aborts — about what that run's skill analysis counted per episode (1-3
    successes, up to 1.6 aborts, 3.5-5 activations)."""
    merges = [4, 0, 4, 8, 0, 4, 0, 8, 4, 0, 4, 0]
    skills = ["a", "a", "a", "b", "b", "b", "a", "a", "a", "b", "b", "b"]
    events = {2: "success", 5: "success", 8: "success", 11: "abort"}
    steps, samples = [], []
    for t, (reward, skill) in enumerate(zip(merges, skills, strict=True)):
        ids = [f"{eid}-a{t}"] + ([f"{eid}-r{t}"] if t % 3 == 0 else [])
        steps.append(Step(t=t, observation="", action="left", reward=float(reward), score=0.0, skill_id=skill,
                          skill_event=events.get(t, ""), features_before={"x": t, "ready": True},
                          features_after={"x": t + 1, "ready": True}, sample_ids=ids))
        samples += [_sample(sid, "retrieve" if "-r" in sid else "act") for sid in ids]
    return Trajectory(episode_id=eid, game="2048", seat="solo", role="solo", seed=seed, steps=steps,
                      samples=samples)


def _contract(_: str) -> list[str]:
    return ["x↑"]


def _ready(_: str, features) -> bool:
    return bool(features.get("ready"))


def test_every_reward_is_the_sum_of_its_named_parts():
    traj = short_2048_episode()
    parts = act_step_parts(traj, 0.01, _contract, _ready, weights=PAPER_ACT)
    assert all(set(p) == set(ACT_PARTS) for p in parts)
    assert parts[0] == pytest.approx({"game": 0.04, "contract_literal": 0.1, "skill_success": 0.0,
                                      "skill_abort": 0.0, "skill_switch": 0.0})
    assert parts[2]["skill_success"] == pytest.approx(0.3) and parts[11]["skill_abort"] == pytest.approx(-0.1)
    assign_rewards(traj, 0.01, _contract, _ready, act_weights=PAPER_ACT, retrieve_weights=PAPER_RETRIEVE)
    act_rewards = [s.reward for s in traj.samples if s.adapter == "act"]
    assert act_rewards[-1] == pytest.approx(sum(parts[11].values()))  # R_11 = r_11
    assert act_rewards[0] == pytest.approx(sum(sum(p.values()) for p in parts))  # R_0 = the whole episode
    retrieve = retrieve_parts(traj, 0.01, _contract, _ready, weights=PAPER_RETRIEVE)
    assert retrieve["e-r0"] == pytest.approx({"game": 0.08, "contract_share": 0.5, "precondition_miss": 0.0})


def test_the_shares_say_where_the_reward_came_from():
    traj = short_2048_episode()
    totals = assign_rewards(traj, 0.01, _contract, _ready, act_weights=PAPER_ACT,
                            retrieve_weights=PAPER_RETRIEVE)
    # act, per step r_t: game 0.36, literals 4 x 0.1, successes 3 x 0.3, one abort |-0.1|: total 1.76
    assert totals["act"] == pytest.approx({"game": 0.36, "contract_literal": 0.4, "skill_success": 0.9,
                                           "skill_abort": 0.1, "skill_switch": 0.0})
    shares = reward_shares(totals)
    assert shares["act"]["game"] == pytest.approx(0.36 / 1.76)
    assert sum(shares["act"].values()) == pytest.approx(1.0)
    assert sum(shares["retrieve"].values()) == pytest.approx(1.0)
    assert reward_shares({"act": dict.fromkeys(ACT_PARTS, 0.0)})["act"]["game"] == 0.0  # nothing, not NaN


def test_by_default_the_game_outweighs_the_skill_shaping_on_a_short_2048_episode():
    """The issue's numbers: with the paper's weights the shaping is about four times the game's return on a
    12-move episode; the defaults (a tenth of them) leave the game the larger part, for act and retrieve."""
    paper = reward_shares(assign_rewards(short_2048_episode(), 0.01, _contract, _ready,
                                         act_weights=PAPER_ACT, retrieve_weights=PAPER_RETRIEVE))
    cfg = CoplayConfig()
    default = reward_shares(assign_rewards(short_2048_episode(), cfg.rewards.game_scale["2048"], _contract,
                                           _ready, act_weights=cfg.rewards.act,
                                           retrieve_weights=cfg.rewards.retrieve))
    assert paper["act"]["game"] < 0.25 and paper["retrieve"]["game"] < 0.25
    assert default["act"]["game"] > 0.7 and default["retrieve"]["game"] > 0.6


def test_the_learner_step_uses_the_configured_weights_and_reports_the_shares():
    """`rewards.act.skill_success` changes what a success earns; the shares reach the metrics line, its
    TensorBoard keys (`reward_shares/act/game`) and the console line."""
    trajectories = [short_2048_episode("e1", seed=3), short_2048_episode("e2", seed=3)]
    default = training_batch(CoplayConfig(), trajectories, {}, [])
    first = {s.sample_id: s.reward for s in trajectories[0].samples}
    paper = load_config(overrides=["rewards.act.skill_success=0.3"])
    tuned = training_batch(paper, [short_2048_episode("e1", seed=3)], {}, [])
    assert tuned.samples[0].reward == pytest.approx(first["e1-a0"] + 3 * (0.3 - 0.03))
    # no bank: no contract literals and no precondition checks, so only the game, successes and the abort
    shares = default.reward_shares["act"]
    assert shares["game"] == pytest.approx(0.36 / (0.36 + 3 * 0.03 + 0.01))
    assert shares["contract_literal"] == 0.0

    step = TrainStep(learner_step=1, reward_shares=default.reward_shares)
    record = iteration_record(2, IterationData(2, [], [], {}), CollectStats(), BankUpdate(), step, {}, 1.0,
                              {})
    assert record["reward_shares"]["act"]["game"] == pytest.approx(shares["game"])
    assert record["train"]["reward_shares"] == default.reward_shares
    assert f"game share: act {shares['game']:.0%}" in console_line(2, record)


def test_the_weights_live_in_one_rewards_section_and_the_old_key_names_its_new_place(tmp_path):
    cfg = load_config(overrides=["rewards.game_scale.2048=0.02", "rewards.retrieve.contract_share=0.5"])
    assert cfg.rewards.game_scale["2048"] == 0.02 and cfg.rewards.game_scale["tetris"] == 0.1
    assert cfg.rewards.retrieve.contract_share == 0.5
    with pytest.raises(ConfigError, match=r"rewards\.game_scale\.2048"):
        load_config(overrides=["game.2048.reward_scale=0.02"])
    path = tmp_path / "old.yaml"
    path.write_text("game:\n  tetris:\n    reward_scale: 0.5\n")
    with pytest.raises(ConfigError, match=r"rewards\.game_scale\.tetris"):
        load_config(path)
    with pytest.raises(ConfigError, match="game_scale"):
        load_config(overrides=["rewards.game_scale={chess: 1.0}"])
