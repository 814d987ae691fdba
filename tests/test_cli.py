"""The `coplay` command and the promise that `import coplay` stays light."""

from __future__ import annotations

import subprocess
import sys

import yaml

from coplay.cli import main
from coplay.config import CoplayConfig


def test_help_lists_every_verb(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    for verb in ("train", "eval", "play", "bench", "bank", "report", "config", "model"):
        assert verb in out


def test_config_show_prints_the_resolved_default_config(capsys):
    assert main(["config", "show", "learner.lr=3e-5"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    expected = CoplayConfig().model_dump(mode="json")
    expected["learner"]["lr"] = 3e-5
    assert shown == expected


def test_config_show_rejects_bad_value_with_exit_2(capsys):
    assert main(["config", "show", "learner.zero_stage=4"]) == 2
    assert "learner.zero_stage" in capsys.readouterr().err


def test_import_coplay_pulls_in_nothing_heavy():
    code = ("import sys, coplay, coplay.config, coplay.types, coplay.runs, coplay.cli; "
            "heavy = {'torch', 'ray', 'vllm', 'deepspeed', 'transformers'} & set(sys.modules); "
            "print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_model_build_tiny_prints_its_folder(tmp_path, capsys):
    assert main(["model", "build-tiny", f"model.tiny.cache_dir={tmp_path}"]) == 0
    folder = capsys.readouterr().out.strip()
    assert folder.startswith(str(tmp_path)) and (tmp_path / folder.split("/")[-1] / "config.json").is_file()
