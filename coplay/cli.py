"""The `coplay` command: `train | eval | play | bench | bank | report | config | model`.

Each verb parses its own arguments and imports its implementation lazily, so `coplay --help` is instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from coplay.config import ConfigError

NOT_BUILT: dict[str, str] = {
    "train": "the co-evolution loop (issue 8)",
    "eval": "the evaluation protocol (issue 8)",
    "bench": "the benchmark suite (issue 10)",
    "report": "the HTML run report (issue 10)",
}


def _config_show(args: argparse.Namespace) -> int:
    from coplay.config import load_config

    print(load_config(args.config, args.overrides).to_yaml(), end="")
    return 0


def _model_build_tiny(args: argparse.Namespace) -> int:
    from coplay.config import load_config
    from coplay.models.tiny import build_tiny_model

    cfg = load_config(args.config, args.overrides)
    print(build_tiny_model(cfg.model.tiny, force=args.force))
    return 0


def _play(args: argparse.Namespace) -> int:
    from coplay.play import play_command

    return play_command(args)


def _bank(args: argparse.Namespace) -> int:
    from coplay.skills.report import show_bank, write_bank_report

    if args.bank_command == "show":
        print(show_bank(args.run_dir, args.game, args.version))
    else:
        print(write_bank_report(args.run_dir))
    return 0


def _not_built(verb: str) -> Callable[[argparse.Namespace], int]:
    def run(_: argparse.Namespace) -> int:
        print(f"coplay {verb}: not built yet — {NOT_BUILT[verb]}.", file=sys.stderr)
        return 2

    return run


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file (default: built-in defaults)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. learner.lr=2e-5")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coplay", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="{train,eval,play,bench,bank,report,config,model}")
    for verb in ("train", "eval"):
        p = sub.add_parser(verb, help=NOT_BUILT[verb])
        p.set_defaults(func=_not_built(verb))
    p = sub.add_parser("play", help="play a game with a bot or the model and print scores")
    p.add_argument("--game", required=True)
    p.add_argument("--policy", default="expert", help="expert | random | model")
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--render", action="store_true", help="print every observation")
    p.add_argument("--out", default=None, help="write trajectory shards here (model: default a new run folder)")
    _add_config_args(p)
    p.set_defaults(func=_play)
    for verb in ("bench", "report"):
        p = sub.add_parser(verb, help=NOT_BUILT[verb])
        p.set_defaults(func=_not_built(verb))
    p = sub.add_parser("bank", help="inspect skill banks of a run")
    bank_sub = p.add_subparsers(dest="bank_command", required=True)
    show = bank_sub.add_parser("show", help="print a bank as a table")
    show.add_argument("run_dir")
    show.add_argument("--game", default=None)
    show.add_argument("--version", type=int, default=None)
    rep = bank_sub.add_parser("report", help="write the bank report HTML page")
    rep.add_argument("run_dir")
    p.set_defaults(func=_bank)
    p = sub.add_parser("config", help="show the resolved config")
    config_sub = p.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser("show", help="print the resolved config as YAML")
    _add_config_args(show)
    show.set_defaults(func=_config_show)
    p = sub.add_parser("model", help="model utilities")
    model_sub = p.add_subparsers(dest="model_command", required=True)
    tiny = model_sub.add_parser("build-tiny", help="build (or reuse) the tiny test model; prints its folder")
    tiny.add_argument("--force", action="store_true")
    _add_config_args(tiny)
    tiny.set_defaults(func=_model_build_tiny)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"coplay: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
