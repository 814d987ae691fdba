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


def test_help_description_is_whole_sentences(capsys):
    """`coplay --help` once ended mid-sentence ("`model | demo`, and the"): its description is the module
    docstring's whole first paragraph, refilled."""
    try:
        main(["--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    description = " ".join(out.split("\n\n")[1].split())
    assert description.startswith("coplay trains LLM agents") and description.endswith("shards alone.")
    assert "and the" not in description.split()[-3:]


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


def test_version_prints_the_package_version(capsys):
    from importlib.metadata import version

    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"coplay {version('coplay')}"


def _all_parsers():
    import argparse

    from coplay.cli import build_parser

    todo, seen = [("coplay", build_parser())], []
    while todo:
        name, parser = todo.pop()
        seen.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(f"{name} {verb}", sub) for verb, sub in action.choices.items()]
    return seen


def test_every_flag_has_help_that_names_its_default():
    import argparse

    missing = []
    for name, parser in _all_parsers():
        for action in parser._actions:
            skip = argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction
            if isinstance(action, skip):
                continue
            text = action.help or ""
            if not text:
                missing.append(f"{name} {action.dest}: no help")
            elif (action.option_strings and not action.required and action.default not in (None, False)
                  and "default" not in text):
                missing.append(f"{name} {action.dest}: default {action.default!r} not in its help")
            elif action.option_strings and not action.required and action.default is None and \
                    not isinstance(action, argparse._StoreTrueAction) and "default" not in text:
                missing.append(f"{name} {action.dest}: what happens without it is not said")
    assert not missing, missing


def test_play_refuses_an_unknown_game_listing_the_choices(capsys):
    try:
        code = main(["play", "--game", "foo"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "invalid choice: 'foo'" in err and "2048" in err and "diplomacy" in err


def test_play_refuses_no_or_negative_episodes(capsys):
    for n in ("0", "-1"):
        try:
            code = main(["play", "--game", "2048", "--episodes", n])
        except SystemExit as exc:
            code = exc.code
        assert code == 2 and "expected at least 1" in capsys.readouterr().err


def test_play_render_shows_the_action_the_reward_and_the_final_state(capsys):
    assert main(["play", "--game", "2048", "--episodes", "1", "--max-steps", "3", "--render"]) == 0
    out = capsys.readouterr().out
    assert out.count("action: ") == 3 and "reward: " in out
    assert "--- final state ---" in out and "final: truncated (step cap) after 3 step(s)" in out
