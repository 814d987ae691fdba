"""`coplay eval` with each kind of player: the bots on every game, the tiny base model without adapters, and a
run's adapters picked by learner step (published through the artifact ledger exactly as the loop does)."""

from __future__ import annotations

import json

import pytest

from coplay.artifacts import ArtifactLedger
from coplay.cli import main
from coplay.config import CoplayConfig
from coplay.eval.players import adapter_versions_at
from coplay.runs import RunDir

ALL_GAMES = "2048,candy_crush,tetris,mario,avalon,diplomacy"


def _only(folder, prefix: str):
    """The one evaluation file whose name starts with `prefix`."""
    (path,) = sorted(folder.glob(f"{prefix}_*.json"))
    return path


def _eval(args: list[str], capsys) -> str:
    code = main(["eval", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_bots_on_every_game(tmp_path, capsys):
    _eval(["--policy", "expert", "--games", ALL_GAMES, "--episodes", "2", "--episodes-per-seat", "1",
           "--max-steps", "10", "--out", str(tmp_path)], capsys)
    path = _only(tmp_path, "expert")
    assert path.name == f"expert_{ALL_GAMES.replace(',', '+')}_vs-expert_seeds1000000-n2x1.json"
    data = json.loads(path.read_text())
    results = data["results"]
    assert sorted(results) == sorted(ALL_GAMES.split(","))
    assert results["2048"]["episodes"] == 2 and results["avalon"]["episodes"] == 5  # one per seat
    assert sorted(results["diplomacy"]["per_power"]) == ["AUSTRIA", "ENGLAND", "FRANCE", "GERMANY", "ITALY",
                                                         "RUSSIA", "TURKEY"]
    assert "side:good" in results["avalon"]["win_rate"]
    assert data["meta"]["player"] == "expert" and data["meta"]["opponents"] == "expert"  # eval.opponents
    assert data["meta"]["seeds_eval_start"] == 1_000_000
    markdown = path.with_suffix(".md").read_text()
    assert markdown.startswith("# Evaluation: expert")
    assert "## diplomacy per power" in markdown and "| TURKEY | 1 |" in markdown  # each power's centres


def test_expert_beats_random_on_2048_in_the_compare_view(tmp_path, capsys):
    for policy in ("random", "expert"):
        _eval(["--policy", policy, "--games", "2048", "--episodes", "6", "--out", str(tmp_path)], capsys)
    text = _eval(["--compare", str(_only(tmp_path, "random")), str(_only(tmp_path, "expert"))], capsys)
    assert "warning" not in text  # the same protocol
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("2048"))
    assert row.rstrip("│ ").endswith("yes")  # the difference's 95% interval excludes 0


def test_unknown_policy_is_named_with_the_vocabulary(tmp_path, capsys):
    for spec in ("wizard", "model"):
        assert main(["eval", "--policy", spec, "--games", "2048", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"policy {spec!r}" in err and "base | run:RUN_DIR[@STEP] | expert | random | openai" in err


def test_evaluations_of_different_games_or_seeds_both_survive(tmp_path, capsys):
    _eval(["--policy", "expert", "--games", "2048", "--episodes", "2", "--out", str(tmp_path)], capsys)
    _eval(["--policy", "expert", "--games", "tetris", "--episodes", "2", "--max-steps", "5", "--out",
           str(tmp_path)], capsys)
    _eval(["--policy", "expert", "--games", "2048", "--episodes", "2", "--out", str(tmp_path)], capsys)
    names = sorted(p.name for p in tmp_path.glob("*.json") if not p.name.startswith("bots-"))
    # single-player games: no opponent and no episodes per seat in the name
    assert names == ["expert_2048_seeds1000000-n2-2.json", "expert_2048_seeds1000000-n2.json",
                     "expert_tetris_seeds1000000-n2.json"]
    # the ruler's bots: one set per protocol (Tetris has no heuristic); the third evaluation reused the first
    assert sorted(p.name for p in tmp_path.glob("bots-*.json")) == [
        "bots-expert-2.json", "bots-expert.json", "bots-heuristic.json", "bots-random-2.json",
        "bots-random.json"]


def test_compare_warns_when_the_protocols_differ(tmp_path, capsys):
    _eval(["--policy", "random", "--games", "2048", "--episodes", "2", "--max-steps", "5", "--out",
           str(tmp_path)], capsys)
    _eval(["--policy", "expert", "--games", "2048", "--episodes", "3", "--out", str(tmp_path)], capsys)
    text = _eval(["--compare", str(_only(tmp_path, "random")), str(_only(tmp_path, "expert"))], capsys)
    assert "warning: the two sides differ in episodes per game: 2 vs 3" in text
    assert "warning: the two sides differ in horizon (max steps): 5 vs" in text


def _model_overrides(tiny_model_config) -> list[str]:
    return ["engine.backend=hf", "engine.max_model_len=1024", "model.dtype=float32",
            f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}", "sampling.max_tokens.act=16"]


def test_base_model_without_adapters(tmp_path, capsys, tiny_model_config):
    _eval(["--policy", "base", "--games", "2048", "--episodes", "2", "--max-steps", "2", "--out",
           str(tmp_path), *_model_overrides(tiny_model_config)], capsys)
    data = json.loads(_only(tmp_path, "base").read_text())
    assert data["results"]["2048"]["episodes"] == 2
    assert data["meta"]["adapters"] is None and data["meta"]["model"] == "tiny"


@pytest.fixture(scope="module")
def run_with_adapters(tiny_model_config, tmp_path_factory):
    """A run folder whose adapters were published through the ledger: act v1 and retrieve v1 at learner step
    1, act v2 at step 3."""
    from coplay.artifacts import AdapterBundle
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters, save_adapter

    cfg = CoplayConfig()
    run = RunDir.create(tmp_path_factory.mktemp("runs"), "adapters", cfg.to_yaml())
    base, _ = load_base_model(tiny_model_config)
    model = attach_adapters(base, {"act": cfg.adapters["act"], "retrieve": cfg.adapters["retrieve"]},
                            names=("act", "retrieve"))
    exports = tmp_path_factory.mktemp("exports")
    ledger = ArtifactLedger(run)
    for adapter, version, step in (("act", 1, 1), ("retrieve", 1, 1), ("act", 2, 3)):
        bundle = AdapterBundle.read(save_adapter(model, adapter, exports / f"{adapter}{version}"))
        ledger.publish_adapter(adapter, version, bundle.files, bundle.sha256, learner_step=step)
    return run


def test_policy_versions_follow_the_learner_step(run_with_adapters):
    assert adapter_versions_at(run_with_adapters, None) == (3, {"act": 2, "retrieve": 1})
    assert adapter_versions_at(run_with_adapters, 2) == (2, {"act": 1, "retrieve": 1})
    with pytest.raises(ValueError, match="learner step 0"):
        adapter_versions_at(run_with_adapters, 0)


def test_a_runs_adapters_are_evaluated_into_its_eval_folder(run_with_adapters, tiny_model_config, capsys):
    run = run_with_adapters
    # positionals together (argparse): RUN_DIR and the overrides, then the options
    _eval([str(run.root), *_model_overrides(tiny_model_config), "--step", "2",
           "--games", "2048", "--episodes", "2", "--max-steps", "2"], capsys)
    data = json.loads(_only(run.eval, "run-step2").read_text())
    assert data["meta"]["versions"] == {"act": 1, "retrieve": 1} and data["meta"]["iteration"] == 2
    assert data["results"]["2048"]["episodes"] == 2 and data["meta"]["policy"] == f"run:{run.root}@2"
    assert main(["report", str(run.root)]) == 0
    assert "run-step2" in run.report.read_text()


def test_a_step_the_run_does_not_have_is_refused(run_with_adapters, tmp_path, capsys):
    run = run_with_adapters
    assert main(["eval", "--policy", f"run:{run.root}@99", "--games", "2048", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "learner step 99" in err and "steps 0-3" in err
    assert main(["eval", str(run.root), "--step", "99", "--games", "2048", "--out", str(tmp_path)]) == 2
    assert "learner step 99" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.slow
def test_tiny_model_on_every_game(tmp_path, capsys, tiny_model_config):
    _eval(["--policy", "base", "--games", ALL_GAMES, "--episodes", "2", "--episodes-per-seat", "1",
           "--max-steps", "3", "--out", str(tmp_path), *_model_overrides(tiny_model_config)], capsys)
    results = json.loads(_only(tmp_path, "base").read_text())["results"]
    assert sorted(results) == sorted(ALL_GAMES.split(","))
    # the tiny model as the opponents of an expert player in both multi-seat games
    _eval(["--policy", "expert", "--opponents", "base", "--games", "avalon,diplomacy",
           "--episodes-per-seat", "1", "--max-steps", "3", "--out", str(tmp_path), "--name", "expert-vs-base",
           *_model_overrides(tiny_model_config)], capsys)
    data = json.loads((tmp_path / "expert-vs-base.json").read_text())
    assert data["meta"]["opponents"] == "base" and sorted(data["results"]) == ["avalon", "diplomacy"]


def test_eval_rates_the_players_in_the_league(tmp_path, capsys):
    out = _eval(["--policy", "expert", "--opponents", "random", "--games", "diplomacy",
                 "--episodes-per-seat", "2", "--max-steps", "12", "--out", str(tmp_path)], capsys)
    (path,) = tmp_path.glob("expert_diplomacy_*.json")  # named by policy, games, opponents and seeds
    table = json.loads(path.read_text())["league"]["diplomacy"]
    assert list(table) == ["expert", "random"] and table["expert"]["games"] == 14
    assert "## diplomacy league (OpenSkill)" in out and "| expert |" in out


def test_play_uses_a_runs_adapters_with_the_same_policy_names_as_eval(run_with_adapters, tiny_model_config,
                                                                       tmp_path, capsys):
    from coplay.types import read_shard_dir

    run = run_with_adapters
    code = main(["play", "--game", "2048", "--policy", f"run:{run.root}@2", "--episodes", "1", "--max-steps",
                 "2", "--out", str(tmp_path), *_model_overrides(tiny_model_config)])
    out = capsys.readouterr().out
    assert code == 0 and "play-2048-run-step2-s0.msgpack" in out
    (shard,), errors = read_shard_dir(tmp_path)
    samples = [s for t in shard.trajectories for s in t.samples]
    act = {(s.adapter, s.adapter_version) for s in samples if s.adapter == "act"}
    assert not errors and act == {("act", 1)}  # act v1 is the version of learner step 2
    assert main(["play", "--game", "2048", "--policy", f"run:{run.root}@99"]) == 2
    assert "learner step 99" in capsys.readouterr().err
