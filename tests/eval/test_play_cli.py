"""`coplay play` as a user watches it: what it is doing is said before it does it, `--render` shows each move
while the episode is still being played, and the step cap defaults to the config's horizon (a run's own)
rather than the game's 200 moves."""

from __future__ import annotations

import subprocess
import sys
import time

from coplay.cli import main


def test_render_shows_each_move_while_the_episode_is_played(tiny_model_config, tmp_path):
    """The tiny model on the hf engine plays 12 moves; the output is read as it arrives. The first move is
    on screen seconds before the episode's end (when the whole episode was rendered after it ended, every
    line arrived at once), and the command said what it was loading before the first move."""
    command = [sys.executable, "-m", "coplay.cli", "play", "--game", "2048", "--policy", "base",
               "--episodes", "1", "--render", "--out", str(tmp_path / "shards"),
               "engine.backend=hf", "engine.max_model_len=1024", "model.name=tiny", "model.dtype=float32",
               f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}", "sampling.max_tokens.act=16",
               "rollout.max_steps=12"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path)
    lines: list[tuple[float, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append((time.monotonic(), line.rstrip("\n")))
    assert proc.wait(timeout=600) == 0, "\n".join(text for _, text in lines)
    texts = [text for _, text in lines]
    first_move = next(i for i, text in enumerate(texts) if text.startswith("action: "))
    end = next(i for i, text in enumerate(texts) if text.startswith("final: "))
    assert sum(text.startswith("action: ") for text in texts) == 12
    assert texts[end].startswith("final: truncated (step cap) after 12 step(s)")
    assert first_move < end  # moves stream before the end line (no timing assert: a quiet machine is fast)
    announced = next(i for i, text in enumerate(texts)
                     if text.startswith("coplay play: 2048, base, 1 episode(s) from seed 0, at most 12 steps "
                                        "(rollout.max_steps)"))
    loading = next(i for i, text in enumerate(texts) if text.startswith("load tiny on the hf engine"))
    assert announced < loading < first_move


def test_the_step_cap_defaults_to_the_configs_horizon(tmp_path, capsys):
    """A run's config.yaml with `eval.max_steps: 5`: play stops there, not at the game's 200-move end;
    `--max-steps` still wins."""
    config = tmp_path / "config.yaml"
    config.write_text("eval:\n  max_steps: 5\nrollout:\n  max_steps: 9\n")
    assert main(["play", "--game", "2048", "--episodes", "1", "--render", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert "final: truncated (step cap) after 5 step(s)" in captured.out
    assert "at most 5 steps (eval.max_steps)" in captured.err
    assert main(["play", "--game", "2048", "--episodes", "1", "--render", "--max-steps", "2", "--config",
                 str(config)]) == 0
    captured = capsys.readouterr()
    assert "final: truncated (step cap) after 2 step(s)" in captured.out
    assert "at most 2 steps (--max-steps)" in captured.err
