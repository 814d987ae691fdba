"""The run report shows how the model's probe choices spread over the actions beside the expert bot's, with
the collapse warnings counted, and how the cold start balanced its `act` examples; `make demo`'s closing
lines say the same in one line per probed point."""

from __future__ import annotations

import json
from collections import Counter

from coplay.driver.demo import probe_lines
from coplay.eval.action_spread import collapse_warning, compare_spread
from coplay.eval.stats import summarize
from coplay.learn.act_balance import balance_act_examples
from coplay.learn.teacher import ChatExample
from coplay.report.data import load_run
from coplay.report.sections import cold_start, probes
from coplay.runs import RunDir

EXPERT = {"down": 20, "left": 18, "right": 14, "up": 12}


def _score(n: int) -> dict:
    values = [float(i % 5) for i in range(n)]
    return {"n": n, "mean_regret": sum(values) / n, "regret": summarize(values).as_dict(), "best_share": 0.4,
            "invalid_share": 0.0, "regrets": values}


def _probe(run: RunDir, iteration: int, model: dict[str, int]) -> None:
    spread = compare_spread(model, EXPERT, 64)
    spread["warning"] = collapse_warning("2048", iteration, spread)
    body = {"meta": {"iteration": iteration},
            "results": {"2048": {"model": _score(64), "random": _score(64), "expert": _score(64),
                                 "bots_separate": True, "action_spread": spread}}}
    (run.eval / f"probe-it{iteration:05d}.json").write_text(json.dumps(body))


def _run(tmp_path) -> RunDir:
    run = RunDir.create(tmp_path, "spread", "{}\n")
    run.eval.mkdir(parents=True, exist_ok=True)
    _probe(run, 0, {"left": 44, "down": 10, "up": 6, "right": 4})  # the cold start taught `left`
    _probe(run, 1, {"left": 44, "down": 10, "up": 6, "right": 4})
    _probe(run, 2, {"down": 22, "left": 20, "right": 12, "up": 10})
    teacher = [ChatExample("act", [], "", game="2048", action="left" if i % 5 else "down", step=i)
               for i in range(400)]
    _, balance = balance_act_examples(teacher, 64, 0.5, 0)
    run.append_metrics({"iteration": 0, "cold_start": {
        "sft": {"act": {"examples": 64, "batches": 32, "epochs": 1, "first_loss": 2.0, "last_loss": 0.4}},
        "act_balance": balance}})
    return run


def test_the_probe_section_puts_the_models_actions_beside_the_experts_and_counts_the_warnings(tmp_path):
    html = probes(load_run(_run(tmp_path).root))
    assert "2 of 3 probes warned of a collapse (iterations 0, 1)" in html
    assert "2048, the cold start (iteration 0)" in html and "2048, iteration 2" in html
    # the cold start's table: `left` 44 of 64 for the model, 18 of 64 for the expert at the same positions
    assert "<td>left</td><td>44 (69%)</td><td>18 (28%)</td>" in html
    assert "one action dominates where the expert's choices spread" in html


def test_the_cold_start_section_says_how_the_act_examples_were_balanced(tmp_path):
    html = cold_start(load_run(_run(tmp_path).root))
    assert "the teacher chose 2 actions in 400 examples, most often left (80%)" in html
    assert "balanced, 64 kept, most often" in html and "(50%, bound 50%)" in html


def test_the_demo_closing_lines_name_the_most_chosen_action_at_the_first_and_last_probe(tmp_path):
    run = _run(tmp_path)
    text = "\n".join(probe_lines(run.root))
    assert "actions at iteration 0: most chosen 'left' 69% (expert bot 28% on the same positions" in text
    assert "COLLAPSED" in text.splitlines()[[i for i, ln in enumerate(text.splitlines())
                                              if "actions at iteration 0" in ln][0]]
    last = next(ln for ln in text.splitlines() if "actions at iteration 2" in ln)
    assert "most chosen 'down' 34%" in last and "COLLAPSED" not in last
    assert Counter(ln.strip().split(":")[0] for ln in text.splitlines() if "actions at" in ln) == {
        "actions at iteration 0": 1, "actions at iteration 2": 1}
