"""The per-decision probe inside a run (`probe.every`): the policy decides once at each fixed probe position
(`coplay.eval.probe`), on the run's rollout workers, and each choice is scored by its regret against the
game's own lookahead; the random and expert bots are scored on the same positions, in the same file.

Why it runs every iteration: one decision per position and no tile-spawn noise in the policy's part, so it
sees a policy change that a few noisy episodes cannot. Its `act` samples are also the fixed prompts on which
the next learner step measures the served policy's KL (`System.kl_prompts`). Results go to
`eval/probe-it<k>.json` and the iteration's metrics line (`probe`).

Beside the regrets, each probe compares how the policy's choices spread over the actions with the expert
bot's on the same positions (`coplay.eval.action_spread`), and warns (log, file, metrics line) when one
action takes more than half of the policy's choices where the expert's share of it is not: the probe of
iteration 0 is the cold start's, where such a collapse starts. No ray here: the System does the remote calls.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig
from coplay.eval.action_spread import brief_spread, collapse_warning
from coplay.eval.protocol import player_seat
from coplay.eval.stats import PairedDifference, paired_difference
from coplay.files import write_json_atomic
from coplay.rollout.model_episodes import EpisodePlan
from coplay.types import Trajectory, decode_shard
from coplay_envs.registry import text_kwargs

BOTS = ("random", "expert")
PROBE_KIND = "per-decision probe"  # `meta.protocol.kind` of every probe file
log = logging.getLogger(__name__)


def probe_games(cfg: CoplayConfig) -> list[str]:
    """The run's games that have a probe (the single-player games with lookahead parameters)."""
    from coplay.eval.probe_values import DEFAULTS

    return [g for g in cfg.games if g in DEFAULTS]


@dataclass
class RunProbe:
    """The run's probes (one `ProbeSet` per game, built or read from the cache once) and the bots' scores
    on them (deterministic, so computed once)."""

    probes: dict[str, Any] = field(default_factory=dict)
    bots: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the newest probe's (versions, bank versions, iteration, summary): the same policy is not probed twice
    last: tuple[dict[str, int], dict[str, int], int, dict[str, Any]] | None = None

    @classmethod
    def load(cls, cfg: CoplayConfig) -> RunProbe:
        from coplay.driver.progress import phase
        from coplay.eval.probe import bot_actions, intervals_disjoint, load_or_build, score_actions

        out = cls()
        for game in probe_games(cfg):
            with phase(f"probe: {game} ({cfg.probe.positions} positions)"):
                probe = load_or_build(game, cfg.probe.cache_dir, n=cfg.probe.positions)
                scores = {bot: score_actions(probe, bot_actions(probe, bot)) for bot in BOTS}
            out.probes[game] = probe
            separate = (intervals_disjoint(scores["expert"], scores["random"])
                        and scores["expert"]["mean_regret"] < scores["random"]["mean_regret"])
            out.bots[game] = {**scores, "bots_separate": separate}
        return out

    def plans(self, cfg: CoplayConfig, versions: dict[str, int], label: str) -> list[EpisodePlan]:
        """One single-decision episode per position, started from its recorded state, played by the model at
        `versions` with the evaluation's sampling; sampling seeds depend on the position only (the same
        random numbers at every iteration)."""
        return self.seat_plans(cfg, player_seat(cfg, "model", versions), label)

    def seat_plans(self, cfg: CoplayConfig, seat: Any, label: str) -> list[EpisodePlan]:
        """`plans` for any seat player (`coplay eval --probe`: the base model, a checkpoint, a bot)."""
        plans = []
        for game, probe in self.probes.items():
            shown = text_kwargs(game, cfg.game[game].env_kwargs)  # the run's text options (show_clears)
            for i, position in enumerate(probe.positions):
                key = f"probe-{game}-p{i}"
                plans.append(EpisodePlan(game, position.seed, f"{label}-{key}", seat, {},
                                         {**position.env_kwargs, **shown}, max_steps=1, sample_key=key,
                                         start_state=position.state))
        return plans

    def score(self, trajectories: list[Trajectory], label: str) -> dict[str, Any]:
        """Per game: the model's regret figures beside the bots' (`coplay.eval.probe.score_actions`), the
        model's regret at each position (for paired comparisons between iterations), and how its choices
        spread over the actions beside the expert bot's on the same positions (`action_spread`)."""
        from coplay.eval.action_spread import compare_spread
        from coplay.eval.probe import score_actions

        by_id = {t.episode_id: t for t in trajectories}
        out: dict[str, Any] = {}
        for game, probe in self.probes.items():
            actions = []
            for i in range(len(probe.positions)):
                traj = by_id.get(f"{label}-probe-{game}-p{i}")
                step = traj.steps[0] if traj is not None and traj.steps else None
                actions.append(None if step is None or step.parse_error else step.action)
            model = score_actions(probe, actions)
            expert = self.bots[game]["expert"]
            out[game] = {"model": model, **self.bots[game],
                         "action_spread": compare_spread(model["actions"], expert["actions"], model["n"]),
                         "probe_version": probe.version, "probe_sha256": probe.sha256,
                         "params": probe.params.as_dict()}
        return out

    def protocol(self) -> dict[str, Any]:
        """What the probe files record of how they were made, as every evaluation file does: per game the
        positions (their count, start seeds and the probe set's sha256) and one decision each (`max_steps`
        1)."""
        return {"kind": PROBE_KIND, "games": list(self.probes), "max_steps": 1,
                "positions": {g: len(p.positions) for g, p in self.probes.items()},
                "seeds": {g: [pos.seed for pos in p.positions] for g, p in self.probes.items()},
                "probe_sha256": {g: p.sha256 for g, p in self.probes.items()}}


