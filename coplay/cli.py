"""coplay trains LLM agents for long-horizon games: a decision agent and a skill bank that co-evolve (train),
then evaluate, play, benchmark and inspect the runs; `python -m coplay.learn` trains from shards alone.

This module and `coplay.cli_eval` (the evaluation verbs, `eval` and `play`) hold all argument parsing of the
package (the first paragraph above is `coplay --help`'s description). Each verb parses its arguments and
imports its implementation lazily, so `coplay --help` is instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from coplay.cli_eval import add_eval_args, add_play_args, eval_command, play_command
from coplay.config import ConfigError


def _config_show(args: argparse.Namespace) -> int:
    from coplay.config import load_config

    print(load_config(args.config, args.overrides).to_yaml(), end="")
    return 0


def _guarded(command: str, start: Callable[[], Path | None], announce: bool = True) -> int:
    """Run a training command (also the training benchmarks, `benchmarks.learning.run_main`): SIGTERM stops
    it the way Ctrl-C does, within a bounded time (`coplay.driver.interrupt`), and each way it can end is one
    line (finished: 0; nothing to do: 0; stopped: 130; failed in an actor: 1; bad input or run folder: 2)."""
    from coplay.actors.connect import ClusterConnectError
    from coplay.actors.learner_group import LearnerDiedError
    from coplay.actors.storage_probe import SharedStorageError
    from coplay.artifacts import ArtifactError
    from coplay.driver.interrupt import bounded_stop
    from coplay.driver.preflight import RunFinished, RunStopped
    from coplay.driver.state import ResumeError
    from coplay.learn.checkpoint import CheckpointError
    from coplay.runs import RunDirError

    with bounded_stop(command):
        try:
            run_dir = start()
        except RunFinished as exc:
            print(f"{command}: {exc}")
            return 0
        except RunStopped as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print(f"{command}: stopped (Ctrl-C or SIGTERM)", file=sys.stderr)
            return 130
        except (ArtifactError, CheckpointError, ClusterConnectError, LearnerDiedError, ResumeError,
                RunDirError, SharedStorageError) as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            return 2
    if announce:
        print(f"run folder: {run_dir}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from coplay.config import load_config
    from coplay.loop import train

    if args.resume:
        # the run's own resolved config, plus overrides (e.g. loop.iterations=20 to extend it)
        config = load_config(args.config or str(Path(args.resume) / "config.yaml"), args.overrides)
        return _guarded("coplay train", lambda: train(config, resume=args.resume))
    config = load_config(args.config, args.overrides)
    return _guarded("coplay train", lambda: train(config))


def _demo(args: argparse.Namespace) -> int:
    from coplay.driver.demo import run_demo

    return _guarded("coplay demo", lambda: run_demo(args.overrides, args.config),
                    announce=False)  # it prints its own


def _model_build_tiny(args: argparse.Namespace) -> int:
    from coplay.config import load_config
    from coplay.models.tiny import build_tiny_model

    cfg = load_config(args.config, args.overrides)
    print(build_tiny_model(cfg.model.tiny, force=args.force))
    return 0


def _model_list(args: argparse.Namespace) -> int:
    from coplay.config import load_config
    from coplay.models.model_cache import catalogue_rows

    cfg = load_config(args.config, args.overrides)
    print("tiny: the random-weight test model, built locally (model.tiny)")
    for row in catalogue_rows(cfg.model.cache_dir):
        print(f"{row['name']} [{row['dtype']}]: {row['state']}; wheel {row['wheel']}; {row['folder']}\n"
              f"    {row['summary']}")
    return 0


def _model_prepare(args: argparse.Namespace) -> int:
    from coplay.config import load_config
    from coplay.models.catalogue import CATALOGUE, CatalogueError, catalogue_entry
    from coplay.models.model_cache import prepare_entry, read_manifest

    cfg = load_config(args.config, args.overrides)
    if args.name == "tiny":
        from coplay.models.tiny import build_tiny_model

        print(build_tiny_model(cfg.model.tiny, force=args.force))
        return 0
    entry = catalogue_entry(args.name)
    if entry is None:
        print(f"coplay model prepare: unknown model {args.name!r}; expected tiny or one of "
              f"{sorted(CATALOGUE)}", file=sys.stderr)
        return 2
    try:
        folder = prepare_entry(entry, args.dtype or cfg.model.cache_dtype, cfg.model.cache_dir,
                               force=args.force, verify=args.verify)
    except CatalogueError as exc:
        print(f"coplay model prepare: {exc}", file=sys.stderr)
        return 2
    manifest = read_manifest(folder)
    print(f"{folder}\n  source {manifest['source']['file']} sha256 {manifest['source']['sha256'][:16]} "
          f"({manifest['source']['distribution']}=={manifest['source']['version']}); dtype "
          f"{manifest['dtype']}; built with {manifest['libraries']}")
    return 0


def _bank(args: argparse.Namespace) -> int:
    """`coplay bank show | report`: a path that is not a run folder is named as such (exit 2); a shard that
    does not decode stops both in one line naming it (exit 1, as `coplay report`): the skill analysis would
    otherwise count without its episodes, and nothing would say so."""
    from coplay.report.bank import show_bank, write_bank_report
    from coplay.runs import RunDir, RunDirError
    from coplay.skills.schema import BankError
    from coplay.types import ShardError, read_shard

    try:
        run = RunDir.open(args.run_dir)
    except RunDirError as exc:
        print(f"coplay bank: {exc}", file=sys.stderr)
        return 2
    for path in sorted(run.shards.glob("*.msgpack")):
        try:
            read_shard(path)
        except (ShardError, OSError) as exc:
            print(f"coplay bank: {exc}; the run folder is damaged (coplay report {args.run_dir} lists every "
                  f"problem in it)", file=sys.stderr)
            return 1
    try:
        if args.bank_command == "show":
            print(show_bank(run, args.game, args.version))
        else:
            from coplay.report.skill_analysis import load_skill_analysis
            from coplay.report.skill_views import analysis_json, analysis_text

            analysis = load_skill_analysis(run, args.game)
            if args.json:
                print(analysis_json(analysis))
                return 0
            print(analysis_text(analysis))
            print(write_bank_report(run))
    except (BankError, RunDirError) as exc:
        print(f"coplay bank: {exc}", file=sys.stderr)
        return 2
    return 0


def _report(args: argparse.Namespace) -> int:
    from coplay.report.data import load_run
    from coplay.report.html import write_report
    from coplay.runs import RunDirError

    try:
        path = write_report(args.run_dir)
        problems = load_run(args.run_dir).problems
    except RunDirError as exc:
        print(f"coplay report: {exc}", file=sys.stderr)
        return 2
    print(path)
    for problem in problems:
        print(f"coplay report: {problem}", file=sys.stderr)
    if problems:
        print(f"coplay report: {len(problems)} problem(s) in the run folder; the report lists them",
              file=sys.stderr)
        return 1
    return 0


def _bench(args: argparse.Namespace) -> int:
    from coplay.eval.bench import bench_command

    return bench_command(args.quick, args.only, args.out, args.timeout)


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file (default: built-in defaults)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. learner.lr=2e-5")


def _add_bench_args(p: argparse.ArgumentParser) -> None:
    from coplay.eval.bench import SUITE

    p.add_argument("--quick", action="store_true", help="short settings (a few minutes on 2 CPU cores)")
    p.add_argument("--only", default=None, help=f"comma-separated members (default all: {','.join(SUITE)})")
    p.add_argument("--out", default=None, help="results file (default benchmarks/results/<host>-<date>.json)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per member before it is stopped (default: no limit)")


def _description() -> str:
    """The module docstring's first paragraph, whole (argparse refills it to the terminal's width)."""
    return " ".join((__doc__ or "").split("\n\n")[0].split())


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("coplay")
    except PackageNotFoundError:  # run from a source tree that was never installed
        installed = "unknown (not installed)"
    parser = argparse.ArgumentParser(prog="coplay", description=_description())
    parser.add_argument("--version", action="version", version=f"coplay {installed}",
                        help="print the installed coplay version and exit")
    sub = parser.add_subparsers(dest="command",
                                metavar="{train,eval,play,bench,bank,report,config,model,demo}")
    p = sub.add_parser("train",
                       help="run the co-evolution loop (local Ray on loopback unless cluster.address)")
    _add_config_args(p)
    p.add_argument("--resume", metavar="RUN_DIR", help="continue this run folder from its last checkpoint "
                   "(learner, schedule, artifacts, banks, pending data; see docs/run-folder.md); with "
                   "loop.iterations=N a finished run is extended (default: a new run folder)")
    p.set_defaults(func=_train)
    p = sub.add_parser("eval", help="evaluate a player on seeds.eval (or --compare two evaluations)")
    add_eval_args(p)
    _add_config_args(p)
    p.set_defaults(func=eval_command)
    p = sub.add_parser("play", help="play a game with a bot or the model and print scores")
    add_play_args(p)
    _add_config_args(p)
    p.set_defaults(func=play_command)
    p = sub.add_parser("bench", help="run the benchmark suite; results in benchmarks/results/")
    _add_bench_args(p)
    p.set_defaults(func=_bench)
    p = sub.add_parser("report", help="write the run's self-contained report.html")
    p.add_argument("run_dir", help="a run folder; exits 1 when files in it are unreadable (the page lists "
                   "them)")
    p.set_defaults(func=_report)
    p = sub.add_parser("bank", help="inspect skill banks of a run")
    bank_sub = p.add_subparsers(dest="bank_command", required=True)
    show = bank_sub.add_parser("show", help="print a bank as a table")
    show.add_argument("run_dir", help="a run folder")
    show.add_argument("--game", default=None,
                      help="a game key, or a bank key such as avalon/good (default: every bank of the run)")
    show.add_argument("--version", type=int, default=None, help="the bank version (default: the newest)")
    rep = bank_sub.add_parser("report", help="print the skill analysis and write the bank report HTML page")
    rep.add_argument("run_dir", help="a run folder; the page is written as RUN_DIR/bank_report.html")
    rep.add_argument("--game", default=None,
                     help="analyse only this game or bank key (default: every bank; the page shows all)")
    rep.add_argument("--json", action="store_true",
                     help="print the skill analysis as JSON instead (docs/skill-analysis.md); writes no page")
    p.set_defaults(func=_bank)
    p = sub.add_parser("config", help="show the resolved config")
    config_sub = p.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser("show", help="print the resolved config as YAML")
    _add_config_args(show)
    show.set_defaults(func=_config_show)
    p = sub.add_parser("model", help="model utilities")
    model_sub = p.add_subparsers(dest="model_command", required=True)
    tiny = model_sub.add_parser("build-tiny", help="build (or reuse) the tiny test model; prints its folder")
    tiny.add_argument("--force", action="store_true", help="rebuild even when the cached model exists")
    _add_config_args(tiny)
    tiny.set_defaults(func=_model_build_tiny)
    listing = model_sub.add_parser("list", help="the catalogue models and their state in the model cache")
    _add_config_args(listing)
    listing.set_defaults(func=_model_list)
    prep = model_sub.add_parser("prepare", help="build (or check and reuse) a catalogue model in the model "
                                "cache (model.cache_dir); prints its folder and manifest")
    prep.add_argument("name", help="a catalogue name (coplay model list) or tiny")
    prep.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                      help="build dtype (default: model.cache_dtype, float32)")
    prep.add_argument("--force", action="store_true", help="rebuild even when the entry checks out")
    prep.add_argument("--verify", action="store_true", help="also check every file's sha256")
    _add_config_args(prep)
    prep.set_defaults(func=_model_prepare)
    p = sub.add_parser("demo", help="the demo run (launch/configs/demo-candy_crush-smollm2.yaml): SmolLM2, "
                                          "Candy Crush")
    p.add_argument("--config", default=None,
                   help="another demo config, e.g. launch/configs/demo-2048.yaml (the tiny model); "
                        "default: launch/configs/demo-candy_crush-smollm2.yaml")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. loop.iterations=5")
    p.set_defaults(func=_demo)
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


def learn_main(argv: list[str] | None = None) -> int:
    """`python -m coplay.learn --shards DIR --out DIR [--config YAML] [--resume] [KEY=VALUE ...]`."""
    from coplay.learn.standalone import train_from_shards

    parser = argparse.ArgumentParser(prog="python -m coplay.learn",
                                     description="Train the adapters with GRPO from reward-carrying shards.")
    parser.add_argument("--shards", required=True, help="folder of *.msgpack trajectory shards")
    parser.add_argument("--out", required=True, help="output folder (adapters/, checkpoints/, metrics.jsonl)")
    parser.add_argument("--config", default=None, help="YAML config (defaults otherwise)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in OUT")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. learner.backend=torch")
    args = parser.parse_args(argv)
    return train_from_shards(Path(args.shards), Path(args.out), args.config, args.overrides, args.resume)


if __name__ == "__main__":
    sys.exit(main())
