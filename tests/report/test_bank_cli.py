"""`coplay bank show | report` on folders a user may hand them by mistake: a path that is not a run folder,
and a run folder with a corrupt trajectory shard. Each is one line on stderr and a non-zero exit, never a
table counted without the shard or "no banks; keys on disk: []"."""

from __future__ import annotations

import shutil

import pytest

from coplay.cli import main


@pytest.fixture
def damaged_run(synthetic_run, tmp_path):
    """A copy of the synthetic run folder whose first iteration shard has one payload byte flipped."""
    root = shutil.copytree(synthetic_run.root, tmp_path / "run")
    shard = sorted((root / "shards").glob("*.msgpack"))[0]
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0xFF
    shard.write_bytes(bytes(data))
    (root / "bank_report.html").unlink(missing_ok=True)
    return root, shard


@pytest.mark.parametrize("command", ["show", "report"])
def test_a_path_that_is_not_a_run_folder_is_named_as_such(command, tmp_path, capsys):
    for path in (tmp_path / "nope", tmp_path):  # missing, and an existing folder without config.yaml
        assert main(["bank", command, str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == f"coplay bank: {path} is not a coplay run folder (no config.yaml)\n"


@pytest.mark.parametrize("command", ["show", "report"])
def test_a_corrupt_shard_stops_both_commands_in_one_line_naming_it(command, damaged_run, capsys):
    root, shard = damaged_run
    assert main(["bank", command, str(root)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert str(shard) in captured.err and "CRC mismatch" in captured.err
    assert not (root / "bank_report.html").exists()  # no page counted without the shard


@pytest.mark.parametrize("command", ["show", "report"])
def test_an_intact_run_folder_is_shown(command, synthetic_run, capsys):
    assert main(["bank", command, str(synthetic_run.root), *(["--json"] if command == "report" else [])]) == 0
    out = capsys.readouterr().out
    assert "bank 2048" in out if command == "show" else '"2048"' in out
