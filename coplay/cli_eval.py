"""The evaluation verbs of the `coplay` command, `coplay eval` (evaluate a player, or `--compare` two
evaluation files) and `coplay play` (play and watch a game): their arguments and handlers. `coplay.cli` builds
the parser and adds the config arguments after these. Imports its implementations lazily, like `coplay.cli`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from coplay.config import CoplayConfig


def console(cfg: CoplayConfig) -> None:
    """Progress bars per `logging.console`; vLLM, Ray, peft and DeepSpeed at WARNING unless
    `logging.verbose` (before any of them is imported)."""
    from coplay.driver import progress

    progress.set_enabled(cfg.logging.console)
    progress.quiet_third_party(cfg.logging.verbose)


def play_command(args: argparse.Namespace) -> int:
    """`coplay play`: says what it plays and for how long before it starts (loading a model can take
    minutes), plays, prints the score table, and keeps a model's trajectories as a shard."""
    from coplay.config import load_config
    from coplay.eval.play import play, play_horizon, score_table, write_trajectories
    from coplay.eval.policies import parse_policy
    from coplay.runs import RunDirError

    try:
        policy = parse_policy(args.policy)
        config = args.config or (str(policy.run_dir / "config.yaml") if policy.run_dir else None)
        cfg = load_config(config, [f"games=[{args.game}]", *args.overrides])
        console(cfg)
        seeds = list(range(args.seed, args.seed + args.episodes))
        max_steps, source = play_horizon(cfg, args.max_steps)
        cap = f"at most {max_steps} steps ({source})" if max_steps else source
        print(f"coplay play: {args.game}, {policy.spec}, {args.episodes} episode(s) from seed {args.seed}, "
              f"{cap}", file=sys.stderr, flush=True)
        trajectories = play(cfg, args.game, policy, seeds, max_steps, args.render)
    except (RunDirError, ValueError, FileNotFoundError) as exc:
        print(f"coplay play: {exc}", file=sys.stderr)
        return 2
    print(score_table(trajectories, f"{args.game}: {policy.spec}, {args.episodes} episode(s)"))
    out = Path(args.out) if args.out else None
    if out is None and policy.kind not in ("expert", "random"):
        from coplay.runs import RunDir

        out = RunDir.create(cfg.run.out_dir, f"play-{args.game}", cfg.to_yaml()).shards
    if out is not None:
        print(f"trajectories written to "
              f"{write_trajectories(out, args.game, policy, args.seed, trajectories)}")
    return 0


def eval_command(args: argparse.Namespace) -> int:
    """`coplay eval`: `--compare` two files, or evaluate; bad input is one line and exit 2."""
    from coplay.runs import RunDirError

    try:
        if args.compare:
            from coplay.eval.compare import compare_files, load_results
            from coplay.eval.probe_eval import compare_probe_files, is_probe_file

            kinds = [is_probe_file(load_results(p)) for p in args.compare]
            if any(kinds) and not all(kinds):
                raise ValueError("--compare: one file is a probe file and the other an evaluation")
            text = compare_probe_files(*map(Path, args.compare), out=args.json) if all(kinds) else \
                compare_files(*args.compare, out=args.json)[0]
            print(text, end="")
            return 0
        return _eval_run(args)
    except (RunDirError, ValueError, FileNotFoundError) as exc:
        print(f"coplay eval: {exc}", file=sys.stderr)
        return 2


def _eval_run(args: argparse.Namespace) -> int:
    from coplay.config import load_config
    from coplay.eval.players import run_evaluation
    from coplay.eval.policies import parse_policy
    from coplay.runs import RunDir

    run_dir, overrides = args.run_dir, list(args.overrides)
    if run_dir and "=" in run_dir and not Path(run_dir).is_dir():  # no run folder: argparse took an override
        run_dir, overrides = None, [run_dir, *overrides]
    if args.policy is None and run_dir is None:
        raise ValueError("give a run folder (coplay eval RUN_DIR) or --policy (base | run:RUN_DIR[@STEP] | "
                         "expert | random | openai)")
    policy = parse_policy(args.policy or f"run:{run_dir}")
    if args.step is not None:
        if policy.kind != "run" or (policy.step is not None and policy.step != args.step):
            raise ValueError(f"--step {args.step}: only with a run policy, and not against its @STEP")
        policy = dataclasses.replace(policy, step=args.step)
    run_dir = run_dir or policy.run_dir
    run = RunDir.open(run_dir) if run_dir else None
    for flag, key in (("games", "games"), ("episodes", "eval.episodes"),
                      ("episodes_per_seat", "eval.episodes_per_seat"), ("max_steps", "eval.max_steps")):
        value = getattr(args, flag)
        if value is not None:
            if flag != "games" and value < 1:
                raise ValueError(f"--{flag.replace('_', '-')} {value}: expected at least 1")
            overrides.append(f"{key}=[{value}]" if flag == "games" else f"{key}={value}")
    cfg = load_config(args.config or (str(run.config_path) if run else None), overrides)
    console(cfg)
    out = Path(args.out) if args.out else (run.eval if run else None)
    if args.probe:
        from coplay.eval.probe_eval import probe_table, run_probe_evaluation

        path = run_probe_evaluation(cfg, policy, out, args.name)
        print(probe_table(path), end="")
        print(f"written {path}")
        return 0
    json_path, md_path = run_evaluation(cfg, policy, args.opponents, out, args.name)
    print(md_path.read_text(), end="")
    print(f"written {json_path} and {md_path}")
    return 0


