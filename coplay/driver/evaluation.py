"""Evaluation inside a run (`eval.every`, `eval.at_start`): the evaluation protocol's episodes
(`coplay.eval.protocol`) played on the run's rollout workers at given adapter and bank versions, written to
the run's `eval/it<k>.json` and `.md`. No ray here: the System's methods do the remote calls.
"""

from __future__ import annotations

from typing import Any

from coplay.driver.league import League
from coplay.eval.protocol import eval_plans, evaluated, player_seat, summarize_eval, write_eval
from coplay.types import decode_shard


def evaluate(system: Any, iteration: int, versions: dict[str, int], bank_versions: dict[str, int],
             league: League | None = None) -> dict[str, Any]:
    """The protocol on the workers at the given versions; returns the summary per game. Its multi-seat
    games also rate the `league`'s members."""
    cfg = system.cfg
    plans = eval_plans(cfg, player_seat(cfg, "model", versions), f"it{iteration}")
    # the newest versions may not have been served yet; the frozen opponents stay for the next iteration
    system.sync(versions, [], bank_versions, keep_frozen=True)
    results = system.gather(system.launch(iteration, plans), "evaluation")
    trajectories = [t for r in results for t in decode_shard(r.shard, f"eval it{iteration}").trajectories]
    summary = summarize_eval(evaluated(trajectories, plans))
    rated = league is not None and league.play(trajectories) > 0
    write_eval(system.run.eval, f"it{iteration:05d}", summary,
               {"player": "model", "iteration": iteration, "versions": versions,
                "bank_versions": bank_versions, "temperature": cfg.eval.temperature,
                "seeds": [cfg.seeds.eval.start, cfg.seeds.eval.stop]},
               league.table() if rated and league is not None else None)
    return summary
