"""What a config must pass to train (issue 18 part 5): `sampling.top_p < 1` would bias every GRPO ratio (the
engine's behaviour log-probs are of the truncated distribution, the learner's of the full one), so every way
into training refuses it with one line and exit status 2, before a run folder or Ray exists; evaluation
configs may still use it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from coplay.cli import main
from coplay.config import ConfigError, load_config, require_trainable

REPO = Path(__file__).resolve().parents[1]


def test_the_default_config_trains():
    require_trainable(load_config(None))


def test_top_p_below_one_is_refused_naming_the_key_and_the_fix():
    expected = r"sampling\.top_p=0\.9: training needs 1\.0 .*set sampling\.top_p=1"
    with pytest.raises(ConfigError, match=expected):
        require_trainable(load_config(None, ["sampling.top_p=0.9"]))


def test_coplay_train_refuses_top_p_with_one_line_and_exit_2_before_making_a_run_folder(tmp_path, capsys):
    code = main(["train", f"run.out_dir={tmp_path}", "sampling.top_p=0.95"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "sampling.top_p=0.95" in err
    assert list(tmp_path.iterdir()) == []


def test_launch_train_py_and_the_standalone_learner_refuse_it_too(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("launch_train", REPO / "launch" / "train.py")
    train_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_py)
    assert train_py.main(["--config", str(REPO / "launch/configs/tiny-2048.yaml"), f"run.out_dir={tmp_path}",
                          "sampling.top_p=0.5"]) == 2
    assert "sampling.top_p=0.5: training needs 1.0" in capsys.readouterr().err
    from coplay.learn.standalone import train_from_shards

    assert train_from_shards(tmp_path, tmp_path / "out", None, ["sampling.top_p=0.5"], False) == 2
    assert "sampling.top_p=0.5" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_evaluation_configs_may_still_sample_with_top_p(capsys):
    assert main(["config", "show", "sampling.top_p=0.9"]) == 0
    assert "top_p: 0.9" in capsys.readouterr().out
