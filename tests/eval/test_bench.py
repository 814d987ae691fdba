"""The benchmark suite runner: members run as processes from a checkout; missing, failing, silent and
hanging members are recorded and the suite goes on; results file and summary table. The real suite
(`coplay bench --quick --only envs`) runs in the slow tier."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from coplay.eval.bench import headline, last_json_object, run_suite, summary_table

MEMBERS = {
    "ok": """
        import json, sys
        print("warming up")
        print(json.dumps({"quick": "--quick" in sys.argv, "tokens_per_s": 12.5, "runs": [1, 2],
                          "headline": {"tokens_per_s": 12.5}}, indent=2))
    """,
    "plain": """
        import json
        print(json.dumps({"note": "text", "a": 1, "b": 2.5, "c": 3, "d": 4, "e": 5}))
    """,
    "boom": """
        raise RuntimeError("engine exploded")
    """,
    "silent": """
        print("no json here")
    """,
    "noquick": """
        import argparse, json
        args = argparse.ArgumentParser().parse_args()
        print(json.dumps({"ran": "defaults"}))
    """,
    "slow": """
        import json, time
        time.sleep(1.0)
        print(json.dumps({"done": 1}))
    """,
    "hang": """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(os.environ["CHILD_PID_FILE"], "w").write(str(child.pid))
        time.sleep(60)
    """,
}


def _running(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan's zombie waits for init to reap it)."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return False
    return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "benchmarks" / "__init__.py").write_text("")
    for name, code in MEMBERS.items():
        (root / "benchmarks" / f"{name}.py").write_text(textwrap.dedent(code))
    return root


def test_last_json_object_skips_log_lines():
    assert last_json_object('log line\n{"a": 1}\nmore\n{\n  "b": [1, 2]\n}\n') == {"b": [1, 2]}
    assert last_json_object('{"a": 1}\ntrailing words') is None
    assert last_json_object("") is None


def test_headline_prefers_the_members_choice():
    assert headline({"x": 1, "headline": {"tokens_per_s": 3.0}}) == [("tokens_per_s", 3.0)]
    assert headline({"s": "t", "a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "flag": True}) == [
        ("a", 1), ("b", 2), ("c", 3), ("d", 4)]


def test_suite_records_every_outcome_and_goes_on(checkout, tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("CHILD_PID_FILE", str(pid_file))
    out = tmp_path / "results.json"
    names = ("ok", "missing", "boom", "silent", "hang", "plain", "noquick")
    path, members = run_suite(True, names, out, timeout_s=3, root=checkout)
    status = {m.name: m.status for m in members}
    assert status == {"ok": "ok", "missing": "missing", "boom": "failed", "silent": "failed",
                      "hang": "timeout", "plain": "ok", "noquick": "ok"}
    saved = json.loads(path.read_text())
    assert path == out and saved["quick"] is True and sorted(saved["benchmarks"]) == sorted(names)
    assert saved["benchmarks"]["ok"]["result"]["quick"] is True  # --quick reached the member
    assert saved["benchmarks"]["ok"]["command"] == "python -m benchmarks.ok --quick"
    assert saved["benchmarks"]["boom"]["error"].startswith("exit status 1: RuntimeError: engine exploded")
    assert (saved["benchmarks"]["noquick"]["note"]
            == "the member has no --quick flag: it ran with its defaults")
    assert saved["benchmarks"]["noquick"]["command"] == "python -m benchmarks.noquick"
    assert "printed no JSON" in saved["benchmarks"]["silent"]["error"]
    assert "benchmarks/missing.py does not exist" in saved["benchmarks"]["missing"]["error"]
    time.sleep(0.2)
    assert not _running(int(pid_file.read_text())), "the timeout must stop the member's children too"
    table = summary_table(members)
    assert "tokens_per_s=12.5" in table and "a=1, b=2.5, c=3, d=4" in table and "missing" in table


def test_a_long_member_says_it_is_still_running_and_keeps_its_output(checkout, tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.setattr("coplay.eval.bench.HEARTBEAT_S", 0.3)
    _, members = run_suite(True, ("slow",), tmp_path / "results.json", timeout_s=30, root=checkout)
    assert members[0].status == "ok" and members[0].result == {"done": 1}
    beats = [line for line in capsys.readouterr().out.splitlines() if "still running" in line]
    assert beats and beats[0].startswith("[bench] slow: still running (")


@pytest.mark.slow
def test_coplay_bench_quick_runs_the_env_member(tmp_path, capsys):
    from coplay.cli import main

    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "envs", "--out", str(out)]) == 0
    envs = json.loads(out.read_text())["benchmarks"]["envs"]
    assert envs["status"] == "ok" and envs["result"]["failed"] == []
    assert envs["result"]["headline"]["game2048_steps_per_s"] > 0
    assert "envs" in capsys.readouterr().out
