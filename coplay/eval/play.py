"""`coplay play`: play a game with any policy of `coplay.eval.policies` (a bot, the base model, a run's
adapters, an endpoint) and show a table of scores; `render` prints every observation, the action taken, its
reward, and the final state, each move as it is played; the trajectories can be written as a shard. Models
play through the same in-process runner as `coplay eval` (`coplay.eval.runner`). No ray.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any, TextIO

from coplay.config import CoplayConfig
from coplay.driver.progress import phase
from coplay.eval.policies import BOTS, Policy
from coplay.eval.stats import summarize
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.types import Shard, Step, Trajectory, write_shard


def render_step(traj: Trajectory, step: Step) -> str:
    """One move as `--render` shows it: the observation the seat saw, then the action taken, its reward and
    the score after it (multi-seat games name the seat)."""
    seat = "" if traj.role == "player" else f", {traj.seat} ({traj.role})"  # role "player": single-player
    note = f"  [parse error: {step.parse_error}]" if step.parse_error else ""
    invalid = "  [invalid]" if step.invalid else ""
    return (f"--- step {step.t}{seat} ---\n{step.observation}\n"
            f"action: {step.action!r}  reward: {step.reward:g}  score: {step.score:g}{invalid}{note}")


def episode_header(game: str, traj: Trajectory) -> str:
    return f"=== {game} seed {traj.seed}, seat {traj.seat} ({traj.role}) ==="


def render_end(game: str, traj: Trajectory, env_kwargs: dict[str, Any]) -> str:
    """How an episode ended for one seat: single-player games show the board after the last action
    (replayed from the seed); every game says how it ended and the seat's score."""
    import coplay_envs

    lines = []
    if coplay_envs.spec(game).api == "gymnasium":
        lines.append(f"--- final state ---\n{_final_observation(game, traj, env_kwargs)}")
    ended = "terminated" if traj.terminated else "truncated (step cap)" if traj.truncated else "stopped"
    lines.append(f"final: {ended} after {len(traj.steps)} step(s), score {traj.score:g}\n")
    return "\n".join(lines)


def render_trajectories(game: str, trajectories: list[Trajectory], env_kwargs: dict[str, Any]) -> str:
    """Whole episodes as `--render` shows them: each seat's header, every step (`render_step`), then its
    end (`render_end`)."""
    lines: list[str] = []
    for traj in trajectories:
        lines.append(episode_header(game, traj))
        lines += [render_step(traj, step) for step in traj.steps]
        lines.append(render_end(game, traj, env_kwargs))
    return "\n".join(lines)


class LiveRender:
    """`--render` while a model plays: each move printed (and flushed) as soon as its outcome is known, a
    seat's header before its first move, each seat's end as its episode ends; the runner calls `step` and
    `episode` (`RunnerContext.on_step`, `on_episode`)."""

    def __init__(self, game: str, env_kwargs: dict[str, Any], out: TextIO | None = None) -> None:
        self.game, self.env_kwargs, self.out = game, env_kwargs, out
        self.started: set[tuple[str, str]] = set()

    def _print(self, text: str) -> None:
        print(text, file=self.out or sys.stdout, flush=True)

    def step(self, traj: Trajectory, step: Step) -> None:
        key = (traj.episode_id, traj.seat)
        if key not in self.started:
            self.started.add(key)
            self._print(episode_header(self.game, traj))
        self._print(render_step(traj, step))

    def episode(self, trajectories: list[Trajectory]) -> None:
        for traj in trajectories:
            self._print(render_end(self.game, traj, self.env_kwargs))


def _final_observation(game: str, traj: Trajectory, env_kwargs: dict[str, Any]) -> str:
    """The single-player board after the trajectory's last action: the seeded env replayed."""
    from coplay_envs import make_env

    env = make_env(game, **env_kwargs)
    try:
        obs, _ = env.reset(seed=traj.seed)
        for step in traj.steps:
            obs, *_ = env.step(step.action)
    finally:
        env.close()
    return str(obs)


