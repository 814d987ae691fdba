"""The in-run probe reports the model's action distribution beside the expert bot's on the same positions
(`coplay.driver.probe`): what goes to `eval/probe-it<k>.json` and the metrics line, and the collapse warning
after a cold start that taught one move (logged, in the file and in the metrics line)."""

from __future__ import annotations

import json
import logging

import pytest

from coplay.driver.metrics import iteration_record
from coplay.driver.probe import RunProbe, flag_collapses, probe_summary
from coplay.driver.records import CollectStats, IterationData
from coplay.eval.probe import bot_actions, build_probe, score_actions
from coplay.types import BankUpdate, Step, Trajectory


@pytest.fixture(scope="module")
def run_probe_set() -> RunProbe:
    """A 32-position 2048 probe with both bots scored, as `RunProbe.load` makes it (smaller lookahead)."""
    probe = build_probe("2048", n=32, horizon=2, rollouts=1)
    bots = {bot: score_actions(probe, bot_actions(probe, bot)) for bot in ("random", "expert")}
    return RunProbe(probes={"2048": probe}, bots={"2048": {**bots, "bots_separate": True}})


def _answers(run_probe_set: RunProbe, label: str, choose) -> list[Trajectory]:
    """The model's one decision at every position, as the rollout workers return it."""
    out = []
    for i, position in enumerate(run_probe_set.probes["2048"].positions):
        step = Step(t=0, observation="", action=choose(i, position), reward=0.0, score=0.0)
        out.append(Trajectory(episode_id=f"{label}-probe-2048-p{i}", game="2048", seat="solo", role="solo",
                              seed=position.seed, steps=[step]))
    return out


def test_a_cold_start_that_plays_one_move_is_flagged_beside_the_experts_spread(run_probe_set, caplog):
    label = "probe-it0"
    scored = run_probe_set.score(_answers(run_probe_set, label, lambda i, p: "left"), label)
    with caplog.at_level(logging.WARNING, logger="coplay.driver.probe"):
        warnings = flag_collapses(scored, 0)
    spread = scored["2048"]["action_spread"]
    expert = run_probe_set.bots["2048"]["expert"]["actions"]
    assert max(expert.values()) <= 16  # the expert's choices spread: no move on more than half
    assert spread["model_top"] == "left" and spread["model_top_share"] == 1.0
    assert spread["expert_share_of_model_top"] == pytest.approx(expert.get("left", 0) / 32)
    assert {r["action"]: r["expert"] for r in spread["actions"] if r["expert"]} == expert
    assert spread["collapsed"] and len(warnings) == 1 and "after the cold start" in warnings[0]
    assert warnings[0] in caplog.text
    # the probe file's content: both distributions, with the warning
    doc = json.loads(json.dumps({"meta": {"iteration": 0}, "results": scored}))
    assert doc["results"]["2048"]["action_spread"]["warning"] == warnings[0]
    # the metrics line of iteration 0 carries the comparison and the warning, not the full table
    record = iteration_record(0, IterationData(0, [], [], {}), CollectStats(), BankUpdate(), None, {}, 1.0,
                              {}, probe=probe_summary(scored))
    brief = record["probe"]["2048"]["action_spread"]
    assert brief["collapsed"] and brief["model_top"] == "left" and brief["warning"] == warnings[0]
    assert "actions" not in brief


def test_a_policy_that_chooses_like_the_expert_raises_no_warning(run_probe_set, caplog):
    label = "probe-it3"
    expert = bot_actions(run_probe_set.probes["2048"], "expert")
    scored = run_probe_set.score(_answers(run_probe_set, label, lambda i, p: expert[i]), label)
    with caplog.at_level(logging.WARNING, logger="coplay.driver.probe"):
        assert flag_collapses(scored, 3) == []
    spread = scored["2048"]["action_spread"]
    assert spread["total_variation"] == 0.0 and not spread["collapsed"] and spread["warning"] is None
    assert "probe:" not in caplog.text


def test_a_probe_file_records_its_protocol_as_every_evaluation_file_does(run_probe_set):
    """`eval/probe-it<k>.json`'s meta: the positions per game with their start seeds and the probe set's
    sha256, one decision each."""
    probe = run_probe_set.probes["2048"]
    assert run_probe_set.protocol() == {
        "kind": "per-decision probe", "games": ["2048"], "max_steps": 1, "positions": {"2048": 32},
        "seeds": {"2048": [p.seed for p in probe.positions]}, "probe_sha256": {"2048": probe.sha256}}


def test_probe_positions_read_as_the_runs_games_do(tmp_path) -> None:
    """A run that shows Candy Crush's clears (a text-only env option) is probed on texts that show them;
    the rules' options of the recorded positions stay theirs."""
    from coplay.config import load_config
    from coplay.config.base import ADAPTER_NAMES

    probe = build_probe("candy_crush", n=2, horizon=1, rollouts=1)
    run_probe = RunProbe(probes={"candy_crush": probe}, bots={})
    cfg = load_config("launch/configs/learning-candy_crush.yaml",
                      ["game.candy_crush.env_kwargs.show_clears=true"])
    plans = run_probe.plans(cfg, dict.fromkeys(ADAPTER_NAMES, 1), "probe-it0")
    expected = [{**pos.env_kwargs, "show_clears": True} for pos in probe.positions]
    assert [p.env_kwargs for p in plans] == expected
    assert all("max_moves" not in p.env_kwargs or p.env_kwargs["max_moves"] == pos.env_kwargs["max_moves"]
               for p, pos in zip(plans, probe.positions, strict=True))


def test_a_2048_run_with_the_merges_shown_is_probed_on_texts_that_show_them() -> None:
    from coplay.config import load_config
    from coplay.config.base import ADAPTER_NAMES

    probe = build_probe("2048", n=2, horizon=1, rollouts=1)
    run_probe = RunProbe(probes={"2048": probe}, bots={})
    cfg = load_config("launch/configs/learning-2048-from-base-merges.yaml")
    plans = run_probe.plans(cfg, dict.fromkeys(ADAPTER_NAMES, 1), "probe-it0")
    expected = [{**pos.env_kwargs, "show_merges": True} for pos in probe.positions]
    assert [p.env_kwargs for p in plans] == expected
