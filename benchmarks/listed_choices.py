"""What the choice benchmarks (`benchmarks.candy_choices`, `benchmarks.merge_choices`) share: fixed readings
of a text that lists the legal actions with what each scores at once, played on a config's evaluation
protocol beside the ruler's bots; a run's sampled `act` decisions, iteration by iteration, read from its
msgpack shards and ranked by the game's own `decision`; and their command line.

Why one place: both benchmarks must play the same protocol and count the same decisions (steps that sampled
`act` and parsed), so a figure in one is comparable with a figure in the other.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import coplay_envs

Reading = Callable[[list[str], list[int]], str]  # (legal actions, what each scores at once) -> the choice


def play_reading(game: str, shown: dict[str, Any], info_key: str, choice: Reading, seeds: list[int],
                 moves: int, env_kwargs: dict[str, Any]) -> list[float]:
    """Scores of one fixed reading on the seeds, `moves` moves each, in the evaluation's env (its
    `env_kwargs` plus `shown`, the text option that puts `info[info_key]` beside the legal actions)."""
    scores = []
    for seed in seeds:
        env = coplay_envs.make_env(game, **{**env_kwargs, **shown})
        _, info = env.reset(seed=seed)
        for _ in range(moves):
            if not info["legal_actions"]:
                break
            _, _, terminated, truncated, info = env.step(choice(info["legal_actions"], info[info_key]))
            if terminated or truncated:
                break
        scores.append(float(info["score"]))
    return scores


def readings_table(config: str, game: str, readings: dict[str, tuple[str, Reading]], shown: dict[str, Any],
                   info_key: str) -> dict[str, Any]:
    """The fixed readings and the ruler's bots (`coplay.eval.ruler.play_bot`: the same seeds, horizon, env
    options and bot seeding as every evaluation file's) on the config's evaluation protocol."""
    from coplay.config import load_config
    from coplay.eval.ruler import play_bot as play_ruler_bot
    from coplay.eval.stats import summarize

    cfg = load_config(config, [f"games=[{game}]"])
    env_kwargs = dict(cfg.game[game].env_kwargs)
    moves = cfg.eval.max_steps or cfg.rollout.max_steps or env_kwargs.get("max_moves")
    if not moves:
        raise ValueError(f"{config}: no evaluation horizon (eval.max_steps, rollout.max_steps or max_moves)")
    seeds = [cfg.seeds.eval.start + i for i in range(cfg.eval.episodes)]
    rows = {name: {"reads": reads, **summarize(play_reading(game, shown, info_key, choice, seeds, moves,
                                                            env_kwargs)).as_dict()}
            for name, (reads, choice) in readings.items()}
    for bot in ("random", "heuristic", "expert"):
        score = play_ruler_bot(cfg, bot, [game])[game]["score"]
        rows[f"{bot} bot"] = {"reads": "the ruler's bot", **score}
    return {"config": config, "seeds": [seeds[0], seeds[-1]], "moves": moves, "policies": rows}


def readings_markdown(title: str, result: dict[str, Any]) -> list[str]:
    """A choice benchmark's Markdown head: its title, command and, where scored, the readings' table."""
    lines = [title, "", f"Command: `{result['command']}`", ""]
    if "policies" in result:
        p = result["policies"]
        lines += [f"Fixed readings of the list on seeds {p['seeds'][0]}-{p['seeds'][1]}, "
                  f"{p['moves']} moves:", "",
                  "| policy | mean score (95% t) | what it plays |", "|---|---|---|"]
        for name, row in p["policies"].items():
            lines.append(f"| {name} | {row['mean']:.1f} [{row['ci_low']:.1f}, {row['ci_high']:.1f}] | "
                         f"{row['reads']} |")
        lines.append("")
    return lines


def act_decisions(run_dir: Path) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """(iteration, [(observation, action), ...]) for each iteration with shards, in order: every step whose
    action the `act` adapter sampled and that parsed (the trunks' and the branches' decisions alike)."""
    from coplay.types import decode_shard

    by_iteration: dict[int, list[Any]] = {}
    for path in sorted((run_dir / "shards").glob("it*-w*.msgpack")):
        shard = decode_shard(path.read_bytes(), str(path))
        by_iteration.setdefault(shard.iteration, []).append(shard)
    for iteration, shards in sorted(by_iteration.items()):
        decisions = []
        for shard in shards:
            for traj in shard.trajectories:
                acts = {s.sample_id for s in traj.samples if s.adapter == "act"}
                decisions += [(step.observation, step.action) for step in traj.steps
                              if acts.intersection(step.sample_ids) and not step.parse_error]
        yield iteration, decisions


def _shares(ranked: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    n = max(len(ranked), 1)
    positions = [r["position"] for r in ranked if r.get("position") is not None]
    chances = [r["chance"] for r in ranked if r.get("chance") is not None]
    row: dict[str, Any] = {"decisions": len(ranked)}
    row.update({f"{k}_share": round(sum(int(bool(r[k])) for r in ranked) / n, 4) for k in keys})
    if chances:
        row["chance_share"] = round(sum(chances) / len(chances), 4)
    row["reading_position_mean"] = round(sum(positions) / len(positions), 4) if positions else None
    return row


Subset = tuple[Callable[[dict[str, Any]], bool], tuple[str, ...]]  # (which ranked decisions, their keys)


def choice_shares(run_dir: Path, rank: Callable[[str, str], dict[str, Any] | None], keys: tuple[str, ...],
                  subsets: dict[str, Subset] | None = None) -> list[dict[str, Any]]:
    """Per iteration: how many decisions `rank` could place, the share of them for which each of `keys` is
    true, and the mean of its `position` (0 first listed, 1 last; None where the action was not legal) and,
    where it gives one, of its `chance` (the share a uniformly random legal choice would have had). Each of
    `subsets` adds, for the ranked decisions it selects, `decisions_where_<name>`, `<key>_share_where_<name>`
    for its keys and `chance_share_where_<name>` (None without a chance). The shards are read, and each
    decision ranked, once."""
    out = []
    for iteration, decisions in act_decisions(run_dir):
        ranked = [r for r in (rank(obs, action) for obs, action in decisions) if r is not None]
        row = {"iteration": iteration, **_shares(ranked, keys)}
        for name, (selects, subset_keys) in (subsets or {}).items():
            sub = _shares([r for r in ranked if selects(r)], subset_keys)
            row.update({f"{k}_where_{name}": sub.get(k)
                        for k in ("decisions", *(f"{key}_share" for key in subset_keys), "chance_share")})
        out.append(row)
    return out


def choices_cli(argv: list[str] | None, module: str, doc: str, default_config: str,
                policies_table: Callable[[str], dict[str, Any]],
                run_choices: Callable[[Path], list[dict[str, Any]]],
                markdown: Callable[[dict[str, Any]], str]) -> int:
    """The command line both choice benchmarks share: `--policies` scores the fixed readings and the bots on
    `--config`'s evaluation protocol, `--run NAME=RUN_DIR` counts a run's choices, `--name` writes
    STEM.json and STEM.md under `--out`."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    parser.add_argument("--policies", action="store_true", help="score the fixed readings and the bots")
    parser.add_argument("--config", default=default_config,
                        help="whose evaluation protocol (seeds.eval, eval.episodes, the horizon)")
    parser.add_argument("--run", action="append", default=[], metavar="NAME=RUN_DIR")
    parser.add_argument("--name", default=None, help="write STEM.json and STEM.md under --out")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    if not args.policies and not args.run:
        parser.error("give --policies, --run NAME=RUN_DIR, or both")
    result: dict[str, Any] = {"command": f"python -m {module} " + " ".join(
        sys.argv[1:] if argv is None else argv)}
    if args.policies:
        result["policies"] = policies_table(args.config)
    if args.run:
        result["runs"] = {name: run_choices(Path(path))
                          for name, _, path in (spec.partition("=") for spec in args.run)}
    text = markdown(result)
    if args.name:
        out = Path(args.out)
        (out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
        (out / f"{args.name}.md").write_text(text)
    print(text)
    return 0
