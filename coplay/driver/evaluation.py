"""Evaluation inside a run (`eval.every`, `eval.at_start`): the evaluation protocol's episodes
(`coplay.eval.protocol`) played on the run's rollout workers at given adapter and bank versions, written to
the run's `eval/it<k>.json` and `.md`, with the ruler (`coplay.eval.ruler`): the random and expert bots (2048:
also the fixed-order heuristic) on the same protocol, played once per run in this process and written as
`eval/bots-<bot>.json`, the protocol check and the paired differences to the bots in each file's meta (off
with `eval.ruler=false`). No ray here: the System's methods do the remote calls.
"""

from __future__ import annotations

from typing import Any

from coplay.driver.league import League
from coplay.eval.protocol import eval_plans, evaluated, player_seat, summarize_eval, write_eval
from coplay.eval.ruler import protocol_meta, ruler_meta
from coplay.types import decode_shard


def evaluate(system: Any, iteration: int, versions: dict[str, int], bank_versions: dict[str, int],
             league: League | None = None) -> dict[str, Any]:
    """The protocol on the workers at the given versions; returns the summary per game. Its multi-seat
    games also rate the `league`'s members."""
    cfg = system.cfg
    plans = eval_plans(cfg, player_seat(cfg, "model", versions), f"it{iteration}")
    # the newest versions may not have been served yet; the frozen opponents stay for the next iteration
    system.sync(versions, [], bank_versions, keep_frozen=True)
    results = system.gather(system.launch(iteration, plans, "evaluation"))
    trajectories = [t for r in results for t in decode_shard(r.shard, f"eval it{iteration}").trajectories]
    summary = summarize_eval(evaluated(trajectories, plans))
    rated = league is not None and league.play(trajectories) > 0
    meta = {"player": "model", "iteration": iteration, "versions": versions,
            "bank_versions": bank_versions, "temperature": cfg.eval.temperature,
            **protocol_meta(cfg, list(cfg.games))}  # seeds, episodes, horizon, env_kwargs
    # the bots on this protocol (played once per run on the driver, then read from eval/bots-<bot>.json)
    meta.update(ruler_meta(cfg, summary, system.run.eval))
    write_eval(system.run.eval, f"it{iteration:05d}", summary, meta,
               league.table() if rated and league is not None else None)
    return summary
