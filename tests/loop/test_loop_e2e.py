"""The co-evolution loop end to end on a real local Ray cluster: vLLM CPU engine, DeepSpeed, skill bank.

One 3-iteration run on 2048 after a short SFT (staleness 1) serves every check of this module; its console
(stderr, as a log file would hold it) is kept with each line's time beside the run folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import time

import pytest

from coplay.config import ADAPTER_NAMES, load_config
from coplay.driver.schedule import bank_version_for, policy_step_for
from coplay.loop import train
from coplay.runs import RunDir
from coplay.types import read_shard
from tests.helpers import DEMO_CONFIG, tiny_loop_overrides


class StampedLines(io.TextIOBase):
    """stderr during the run, passed on and kept line by line with the time each line was written."""

    def __init__(self, out: io.TextIOBase) -> None:
        self.out, self.lines, self.partial = out, [], ""

    def write(self, text: str) -> int:
        self.out.write(text)
        *done, self.partial = (self.partial + text).split("\n")
        self.lines += [(time.monotonic(), line) for line in done]
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return False


@pytest.fixture(scope="module")
def run(ray_cluster, tmp_path_factory, tiny_model_config) -> RunDir:
    out = tmp_path_factory.mktemp("loop-runs")
    cfg = load_config(DEMO_CONFIG, [*tiny_loop_overrides(str(out), tiny_model_config.tiny.cache_dir),
                                    "loop.iterations=3", "logging.console=true"])
    console = StampedLines(sys.stderr)
    with contextlib.redirect_stderr(console):
        root = train(cfg)
    (out / "console.json").write_text(json.dumps(console.lines))
    return RunDir.open(root)


def _manifest_sha(run: RunDir, adapter: str, version: int) -> str:
    return json.loads((run.adapter_dir(adapter, version) / "manifest.json").read_text())["sha256"]


def _ledger(records: list[dict]) -> dict[int, dict[str, int]]:
    """Learner step -> adapter versions, rebuilt from the metrics (cold start, then each step's published)."""
    steps = {0: dict(records[0]["versions"])}
    for r in records:
        train_record = r.get("train") or r.get("final_train")
        if train_record and "learner_step" in train_record:
            step = train_record["learner_step"]
            steps[step] = {**steps[step - 1], **train_record["published"]}
    return steps


def test_every_adapter_trains_with_reward_variance_and_workers_acknowledge(run):
    records = run.read_metrics()
    final = records[-1]
    newest = final["final_versions"]
    trained = [r.get("train") or r.get("final_train") for r in records
               if r.get("train") or r.get("final_train")]
    varied = {a for t in trained for a, n in t.get("nonzero_advantages", {}).items() if n > 0}
    # every adapter but `segment` had a group whose samples earned different rewards, so GRPO moved it.
    # A segmentation's reward is its contracts' held-out pass rate, all or nothing for the tiny model's few
    # segments: its group of 4 answers often earns one reward, so `segment` must have trained on rewarded
    # samples, with or without variance (tests/skills cover its reward rule)
    assert {"act", "retrieve", "contract", "curator"} <= varied <= set(ADAPTER_NAMES) - {"propose"}, \
        f"adapters with reward variance: {varied}"
    assert any(t.get("adapters", {}).get("segment", {}).get("samples", 0) > 0
               and t.get("reward_parts", {}).get("segment", {}).get("n", 0) > 0 for t in trained)
    after_sft = records[0]["versions"]
    # ... and its published bytes differ from the SFT'd adapter the loop began with
    for adapter in sorted(varied):
        assert newest[adapter] > after_sft[adapter] > 0, adapter
        assert (_manifest_sha(run, adapter, newest[adapter])
                != _manifest_sha(run, adapter, after_sft[adapter])), adapter
    assert final["final_bank_versions"]["2048"] > records[0]["bank_versions"]["2048"]
    for name, acks in final["acknowledgements"].items():
        assert set(acks) == {"worker-0"}, f"{name} not acknowledged by every worker: {acks}"
    # adapters reach the worker by ObjectRef; each line says how many bytes its sync pulled (issue 38 item 5)
    pulled = [r["serving"]["pulled_bytes"] for r in records if "serving" in r]
    assert sum(pulled) > 0 and min(pulled) >= 0, pulled
    assert sorted(p.name for p in run.shards.glob("*.msgpack"))[:1] == ["it00001-w000-0000.msgpack"]
    assert (run.checkpoint_dir(3) / "state.json").is_file() and any(run.tb.iterdir())


def test_versions_in_trajectories_follow_the_schedule(run):
    records = run.read_metrics()
    ledger = _ledger(records)
    bank_by_iteration = {0: records[0]["bank_versions"]["2048"]}
    for r in records[1:]:
        if "scores" in r:
            bank_by_iteration[r["iteration"]] = r["bank_versions"]["2048"]
    for path in sorted(run.shards.glob("it*.msgpack")):
        shard = read_shard(path)
        k = shard.iteration
        expected = ledger[policy_step_for(k, 1)]
        for traj in shard.trajectories:
            assert traj.adapter_versions == {"act": expected["act"], "retrieve": expected["retrieve"]}, path
            assert traj.bank_version == bank_version_for(k)
            for sample in traj.samples:
                assert sample.adapter_version == expected[sample.adapter]


def test_every_episode_enters_training_once(run):
    records = run.read_metrics()
    trained = [r.get("train") or r.get("final_train") for r in records
               if r.get("train") or r.get("final_train")]
    episodes = {traj.episode_id for p in run.shards.glob("it*.msgpack")
                for traj in read_shard(p).trajectories}
    assert len(episodes) == 3 * 8
    assert [t["learner_step"] for t in trained] == [1, 2, 3]
    assert sum(t["reward_parts"]["act"]["n"] for t in trained) == sum(
        len([s for s in traj.samples if s.adapter == "act"])
        for p in run.shards.glob("it*.msgpack") for traj in read_shard(p).trajectories)


def test_every_learner_step_records_how_far_the_served_policy_moved_and_the_probe_runs(run):
    records = run.read_metrics()
    steps = [r.get("train") or r.get("final_train") for r in records
             if r.get("train") or r.get("final_train")]
    assert steps
    for step in steps:
        changes = step["served_change"]
        # every adapter a step published has its served change; act's KL is on the probe's prompts
        assert set(changes) == set(step["published"]) and "act" in changes, step["learner_step"]
        for adapter, change in changes.items():
            assert 0 <= change["changed_share"] <= 1 and change["kl_tokens"] > 0, (adapter, change)
            assert change["rel_change"] >= 0 and change["kl"] >= 0, (adapter, change)
            if step["nonzero_advantages"].get(adapter, 0) > 0:
                # a group with reward variance: the update moved the served weights and the policy (without
                # one an adapter moves only by AdamW's momentum from earlier steps, or not at all)
                assert change["rel_change"] > 0 and change["changed_share"] > 0, (adapter, change)
                assert change["kl"] > 0, (adapter, change)
    # the probe: after the cold start and every iteration, the bots beside the model on the same positions
    probed = {r["iteration"]: r["probe"]["2048"] for r in records if "probe" in r}
    assert sorted(probed) == [0, 1, 2, 3]
    # staleness 1: iteration 1 plays the cold start's adapters, whose probe is not played twice
    assert probed[1]["same_policy_as_iteration"] == 0 and not (run.eval / "probe-it00001.json").exists()
    for entry in probed.values():
        assert entry["model"]["n"] == entry["expert"]["n"] == entry["random"]["n"] == 16
        assert entry["expert"]["mean_regret"] <= entry["random"]["mean_regret"]
    written = json.loads((run.eval / "probe-it00003.json").read_text())
    assert len(written["results"]["2048"]["model"]["regrets"]) == 16
    # the last iteration's own learner step ran before its probe: the probe measured the final adapters,
    # and the line after the last iteration's is that step's, with the checkpoint that holds it
    assert written["meta"]["versions"] == records[-1]["final_versions"]
    after = records[[r.get("iteration") for r in records].index(3) + 1]
    assert after["final_train"]["trained_iteration"] == 3 and after["final_train"]["checkpoint"].endswith("3")


def test_every_line_says_how_its_wall_time_split_between_the_phases(run):
    """The phase timeline (coplay.driver.phases): the start's line holds the start-up and the cold start,
    each iteration's line its driver segments (adding up to its wall time) and the busy seconds of the
    rollouts, the bank update (per call kind, with tokens) and the learner step (forward, backward,
    optimizer, export); the last iteration's line also its own learner step; the report draws it."""
    from pytest import approx

    timed = [r for r in run.read_metrics() if "phases" in r]
    start, end = timed[0], timed[-1]
    iterations = [r for r in timed if "scores" in r]
    assert "cold_start" in start and "final_versions" in end
    assert [r["iteration"] for r in iterations] == [1, 2, 3]
    for r in timed:
        phases = r["phases"]
        assert sum(phases["share"].values()) == approx(1.0, abs=1e-9)
        assert sum(phases["seconds"].values()) == approx(phases["wall_s"], rel=1e-9)
        assert min(phases["seconds"].values()) >= 0
    for segment in ("startup_ray", "startup_learner", "cold_start_teacher", "cold_start_sft", "evaluation"):
        assert start["phases"]["seconds"][segment] > 0, segment
    assert start["phases"]["busy"]["startup"]["engines_s"] > 0
    assert start["phases"]["busy"]["cold_start"]["sft_s"] == start["cold_start"]["sft_seconds"]
    calls: dict[str, dict] = {}
    for r in iterations:
        phases, k = r["phases"], r["iteration"]
        assert phases["wall_s"] >= r["timings"]["iteration_s"] > 0
        assert phases["seconds"]["publish_sync"] > 0 and phases["seconds"]["rollouts"] > 0, k
        assert phases["busy"]["rollouts"]["generation_s"] > 0, k
        if k == 1:  # staleness 1: no learner step and no bank update during the first rollouts
            assert "learner" not in phases["busy"] and "bank_update" not in phases["busy"]
            continue
        learner = phases["busy"]["learner"]
        for part in ("batch_s", "forward_s", "backward_s", "optimizer_s", "step_s", "export_s", "publish_s",
                     "measure_s"):
            assert learner[part] > 0, (k, part)
        assert phases["seconds"]["learner"] > 0 and phases["busy"]["bank_update"]["seconds"] > 0, k
        for kind, usage in phases["busy"]["bank_update"]["calls"].items():
            assert usage["tokens_in"] > 0 and usage["tokens_out"] > 0 and usage["seconds"] > 0, (k, kind)
            calls[kind] = usage
    assert set(calls) == {"segment", "contract", "curator"}
    # the last iteration's line holds two learner steps (k-1 during its rollouts, then its own before its
    # evaluation); the closing line none
    last_busy, steps = iterations[-1]["phases"]["busy"]["learner"], [r for r in timed if "final_train" in r]
    assert not steps and "learner" not in end["phases"]["busy"]  # final_train lines carry no phases
    assert last_busy["seconds"] == approx(iterations[-1]["timings"]["train_s"] + _final(run)["train_seconds"])
    assert end["phases"]["seconds"].get("learner", 0.0) < 0.5
    assert "id='chart-phases'" in run.report.read_text()


def _final(run: RunDir) -> dict:
    """The `final_train` record: the last iteration's own learner step."""
    (final,) = [r["final_train"] for r in run.read_metrics() if "final_train" in r]
    return final


def _done_in(lines: list[str], phase: str) -> float:
    """The seconds of the console's `<phase>: done in <s> s` line (exactly one)."""
    found = [float(m.group(1)) for line in lines
             if (m := re.fullmatch(re.escape(phase) + r": done in ([0-9.]+) s(, .*)?", line))]
    assert len(found) == 1, (phase, [line for line in lines if phase in line])
    return found[0]


def test_the_console_announces_every_phase_with_its_own_time_and_is_never_silent_for_20_s(run):
    """Issue 41 item 2: with staleness 1 the rollouts of iteration k, the bank update over k-1 and GRPO step
    k-1 overlap; each phase says when it starts and ends with its own time, the figure the metrics line
    holds (the slowest worker's rollout time, the bank actor's seconds, the learner step with its rewards,
    export, publishing and update measure), and coplay's own lines never leave a gap over 20 s."""
    stamped = json.loads((run.root.parent / "console.json").read_text())
    lines = [line for _, line in stamped]
    records = run.read_metrics()
    for r in (r for r in records if "scores" in r):
        k, timings = r["iteration"], r["timings"]
        rollouts = _done_in(lines, f"iteration {k}: rollouts")
        assert rollouts == pytest.approx(timings["generation_s"], abs=0.051)
        if k > 1:
            bank = _done_in(lines, f"bank update over iteration {k - 1}")
            assert bank == pytest.approx(timings["bank_s"], abs=0.051)
            starts = [lines.index(f"iteration {k}: rollouts (8 episode seats) ..."),
                      lines.index(f"bank update over iteration {k - 1} ..."),
                      lines.index(f"GRPO step {k - 1} on the samples of iteration {k - 1} ...")]
            ends = [i for i, line in enumerate(lines) if line.startswith(f"iteration {k}: rollouts: done")]
            assert starts == sorted(starts) and starts[-1] < ends[0]  # all three began before any ended
    final = _final(run)
    final_own = final["timings"]["batch_s"] + final["train_seconds"] + final["measure_seconds"]
    for r in records:  # each learner step: its rewards, the step with export and publishing, the measure
        if r.get("train"):
            j, parts = r["train"]["learner_step"], r["phases"]["busy"]["learner"]
            own = parts["batch_s"] + parts["seconds"] + parts["measure_s"]
            if r["iteration"] == final["trained_iteration"]:  # its line's busy learner holds both steps
                own -= final_own
        elif "final_train" in r:
            j, final = r["final_train"]["learner_step"], r["final_train"]
            own = final["timings"]["batch_s"] + final["train_seconds"] + final["measure_seconds"]
        else:
            continue
        grpo = _done_in(lines, f"GRPO step {j} on the samples of iteration {j}")
        assert grpo == pytest.approx(own, abs=0.5), (j, grpo, own)
    assert _done_in(lines, "checkpoint after iteration 3") >= 0.0  # there (a tiny model's takes ~0.1 s)
    assert _done_in(lines, "start-up: rollout engines (1 workers)") == pytest.approx(
        records[0]["phases"]["busy"]["startup"]["engines_s"], abs=0.051)
    assert not [line for line in lines if "Loading safetensors checkpoint shards" in line]  # vLLM's bar
    assert not [line for line in lines if "FutureWarning" in line]  # vLLM's and DeepSpeed's calls into torch
    own = [(t, line) for t, line in stamped if "pid=" not in line[:80]]  # not Ray's actor lines
    gaps = [(b[0] - a[0], a[1], b[1]) for a, b in zip(own, own[1:], strict=False)]
    assert max(gaps)[0] < 20.0, max(gaps)  # the longest silence, with the lines before and after it