def add_eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", nargs="?", default=None,
                   help="a run folder: its config, its eval/ for the results and, without --policy, its "
                        "adapters (run:RUN_DIR); write RUN_DIR and the overrides next to each other "
                        "(before or after the options)")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="print two evaluation files side by side: differences and whether the 95%% CIs "
                        "overlap; warns when their episodes, seeds or horizon differ (default: evaluate)")
    p.add_argument("--probe", action="store_true",
                   help="decide once at each position of the per-decision probe (probe.positions of the "
                        "games that have one) instead of playing episodes; writes probe-<player>_....json "
                        "in a run's probe-file format; --compare pairs two such files by position")
    p.add_argument("--json", default=None, help="with --compare: also write the rows to this JSON file "
                   "(default: none)")
    p.add_argument("--policy", default=None,
                   help="who is evaluated: base (the model without adapters) | run:RUN_DIR[@STEP] (a run's "
                        "adapters at a learner step, default the newest) | expert | random | openai "
                        "(rollout.opponents.endpoint); default run:RUN_DIR")
    p.add_argument("--opponents", default=None,
                   help="other seats of Avalon and Diplomacy: expert | random | self | base | openai "
                        "(default: eval.opponents, expert)")
    p.add_argument("--step", type=int, default=None,
                   help="learner step of a run policy, same as run:RUN_DIR@STEP; a step the run does not "
                        "have is refused (default: the newest)")
    p.add_argument("--games", default=None, help="comma-separated game keys (default: the config's games)")
    p.add_argument("--episodes", type=int, default=None,
                   help="episodes per single-player game (default: eval.episodes, 16)")
    p.add_argument("--episodes-per-seat", type=int, default=None,
                   help="Avalon/Diplomacy episodes per seat (default: eval.episodes_per_seat, 10)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="cap on decisions per episode (default: eval.max_steps, else rollout.max_steps, else "
                        "the game's horizon)")
    p.add_argument("--out", default=None,
                   help="folder for <name>.json/.md (default: RUN_DIR/eval or <run.out_dir>/eval)")
    p.add_argument("--name", default=None,
                   help="file name stem (default: <policy>[-step<K>]_<games>_seeds<start>-n<episodes>; "
                        "with Avalon or Diplomacy <policy>[-step<K>]_<games>_vs-<opponents>_seeds<start>-"
                        "n<episodes>x<per seat>; an existing name gets -2, -3, ...)")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: expected at least 1")
    return value


def add_play_args(p: argparse.ArgumentParser) -> None:
    from coplay.config import GAME_KEYS

    p.add_argument("--game", required=True, choices=GAME_KEYS, help="the game to play (required)")
    p.add_argument("--policy", default="expert",
                   help="who plays every seat: base (the model without adapters) | run:RUN_DIR[@STEP] (a "
                        "run's adapters and banks; default step the newest) | expert | random | openai "
                        "(rollout.opponents.endpoint); default expert")
    p.add_argument("--episodes", type=_positive_int, default=4, help="episodes to play (default 4)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the first episode; the others follow (default 0)")
    p.add_argument("--max-steps", type=_positive_int, default=None,
                   help="cap on decisions per episode (default: the config's horizon, eval.max_steps else "
                        "rollout.max_steps: a run policy's own; without either, the game's own end)")
    p.add_argument("--render", action="store_true",
                   help="print every observation, the action taken, its reward and the final state, each "
                        "move as it is played")
    p.add_argument("--out", default=None,
                   help="write trajectory shards here (default: bots none; models a new run folder under "
                        "run.out_dir)")
