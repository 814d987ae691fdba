"""The run folder layout and atomic metrics appends."""

from __future__ import annotations

import json
import threading

import pytest

from coplay.runs import SUBDIRS, RunDir, RunDirError


def test_create_makes_the_layout_and_never_overwrites(tmp_path):
    a = RunDir.create(tmp_path, "demo", "x: 1\n", when=0)
    b = RunDir.create(tmp_path, "demo", "x: 2\n", when=0)
    assert a.root != b.root and a.root.name.startswith("demo-19700101-")
    for sub in SUBDIRS:
        assert (a.root / sub).is_dir()
    assert a.config_path.read_text() == "x: 1\n" and b.config_path.read_text() == "x: 2\n"
    assert a.bank_path("avalon/good", 3) == a.root / "banks" / "avalon" / "good" / "v3.json"
    assert a.adapter_dir("act", 2) == a.root / "adapters" / "act" / "v2"
    assert a.checkpoint_dir(5) == a.root / "checkpoints" / "step-5"
    assert RunDir.open(a.root) == a


def test_open_rejects_a_folder_without_config(tmp_path):
    with pytest.raises(RunDirError, match="not a coplay run folder"):
        RunDir.open(tmp_path)


def test_concurrent_metric_appends_stay_whole_lines(tmp_path):
    run = RunDir.create(tmp_path, "m", "{}\n")
    payload = "x" * 5000

    def writer(worker: int) -> None:
        for i in range(50):
            run.append_metrics({"worker": worker, "i": i, "pad": payload})

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = run.read_metrics()
    assert len(records) == 200
    assert sorted((r["worker"], r["i"]) for r in records) == [(w, i) for w in range(4) for i in range(50)]


def test_torn_last_line_is_left_out_but_corruption_elsewhere_is_an_error(tmp_path):
    run = RunDir.create(tmp_path, "m", "{}\n")
    run.append_metrics({"iteration": 0})
    with open(run.metrics_path, "a") as f:
        f.write('{"iteration": 1, "sc')
    assert run.read_metrics() == [{"iteration": 0}]
    run.metrics_path.write_text('{"a": 1}\nnot json\n' + json.dumps({"b": 2}) + "\n")
    with pytest.raises(RunDirError, match="line 2"):
        run.read_metrics()


def test_metrics_reject_nan(tmp_path):
    run = RunDir.create(tmp_path, "m", "{}\n")
    with pytest.raises(ValueError):
        run.append_metrics({"score": float("nan")})


def test_a_resume_with_another_config_keeps_the_old_one_beside_it(tmp_path):
    run = RunDir.create(tmp_path, "r", "loop:\n  iterations: 2\n")
    assert run.record_config("loop:\n  iterations: 2\n") is None  # same config: nothing moves
    kept = run.record_config("loop:\n  iterations: 4\n")
    assert kept == run.root / "config.1.yaml" and "iterations: 2" in kept.read_text()
    assert "iterations: 4" in run.config_path.read_text()
    assert run.record_config("loop:\n  iterations: 6\n").name == "config.2.yaml"


def test_every_file_of_a_run_folder_gets_the_same_ordinary_mode(tmp_path):
    """config.yaml and report.html (written atomically) and metrics.jsonl (appended) are readable alike: 0644
    under the usual umask, never mkstemp's 0600."""
    import os
    import stat

    from coplay.report.html import write_report

    mask = os.umask(0o022)
    try:
        run = RunDir.create(tmp_path, "modes", "x: 1\n", when=0)
        run.append_metrics({"iteration": 1})
        report = write_report(run.root)
    finally:
        os.umask(mask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (run.config_path, run.metrics_path, report)}
    assert modes == {"config.yaml": 0o644, "metrics.jsonl": 0o644, "report.html": 0o644}