def probe_due(cfg: CoplayConfig, iteration: int) -> bool:
    """After the cold start (iteration 0) and every `probe.every` iterations, when the run has a probe."""
    every = cfg.probe.every
    return bool(every) and iteration % every == 0 and bool(probe_games(cfg))


def run_probe(system: Any, run_probe_set: RunProbe, iteration: int, versions: dict[str, int],
              bank_versions: dict[str, int]) -> dict[str, Any]:
    """The probe on the workers at the given versions; writes `eval/probe-it<k>.json`, keeps the `act`
    samples as the next learner step's KL prompts, and returns the per-game summary (without per-position
    regrets) for the metrics line. Versions already probed are not played again: each game's entry names the
    iteration whose figures it repeats (`same_policy_as_iteration`) and no file is written."""
    cfg = system.cfg
    last = run_probe_set.last
    if last is not None and last[0] == versions and last[1] == bank_versions:
        # e.g. iteration 1 with staleness 1 plays the cold start's adapters again: its figures stand
        return {game: {**entry, "same_policy_as_iteration": last[2]} for game, entry in last[3].items()}
    label = f"probe-it{iteration}"
    plans = run_probe_set.plans(cfg, versions, label)
    system.sync(versions, [], bank_versions, keep_frozen=True)
    results = system.gather(system.launch(iteration, plans, "probe"))
    trajectories = [t for r in results for t in decode_shard(r.shard, label).trajectories]
    system.probe_prompts = [s for t in trajectories for s in t.samples if s.adapter == "act"]
    scored = run_probe_set.score(trajectories, label)
    flag_collapses(scored, iteration)
    write_json_atomic(system.run.eval / f"probe-it{iteration:05d}.json",
                      {"meta": {"iteration": iteration, "versions": versions, "bank_versions": bank_versions,
                                "temperature": cfg.eval.temperature, "max_steps": 1,
                                "protocol": run_probe_set.protocol()}, "results": scored})
    summary = probe_summary(scored)
    run_probe_set.last = (dict(versions), dict(bank_versions), iteration, summary)
    return summary


def flag_collapses(scored: dict[str, Any], iteration: int) -> list[str]:
    """Set each game's `action_spread.warning` (None, or the line `collapse_warning` gives when the policy
    collapsed onto one action where the expert did not) and log the warnings, which the console shows;
    returns them."""
    warnings = []
    for game, entry in scored.items():
        spread = entry["action_spread"]
        spread["warning"] = collapse_warning(game, iteration, spread)
        if spread["warning"]:
            log.warning("coplay: %s", spread["warning"])
            warnings.append(spread["warning"])
    return warnings


def probe_summary(scored: dict[str, Any]) -> dict[str, Any]:
    """The metrics line's `probe`: per game the regret figures of the model and both bots (without the
    per-position regrets), whether the bots separate, and the action spread's comparison and warning."""
    return {game: {"model": _brief(entry["model"]), "expert": _brief(entry["expert"]),
                   "random": _brief(entry["random"]), "bots_separate": entry["bots_separate"],
                   "action_spread": {**brief_spread(entry["action_spread"]),
                                     "warning": entry["action_spread"].get("warning")}}
            for game, entry in scored.items()}


def _brief(score: dict[str, Any]) -> dict[str, Any]:
    r = score["regret"]
    return {"n": score["n"], "mean_regret": score["mean_regret"], "ci95": [r["ci_low"], r["ci_high"]],
            "best_share": score["best_share"], "invalid_share": score["invalid_share"]}


def read_probes(run_root: Path) -> list[dict[str, Any]]:
    """A run's probe files (`eval/probe-it<k>.json`, as `run_probe` writes them), oldest first."""
    return [json.loads(p.read_text()) for p in sorted((run_root / "eval").glob("probe-it*.json"))]


def regret_change(first: dict[str, Any], last: dict[str, Any], game: str) -> PairedDifference | None:
    """`last`'s regret minus `first`'s on `game`, paired over the probe's positions (95% t); None when
    either file lacks the game or no position has both regrets."""
    if game not in first.get("results", {}) or game not in last.get("results", {}):
        return None
    before = dict(enumerate(first["results"][game]["model"]["regrets"]))
    return paired_difference(before, dict(enumerate(last["results"][game]["model"]["regrets"])))
