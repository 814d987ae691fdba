"""The shared-storage probe's file protocol without Ray (issue 38 item 4): the driver's token, an actor's
probe file, and the one-line verdict for each way a node can fail to share the run folder. The same
functions run inside real actors on a simulated multi-node cluster in
tests/cluster/test_storage_and_adapters.py."""

from __future__ import annotations

import pytest

from coplay.actors.storage_probe import (
    PROBE_DIR,
    TESTING_NODE_ROOT,
    SharedStorageError,
    StorageCheck,
    write_probe,
)
from coplay.runs import RunDir


def _run(tmp_path) -> RunDir:
    return RunDir.create(tmp_path / "runs", "probe", "{}\n")


def test_an_actor_that_shares_the_folder_passes_and_the_probe_folder_goes(tmp_path, monkeypatch):
    monkeypatch.delenv(TESTING_NODE_ROOT, raising=False)
    run = _run(tmp_path)
    check = StorageCheck(run.root)
    reports = [write_probe(str(run.root), "learner rank 0", check.token),
               write_probe(str(run.root), "rollout worker 0", check.token)]
    assert [r.error for r in reports] == ["", ""]
    assert check.verdict(reports) == reports
    check.close()
    assert not (run.root / PROBE_DIR).exists()


def test_a_node_without_the_folder_stops_the_run_in_one_line_naming_it(tmp_path, monkeypatch):
    run = _run(tmp_path)
    check = StorageCheck(run.root)
    ok = write_probe(str(run.root), "learner rank 0", check.token)
    monkeypatch.setenv(TESTING_NODE_ROOT, str(tmp_path / "other-disk"))  # this "node" has other disks
    missing = write_probe(str(run.root), "rollout worker 1", check.token)
    assert "does not see the run folder" in missing.error
    assert not (tmp_path / "other-disk").exists()  # nothing is created on a node
    with pytest.raises(SharedStorageError) as stopped:
        check.verdict([ok, missing])
    line = str(stopped.value)
    assert "\n" not in line and line.startswith("shared storage: rollout worker 1 on node")
    assert str(run.root) in line and "mount the same shared filesystem" in line and "run.out_dir" in line


def test_a_local_folder_at_the_same_path_is_found_out(tmp_path, monkeypatch):
    """A node where the path exists but is its own disk (made by hand, or by an earlier local run)."""
    run = _run(tmp_path)
    check = StorageCheck(run.root)
    prefix = tmp_path / "other-disk"
    (prefix / run.root.relative_to(run.root.anchor)).mkdir(parents=True)
    monkeypatch.setenv(TESTING_NODE_ROOT, str(prefix))
    report = write_probe(str(run.root), "learner rank 1", check.token)
    assert "sees another folder" in report.error
    with pytest.raises(SharedStorageError, match="learner rank 1 .* sees another folder"):
        check.verdict([report])


def test_a_probe_file_the_driver_cannot_read_back_fails_and_a_stale_token_too(tmp_path, monkeypatch):
    monkeypatch.delenv(TESTING_NODE_ROOT, raising=False)
    run = _run(tmp_path)
    check = StorageCheck(run.root)
    report = write_probe(str(run.root), "rollout worker 0", check.token)
    (run.root / PROBE_DIR / report.file).unlink()  # written on the node, not visible to the driver
    with pytest.raises(SharedStorageError, match="wrote its probe file, but the driver cannot read it back"):
        check.verdict([report])
    stale = write_probe(str(run.root), "rollout worker 0", "a token of an earlier start")
    assert "sees another folder" in stale.error


def test_a_single_node_check_does_nothing(tmp_path):
    check = StorageCheck(None)
    assert check.send({"x": object()}) == {} and check.check({}) == []
    check.close()
