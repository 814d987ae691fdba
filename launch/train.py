"""Entry point of a coplay training job on a Ray cluster.

    ray job submit --runtime-env launch/runtime_env.yaml -- \\
        python launch/train.py --config launch/configs/<game>.yaml [dotted overrides ...]

It resolves the config exactly as `coplay config show --config FILE [overrides]` does, points it at the
cluster the job runs in (`cluster.address: auto` unless the config names another), and runs the
co-evolution loop `coplay.loop.train(cfg)`, which connects with `coplay.security.ray_init_kwargs` and
returns the run folder. Local single-machine runs use `coplay train` instead.

Imports only the config module at the top, so `--help` and `--print-config` are instant; never imports ray
itself, and never edits `sys.path` (the job's working directory comes first on PYTHONPATH via Ray).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from coplay.config import ConfigError, CoplayConfig, load_config, require_trainable

CLUSTER_ADDRESS = "auto"


class LaunchError(RuntimeError):
    """The job cannot start as configured: the message says what to change."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="launch/train.py",
        description="Run coplay training inside a Ray job (connects to the cluster it runs in).",
        epilog="Example: ray job submit --runtime-env launch/runtime_env.yaml -- python launch/train.py "
        "--config launch/configs/diplomacy-selfplay.yaml run.out_dir=/mnt/coplay/runs rollout.workers=32",
    )
    parser.add_argument("--config", required=True, help="YAML config, e.g. launch/configs/2048.yaml")
    parser.add_argument("overrides", nargs="*",
                        help="dotted overrides, e.g. rollout.workers=16 learner.ranks=4")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML (what the job would run) and exit")
    return parser


def resolve_config(config_path: str, overrides: list[str]) -> CoplayConfig:
    """The config the job runs: `load_config(config_path, overrides)`, with `cluster.address` set to `auto`
    (the cluster this job runs in) when the config leaves it unset."""
    cfg = load_config(config_path, overrides)
    if cfg.cluster.address is None:
        cfg.cluster.address = CLUSTER_ADDRESS
    return cfg


def check_run_dir_is_absolute(cfg: CoplayConfig) -> Path:
    """A Ray job runs in a temporary copy of the working directory, so a relative `run.out_dir` would put the
    run folder where it is deleted; require an absolute path (storage every node shares, on a cluster)."""
    out_dir = Path(cfg.run.out_dir)
    if not out_dir.is_absolute():
        raise LaunchError(
            f"run.out_dir={cfg.run.out_dir!r} is relative: a Ray job runs in a temporary copy of its working "
            f"directory, so the run folder would be lost. Pass an absolute path on storage every node "
            f"shares, e.g. run.out_dir=/mnt/coplay/runs (or run.out_dir=$PWD/runs on a one-machine "
            f"cluster)."
        )
    return out_dir


def check_envs_match_working_dir(working_dir: Path) -> None:
    """Ray puts the uploaded working directory first on PYTHONPATH, so `coplay` runs from the upload; the
    games' package `coplay_envs` (folder `envs/`) cannot, and comes from the cluster image. Refuse to run a
    mix: the image must be built from the same sources (or the job submitted without local edits to envs/)."""
    uploaded = working_dir / "envs"
    spec = importlib.util.find_spec("coplay_envs")
    if not uploaded.is_dir() or spec is None or spec.origin is None:
        return
    installed = Path(spec.origin).parent
    if installed.resolve() == uploaded.resolve():
        return
    differing = _differing_python_files(uploaded, installed)
    if differing:
        shown = ", ".join(differing[:5]) + (f" and {len(differing) - 5} more" if len(differing) > 5 else "")
        raise LaunchError(
            f"the games in the cluster image ({installed}) differ from the uploaded envs/ ({shown}); "
            f"rebuild the image from this commit (cluster/docker/Dockerfile) so every node plays the same "
            f"rules"
        )


def _differing_python_files(left: Path, right: Path) -> list[str]:
    names = {p.relative_to(left).as_posix() for p in left.rglob("*.py")}
    names |= {p.relative_to(right).as_posix() for p in right.rglob("*.py")}
    return sorted(n for n in names if not (left / n).is_file() or not (right / n).is_file()
                  or (left / n).read_bytes() != (right / n).read_bytes())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = resolve_config(args.config, args.overrides)
        if args.print_config:
            print(cfg.to_yaml(), end="")
            return 0
        require_trainable(cfg)
        check_run_dir_is_absolute(cfg)
        check_envs_match_working_dir(Path.cwd())
    except (ConfigError, LaunchError) as exc:
        print(f"launch/train.py: {exc}", file=sys.stderr)
        return 2
    from coplay.actors.learner_group import LearnerDiedError
    from coplay.loop import train

    try:
        run_dir = train(cfg)
    except LearnerDiedError as exc:
        print(f"launch/train.py: {exc}", file=sys.stderr)
        return 2
    print(f"launch/train.py: run folder {Path(run_dir).resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
