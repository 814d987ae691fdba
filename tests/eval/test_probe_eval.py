"""`coplay eval --probe`: a player decides once at each probe position outside a run; the file has the run's
probe-file format, so two such files (or a run's) pair by position under `coplay eval --compare`."""

from __future__ import annotations

import json

import pytest

from coplay.cli import main

POSITIONS = 8


def _probe(tmp_path, args: list[str], capsys, overrides: tuple[str, ...] = ()) -> dict:
    # the overrides are positionals: together, before the options (argparse)
    code = main(["eval", f"probe.positions={POSITIONS}", f"probe.cache_dir={tmp_path / 'cache'}", *overrides,
                 "--probe", "--games", "2048", "--out", str(tmp_path / "out"), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (path,) = [line.split()[-1] for line in captured.out.splitlines() if line.startswith("written ")]
    return json.loads(open(path).read()) | {"path": path}


def test_a_bot_on_the_probe_scores_what_the_run_scores_for_it(tmp_path, capsys):
    expert = _probe(tmp_path, ["--policy", "expert", "--name", "expert"], capsys)
    entry = expert["results"]["2048"]
    # the expert bot playing the probe positions chooses what the probe's own expert scores say it chose
    assert entry["model"]["n"] == POSITIONS
    assert entry["model"]["regrets"] == entry["expert"]["regrets"]
    assert expert["meta"]["protocol"]["kind"] == "per-decision probe"
    assert expert["meta"]["max_steps"] == 1 and expert["meta"]["policy"] == "expert"


def test_compare_pairs_two_probe_files_by_position(tmp_path, capsys):
    expert = _probe(tmp_path, ["--policy", "expert", "--name", "expert"], capsys)
    rand = _probe(tmp_path, ["--policy", "random", "--name", "random"], capsys)
    rows = tmp_path / "rows.json"
    assert main(["eval", "--compare", expert["path"], rand["path"], "--json", str(rows)]) == 0
    out = capsys.readouterr().out
    diffs = [b - a for a, b in zip(expert["results"]["2048"]["model"]["regrets"],
                                   rand["results"]["2048"]["model"]["regrets"], strict=True)]
    assert f"{sum(diffs) / len(diffs):+.2f}" in out and f"over {POSITIONS} pairs" in out
    (row,) = json.loads(rows.read_text())["rows"]  # --json writes what the lines say
    assert row["game"] == "2048" and row["n"] == POSITIONS
    assert row["difference"] == pytest.approx(sum(diffs) / len(diffs))
    assert row["ci_low"] <= row["difference"] <= row["ci_high"]


def test_a_probe_file_is_not_compared_with_an_episode_evaluation(tmp_path, capsys):
    expert = _probe(tmp_path, ["--policy", "expert", "--name", "expert"], capsys)
    assert main(["eval", "--policy", "random", "--games", "2048", "--episodes", "2", "--max-steps", "2",
                 "--out", str(tmp_path / "ep"), "--name", "ep"]) == 0
    capsys.readouterr()
    assert main(["eval", "--compare", expert["path"], str(tmp_path / "ep" / "ep.json")]) == 2
    assert "probe file and the other an evaluation" in capsys.readouterr().err


def test_different_probe_sets_are_not_paired(tmp_path, capsys):
    expert = _probe(tmp_path, ["--policy", "expert", "--name", "expert"], capsys)
    other = dict(expert)
    protocol = {**expert["meta"]["protocol"], "probe_sha256": {"2048": "0"}}
    other["meta"] = {**expert["meta"], "protocol": protocol}
    path = tmp_path / "other.json"
    path.write_text(json.dumps({k: v for k, v in other.items() if k != "path"}))
    assert main(["eval", "--compare", expert["path"], str(path)]) == 0
    assert "probed different position sets" in capsys.readouterr().out


def test_the_tiny_base_model_decides_greedily_the_same_way_twice(tmp_path, capsys, tiny_model_config):
    model = ("engine.backend=hf", "engine.max_model_len=1024", "model.dtype=float32",
             f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}", "sampling.max_tokens.act=16",
             "eval.temperature=0")
    first = _probe(tmp_path, ["--policy", "base", "--name", "base"], capsys, model)
    # the same name again: a second file, never overwritten
    second = _probe(tmp_path, ["--policy", "base", "--name", "base"], capsys, model)
    assert second["path"] != first["path"]
    assert first["meta"]["temperature"] == 0 and first["meta"]["adapters"] is None
    assert first["results"]["2048"]["model"]["regrets"] == second["results"]["2048"]["model"]["regrets"]
    assert first["results"]["2048"]["model"]["actions"] == second["results"]["2048"]["model"]["actions"]
