"""The ablation benchmark (benchmarks/coevolution.py) end to end: `--quick` runs `full` and `grpo_no_bank` for
real (local Ray, the tiny model, two iterations each) and writes one table with a difference-to-full row and
one plot; the run folders show what each variant ran: under `grpo_no_bank` no `retrieve` call, no skill
section in any `act` prompt and no bank update, under `full` all three. About a minute on two cores: the
issue asks for this smoke in `make test`."""

from __future__ import annotations

import json

import pytest

from coplay.runs import RunDir
from coplay.types import read_shard


@pytest.fixture(scope="module")
def quick(tmp_path_factory, tiny_model_config):
    from benchmarks.coevolution import main

    root = tmp_path_factory.mktemp("coevolution")
    assert main(["--quick", "--out", str(root / "out"), f"run.out_dir={root / 'runs'}",
                 f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}"]) == 0
    return root / "out"


def test_quick_writes_one_table_with_every_variant_and_the_difference_to_full(quick):
    summary = json.loads((quick / "coevolution-quick.json").read_text())
    rows = {r["variant"]: r for r in summary["table"]}
    assert {v for v, r in rows.items() if not r["from"] and not r["bot"]} == {"full", "grpo_no_bank"}
    # the bots on the same protocol (2 seeds x 3 moves here), with the protocol check every row carries
    assert {v for v, r in rows.items() if r["bot"]} == {"random bot", "expert bot", "heuristic bot"}
    assert all(r["n"] == 2 for r in rows.values() if r["bot"])
    assert rows["full"]["protocol_check"] is not None and summary["summary"][0].startswith("2048: protocol")
    assert rows["full"]["paired_minus_cold_start"]["n"] == 2  # the final evaluation against iteration 0
    assert {r["game"] for r in rows.values()} == {"2048"}
    # the SFT variants that did not run are the cold-start evaluations of the GRPO runs (iteration 0)
    assert rows["sft_only"]["from"] == "grpo_no_bank at iteration 0" and rows["sft_only"]["iteration"] == 0
    assert rows["sft_first_bank"]["from"] == "full at iteration 0"
    assert rows["full"]["minus_full"] is None
    diff = rows["grpo_no_bank"]["minus_full"]
    assert diff["difference"] == pytest.approx(rows["grpo_no_bank"]["mean"] - rows["full"]["mean"])
    assert diff["ci95"] is not None and diff["ci95"][0] <= diff["difference"] <= diff["ci95"][1]
    assert all(r["n"] == 2 and r["iteration"] == 2 for r in rows.values()
               if not r["from"] and not r["bot"])  # final
    assert summary["command"].startswith("python -m benchmarks.coevolution --quick")
    for run in summary["runs"]:
        assert run["sizes"]["iterations"] == 2 and run["seconds"] > 0
        assert run["commit"] == summary["commit"]  # each run names the code it started from
        assert [p["iteration"] for p in run["curve"]] == [0, 2]  # after the cold start, and the last
        # the phase timeline of the whole run: the start, both iterations and the closing line
        assert run["phases"]["lines"] == 4 and sum(run["phases"]["share"].values()) == pytest.approx(1.0)
        assert run["phases"]["seconds"]["rollouts"] > 0 and run["phases"]["busy"]["learner"]["forward_s"] > 0
    text = (quick / "coevolution-quick.md").read_text()
    assert "| 2048 | grpo_no_bank |" in text and "minus full" in text
    assert (quick / "coevolution-quick.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _prompts_and_adapters(run: RunDir, tokenizer) -> tuple[list[str], set[str]]:
    samples = [s for p in sorted(run.shards.glob("it*.msgpack")) for t in read_shard(p).trajectories
               for s in t.samples]
    act = [tokenizer.decode(s.prompt_ids) for s in samples if s.adapter == "act"]
    return act, {s.adapter for s in samples}


def test_the_runs_did_what_their_variant_says(quick, tiny_model_config):
    from coplay.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_config)
    runs = {r["variant"]: RunDir.open(r["run_dir"])
            for r in json.loads((quick / "coevolution-quick.json").read_text())["runs"]}
    no_bank_prompts, no_bank_adapters = _prompts_and_adapters(runs["grpo_no_bank"], tokenizer)
    full_prompts, _ = _prompts_and_adapters(runs["full"], tokenizer)
    assert no_bank_prompts and no_bank_adapters == {"act"}
    assert not any("Active skill" in p or "SKILL:" in p for p in no_bank_prompts)
    assert all("Active skill" in p for p in full_prompts)
    second = {name: next(r for r in run.read_metrics() if r.get("iteration") == 2 and "scores" in r)
              for name, run in runs.items()}
    assert second["grpo_no_bank"]["bank_sizes"] == {}  # no bank update was requested
    assert "2048" in second["full"]["bank_sizes"]
    assert second["grpo_no_bank"]["train"]["learner_step"] >= 1  # GRPO still trains


def test_results_of_separate_calls_combine_into_one_table(quick, tmp_path):
    from benchmarks.coevolution import main

    summary = json.loads((quick / "coevolution-quick.json").read_text())
    assert summary["runs"] and all("approved_operations" in r for r in summary["runs"])
    parts = []
    for k, run in enumerate(summary["runs"]):  # as if each variant had been run by its own call
        part = tmp_path / f"part{k}.json"
        part.write_text(json.dumps({**summary, "runs": [run]}))
        parts.append(str(part))
    assert main(["--combine", *reversed(parts), "--out", str(tmp_path / "out"), "--name", "both"]) == 0
    both = json.loads((tmp_path / "out" / "both.json").read_text())
    assert both["table"] == summary["table"] and len(both["sources"]) == len(parts)
    assert (tmp_path / "out" / "both.png").is_file() and (tmp_path / "out" / "both.md").is_file()


def test_a_run_folder_reads_back_as_its_call_wrote_it_and_a_stopped_one_says_so(quick, tmp_path):
    """`--from-run`: a finished run folder gives back the curve and the paired difference its own call wrote;
    a run stopped before its last evaluation keeps what it measured and is marked, not passed off as whole."""
    import shutil

    from benchmarks.coevolution import main

    summary = json.loads((quick / "coevolution-quick.json").read_text())
    run = next(r for r in summary["runs"] if r["variant"] == "grpo_no_bank")
    assert main(["--from-run", run["run_dir"], "--out", str(tmp_path), "--name", "back"]) == 0
    back = json.loads((tmp_path / "back.json").read_text())
    (again,) = back["runs"]
    assert again["curve"] == run["curve"] and again["stopped_early"] is False and back["complete"] is True
    assert again["phases"] == run["phases"] and again["bots"].keys() == run["bots"].keys()
    rows = {r["variant"]: r for r in back["table"]}
    original = {r["variant"]: r for r in summary["table"]}
    key = "paired_minus_cold_start"
    assert rows["grpo_no_bank"][key] == original["grpo_no_bank"][key]

    stopped = tmp_path / "stopped"
    shutil.copytree(run["run_dir"], stopped)
    sorted((stopped / "eval").glob("it*.json"))[-1].unlink()  # as if stopped before the last evaluation
    assert main(["--from-run", str(stopped), "--out", str(tmp_path), "--name", "cut"]) == 0
    cut = json.loads((tmp_path / "cut.json").read_text())
    assert cut["complete"] is False and cut["stopped_early"] == [str(stopped)]
    assert cut["runs"][0]["last_evaluated_iteration"] == 0
    assert "stopped early: iteration 0" in (tmp_path / "cut.md").read_text()

    (stopped / "eval").mkdir(exist_ok=True)
    for path in (stopped / "eval").glob("it*.json"):
        path.unlink()
    with pytest.raises(SystemExit, match="no evaluation"):
        main(["--from-run", str(stopped), "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="not a run folder"):
        main(["--from-run", str(tmp_path), "--out", str(tmp_path)])