def score_table(trajectories: list[Trajectory], title: str) -> str:
    """A rich table: one row per (episode, seat), then mean ± 95% CI per seat/role."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("seed", "seat", "role", "steps", "score", "invalid"):
        table.add_column(col, justify="right" if col in ("seed", "steps", "score", "invalid") else "left")
    for t in trajectories:
        table.add_row(str(t.seed), t.seat, t.role, str(len(t.steps)), f"{t.score:g}",
                      str(sum(s.invalid for s in t.steps)))
    by_role: dict[str, list[float]] = {}
    for t in trajectories:
        by_role.setdefault(t.role, []).append(t.score)
    summary = Table(title="summary (mean, 95% t-interval)")
    for col in ("role", "n", "mean", "95% CI", "median", "min", "max"):
        summary.add_column(col)
    for role, scores in sorted(by_role.items()):
        s = summarize(scores)
        summary.add_row(role, str(s.n), f"{s.mean:.2f}", f"[{s.ci_low:.2f}, {s.ci_high:.2f}]",
                        f"{s.median:g}", f"{s.min:g}", f"{s.max:g}")
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(table)
    console.print(summary)
    return console.export_text()


def play_horizon(cfg: CoplayConfig, max_steps: int | None) -> tuple[int | None, str]:
    """The step cap of `coplay play` and where it comes from: `--max-steps`, else the horizon the config's
    evaluations and rollouts use (a run's own, when its config is loaded: `eval.max_steps`, else
    `rollout.max_steps`), else None, the game's own end."""
    for value, source in ((max_steps, "--max-steps"), (cfg.eval.max_steps, "eval.max_steps"),
                          (cfg.rollout.max_steps, "rollout.max_steps")):
        if value:
            return value, source
    return None, "the game's own end"


def play_policy(cfg: CoplayConfig, game: str, policy: Policy, seeds: list[int],
                max_steps: int | None, live: LiveRender | None = None) -> list[Trajectory]:
    """Every seat played by `base`, a run's adapters (`run:RUN_DIR[@STEP]`, with the run's newest banks) or
    `openai`, through the in-process runner of `coplay eval`, at the evaluation temperature. Loading the
    model is a phase of its own (a line, or a spinner, rather than silence); with `live` the episodes are
    played one at a time and each move is shown as it is played."""
    from coplay.eval.players import make_player
    from coplay.eval.policies import check_step
    from coplay.eval.runner import open_engine, play_plans
    from coplay.rollout.model_episodes import EpisodePlan
    from coplay.runs import RunDir

    run = RunDir.open(policy.run_dir) if policy.run_dir is not None else None
    if run is not None:
        check_step(run.root, policy.step)
    player = make_player("model" if run is not None else policy.kind, cfg, run, policy.step)
    plans = [EpisodePlan(game, seed, f"play-{game}-s{seed}", player.seat,
                         env_kwargs=dict(cfg.game[game].env_kwargs), max_steps=max_steps) for seed in seeds]
    engine = None
    if player.needs_engine:
        served = ", ".join(player.adapters) or "no adapters"
        with phase(f"load {cfg.model.name} on the {cfg.engine.backend} engine ({served})"):
            engine = open_engine(cfg, player.adapters)
    try:
        return play_plans(cfg, plans, engine, player.banks, f"play {game}: {policy.spec}",
                          on_step=live.step if live else None, on_episode=live.episode if live else None,
                          concurrency=1 if live else None)
    finally:
        if engine is not None:
            engine.close()


def play(cfg: CoplayConfig, game: str, policy: Policy, seeds: list[int], max_steps: int | None,
         render: bool) -> list[Trajectory]:
    """Play `len(seeds)` episodes of `game` with `policy` (`coplay.eval.policies`), each at most `max_steps`
    decisions (None: the game's own end); `render` prints every move as it is played (bots: each episode
    as it ends, which takes milliseconds) and each episode's final state."""
    env_kwargs = dict(cfg.game[game].env_kwargs)
    if policy.kind not in BOTS:
        live = LiveRender(game, env_kwargs) if render else None
        return play_policy(cfg, game, policy, seeds, max_steps, live)
    trajectories = []
    with phase(f"play {game}: {policy.spec}", len(seeds), "episodes") as bar:
        for seed in seeds:
            played = play_bot_episodes(game, policy.kind, [seed], max_steps=max_steps, env_kwargs=env_kwargs)
            if render:
                print(render_trajectories(game, played, env_kwargs), flush=True)
            trajectories += played
            bar.advance()
    return trajectories


def write_trajectories(out: Path, game: str, policy: Policy, seed: int,
                       trajectories: list[Trajectory]) -> Path:
    """The trajectories as one shard file under `out`."""
    step = policy.step if policy.step is not None else "newest"
    label = policy.kind if policy.kind != "run" else f"run-step{step}"
    return write_shard(out / f"play-{game}-{label}-s{seed}.msgpack",
                       Shard(shard_id=f"play-{game}", iteration=0, worker=0, trajectories=trajectories))
