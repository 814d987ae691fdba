"""Answer formats after the cold start: after SFT on the cold start's teacher data, how often each adapter's
answers on held-out 2048 starts parse (and, for `act`, name a legal action; for `contract`, validate), for
SmolLM2-135M-Instruct and, in the same run, the random-weight `tiny` model as the baseline.

Per model, in one process and through the project's own code (no Ray):
1. teacher data as `coplay.driver.cold_start` builds it: expert episodes on the last seeds of
   `seeds.train` (`teacher_seeds`), seed banks with the bank adapters' teacher examples
   (`coplay.skills.teacher.seed_bank`, what the SkillBankActor runs; deduplicated at 64 per adapter like
   `System.bank_teacher_examples`), `act` / `retrieve` examples labelled by those banks (`expert_examples`,
   `bank_labels`), at most `--examples-per-adapter` per adapter (`cap_per_adapter`);
2. SFT of the measured adapters on a plain-torch `Learner` (`coplay.learn.sft.sft_adapters`, what every
   learner rank runs) with the model's demo config: `launch/configs/demo-2048-smollm2.yaml` for SmolLM2
   (LoRA r 16 on the top 8 layers, lr 2e-4, 1 epoch, at least 4 batches, `contract` 12) and
   `launch/configs/demo-2048.yaml` for `tiny` (lr 1e-2, 4 epochs); `--min-batches-cap` caps the configured
   minimum batches (the tiny config asks 150 for `contract`). Positional config overrides (e.g.
   `learner.bf16=true engine.dtype=bfloat16`) apply to both models. `segment` is not measured and not
   trained unless `--with-segment` (each adapter is its own LoRA: training it changes no other's answers);
3. the adapters exported as bundles (`Learner.export`) and loaded into the `hf` engine (`HfEngine`), which
   answers held-out prompts at `--temperature` (default 0: greedy) within the config's
   `sampling.max_tokens` per adapter:
   - `act` and `retrieve`: the prompts the decision agent sees in the first `--eval-steps` decisions of
     expert episodes on the first `--starts` seeds of `seeds.eval` (16 by default), skills shown from the
     training seed banks; `act` parses when `parse_act` finds a known INTENTION tag, a valid SKILL
     directive if any and an ACTION line, and is legal when the action matches one of the prompt's legal
     actions; `retrieve` parses when `parse_retrieve` reads `SKILL: NONE` or one of the shown ids;
   - `contract` and `curator`: the prompts the seed-bank build asks on expert episodes of the same
     held-out seeds (their own bank, `--max-steps` decisions), at most `--eval-prompts` each; a contract
     answer counts when `parse_protocol` accepts it against the bank's features (what `contract_round`
     accepts), a curator answer when `parse_verdict` reads approve or reject.
A second pass answers the same `act` and `contract` prompts with the same adapters under the constraints a
run samples them with (`rollout.constrained_actions`, `skill_bank.constrained_contracts`:
`formats_constrained`; `--no-constrained` skips it): the first pass says what the cold start taught, the
second what a constrained run gets. Rates are fractions of the prompts (n is given with each). Writes
`benchmarks/results/cold-start-formats.json` (with the command, commit, load averages and seconds per
phase) and prints it; `--quick` is a smoke run on `tiny` only (seconds) that writes
`cold-start-formats-quick.json` unless `--out` says otherwise.

`--formats full,compact` runs each model once per `rollout.prompt_format` in the same process, one after the
other (teacher data, SFT and answers each in its own format; entries `MODEL@FORMAT`), and adds per model
each later format's rates minus the first's (`format_differences`): the measure behind the default layout.
`--adapters act` trains and measures only those adapters (the `act` prompt is the only one the layout
changes).

Run: ``nice -n 10 python -m benchmarks.cold_start_formats [--models tiny,smollm2-135m-instruct]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.cold_start_formats"
GAME = "2048"
MEASURED = ("act", "retrieve", "contract", "curator")
CONFIGS = {"tiny": "launch/configs/demo-2048.yaml",
           "smollm2-135m-instruct": "launch/configs/demo-2048-smollm2.yaml"}
BANK_EXAMPLES_PER_ADAPTER = 64  # System.bank_teacher_examples' default, what the cold start uses
RESULTS = Path(__file__).resolve().parent / "results"
_SHOWN_ID = re.compile(r"^\[([^\]\n]+)\]$", re.MULTILINE)


def _seed_banks(cfg: Any, trajectories: list) -> tuple[dict, list]:
    """Seed banks per bank key and the bank adapters' teacher examples (as ChatExamples)."""
    from coplay.learn.teacher import ChatExample
    from coplay.skills.schema import Bank, bank_key_for
    from coplay.skills.teacher import dedupe, seed_bank

    by_key: dict[str, list] = {}
    for traj in trajectories:
        by_key.setdefault(bank_key_for(traj.game, traj.seat, traj.role), []).append(traj)
    banks, recorded = {}, []
    for key in sorted(by_key):
        banks[key], examples = seed_bank(Bank(bank_key=key), by_key[key], cfg.skill_bank,
                                         example_groups=cfg.sft.bank_example_groups)
        recorded += examples
    return banks, [ChatExample(a, m, c) for a, m, c in dedupe(recorded, BANK_EXAMPLES_PER_ADAPTER)]


def teacher_data(cfg: Any, seeds: list[int], max_steps: int,
                 limit: int | dict[str, int]) -> tuple[list, dict]:
    """The cold start's SFT examples for 2048 on `seeds` (capped per adapter) and its seed banks."""
    import coplay_envs
    from coplay.driver.cold_start import cap_per_adapter
    from coplay.learn.teacher import bank_labels, expert_examples
    from coplay.rollout.bot_episodes import play_bot_episodes

    banks, bank_examples = _seed_banks(cfg, play_bot_episodes(GAME, "expert", seeds, max_steps))
    examples = expert_examples(GAME, seeds, coplay_envs.rules(GAME), cfg.rollout.history_len, max_steps,
                               bank_labels(banks, cfg.skill_bank), cfg.rollout.top_k_skills,
                               prompt_format=cfg.rollout.prompt_format)
    return cap_per_adapter(examples + bank_examples, limit), banks


def held_out_prompts(cfg: Any, banks: dict, seeds: list[int], eval_steps: int, bank_steps: int,
                     limit: int) -> tuple[dict[str, list], list[dict[str, str]]]:
    """Held-out prompts per adapter (ChatExamples; the completion is the teacher's answer, unused) and, per
    prompt of `contract`, the features of the bank that asked it (what its answer is validated against).
    `act` / `retrieve`: the first `eval_steps` decisions per start under the training banks; `contract` /
    `curator`: one seed bank per start from its expert episode of `bank_steps` decisions."""
    import coplay_envs
    from coplay.learn.teacher import bank_labels, expert_examples
    from coplay.rollout.bot_episodes import play_bot_episodes

    decisions = expert_examples(GAME, seeds, coplay_envs.rules(GAME), cfg.rollout.history_len, eval_steps,
                                bank_labels(banks, cfg.skill_bank), cfg.rollout.top_k_skills,
                                prompt_format=cfg.rollout.prompt_format)
    prompts: dict[str, list] = {a: [e for e in decisions if e.adapter == a] for a in ("act", "retrieve")}
    prompts.update(contract=[], curator=[])
    features: list[dict[str, str]] = []
    for seed in seeds:
        own, examples = _seed_banks(cfg, play_bot_episodes(GAME, "expert", [seed], bank_steps))
        known = {name: kind for bank in own.values() for name, kind in bank.features.items()}
        for adapter in ("contract", "curator"):
            mine = [e for e in examples if e.adapter == adapter]
            prompts[adapter] += mine
            features += [known] * (len(mine) if adapter == "contract" else 0)
    prompts["contract"], prompts["curator"] = prompts["contract"][:limit], prompts["curator"][:limit]
    return prompts, features[:limit]


def train(cfg: Any, examples: list, adapters: tuple[str, ...], min_batches_cap: int | None,
          max_epochs: int | None) -> tuple[dict, dict]:
    """SFT on a plain-torch Learner; returns (SFT report, exported bundles)."""
    from coplay.learn.learner import Learner
    from coplay.learn.sft import sft_adapters

    learner = Learner(cfg.model, cfg.adapters, cfg.learner.model_copy(update={"backend": "torch"}),
                      cfg.sampling.max_tokens, seed=cfg.seeds.run, adapter_names=adapters)
    min_batches = {a: min(n, min_batches_cap or n) for a, n in cfg.sft.min_batches().items()}
    epochs = min(cfg.sft.epochs, max_epochs or cfg.sft.epochs)
    report = sft_adapters(learner, [e for e in examples if e.adapter in adapters], epochs, cfg.sft.lr,
                          min_batches, seed=cfg.seeds.run, batch_size=cfg.sft.batch_size)
    bundles = learner.export(list(report))
    del learner
    return report, bundles


def score(game_prompts: dict[str, list], answers: dict[str, list[str]],
          features: list[dict[str, str]]) -> dict:
    """Per adapter: n and the rates the requirement names, plus a few answers to read."""
    from coplay.agent.parsing import parse_act, parse_retrieve
    from coplay.skills.prompts import AnswerError, parse_protocol, parse_verdict

    out: dict[str, Any] = {}
    for adapter, texts in answers.items():
        prompts = game_prompts[adapter]
        ok, legal = 0, 0
        for i, (example, text) in enumerate(zip(prompts, texts, strict=True)):
            if adapter == "act":
                ok += not parse_act(text, []).error  # no legality check: format only
                shown = list(example.legal)  # the step's legal actions (a compact prompt may not list them)
                parsed = parse_act(text, shown)
                legal += bool(parsed.action) and "illegal action" not in parsed.error and bool(shown)
            elif adapter == "retrieve":
                ids = _SHOWN_ID.findall(example.messages[-1]["content"])
                ok += not parse_retrieve(text, ids).error
            elif adapter == "contract":
                try:
                    parse_protocol(text, features[i])
                    ok += 1
                except AnswerError:
                    pass  # counted as not validating: that is the measurement
            else:
                ok += parse_verdict(text) is not None
        n = len(texts)
        key = {"act": "parse_rate", "retrieve": "parse_rate", "contract": "parse_validate_rate",
               "curator": "verdict_parse_rate"}[adapter]
        out[adapter] = {"n": n, key: ok / n if n else None, "examples": texts[:2]}
        if adapter == "act":
            out[adapter]["legal_rate"] = legal / n if n else None
    return out


def constraints(prompts: dict[str, list], features: list[dict[str, str]]) -> dict[str, list[str]]:
    """Per held-out `act` and `contract` prompt, the constraint a run samples it under with
    `rollout.constrained_actions` (the step's legal actions) and `skill_bank.constrained_contracts`
    (the asking bank's features)."""
    from coplay.agent.constraint import actions_regex
    from coplay.skills.contract_grammar import contract_regex

    return {"act": [actions_regex(list(e.legal)) for e in prompts["act"]],
            "contract": [contract_regex(f) for f in features]}


def generate(cfg: Any, bundles: dict, prompts: dict[str, list], temperature: float, seed: int,
             max_new_tokens: int | None, regexes: dict[str, list[str]] | None = None) -> dict:
    """Every held-out prompt answered by its adapter in the `hf` engine; with `regexes`, only the adapters
    it names, each prompt under its constraint."""
    from coplay.agent.prompts import encode
    from coplay.engines.base import GenerationRequest, SamplingParams, engine_name
    from coplay.engines.hf_engine import HfEngine

    engine = HfEngine(cfg.model, cfg.engine, device="cpu")
    try:
        for adapter, bundle in bundles.items():
            engine.load_adapter(adapter, 1, bundle.files, bundle.sha256)
        answers = {}
        for adapter in MEASURED:
            if adapter not in bundles or (regexes is not None and adapter not in regexes):
                continue
            budget = cfg.sampling.max_tokens[adapter]
            sampling = SamplingParams(temperature=temperature,
                                      max_tokens=min(budget, max_new_tokens or budget))
            constrained = (regexes or {}).get(adapter) or [None] * len(prompts[adapter])
            requests = [GenerationRequest(encode(engine.tokenizer, e.messages), engine_name(adapter, 1),
                                          sampling, seed=seed + i, regex=constrained[i])
                        for i, e in enumerate(prompts[adapter])]
            answers[adapter] = [c.text for c in engine.generate(requests)]
        return answers
    finally:
        engine.close()


def run_model(model: str, args: argparse.Namespace) -> dict:
    from coplay.config import load_config
    from coplay.driver.cold_start import teacher_seeds

    cfg = load_config(CONFIGS.get(model, CONFIGS["smollm2-135m-instruct"]),
                      [f"model.name={model}", *args.overrides])
    episodes = args.teacher_episodes or cfg.sft.episodes_per_game
    sft_cfg = cfg.sft.model_copy(update={"episodes_per_game": episodes})
    cfg = cfg.model_copy(update={"sft": sft_cfg})
    max_steps = args.max_steps or cfg.sft.max_steps or 40
    measured = tuple(a for a in MEASURED if a in args.adapters.split(","))
    adapters = (*measured[:2], "segment", *measured[2:]) if args.with_segment else measured
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    limit = {a: min(args.examples_per_adapter or n, n) for a, n in cfg.sft.max_examples().items()}
    examples, banks = teacher_data(cfg, teacher_seeds(cfg), max_steps, limit)
    eval_seeds = list(range(cfg.seeds.eval.start, cfg.seeds.eval.start + args.starts))
    prompts, features = held_out_prompts(cfg, banks, eval_seeds, args.eval_steps, args.bank_steps,
                                         args.eval_prompts)
    seconds["teacher_data"], clock = time.perf_counter() - clock, time.perf_counter()
    counts = {a: sum(e.adapter == a for e in examples) for a in adapters}
    print(f"[{model}] teacher examples {json.dumps(counts)} held-out prompts "
          f"{json.dumps({a: len(p) for a, p in prompts.items()})}", file=sys.stderr, flush=True)
    sft, bundles = train(cfg, examples, adapters, args.min_batches_cap, args.max_epochs)
    seconds["sft"], clock = time.perf_counter() - clock, time.perf_counter()
    print(f"[{model}] sft {json.dumps(sft)} in {seconds['sft']:.0f} s", file=sys.stderr, flush=True)
    answers = generate(cfg, bundles, prompts, args.temperature, cfg.seeds.run, args.max_new_tokens)
    seconds["generation"], clock = time.perf_counter() - clock, time.perf_counter()
    result = {"config": CONFIGS.get(model), "teacher_seeds": teacher_seeds(cfg),
              "held_out_seeds": [eval_seeds[0], eval_seeds[-1]], "sft": sft,
              "formats": score(prompts, answers, features), "seconds": seconds}
    print(f"[{model}] " + json.dumps(result["formats"]), file=sys.stderr, flush=True)
    if not args.no_constrained:  # the same adapters and prompts, sampled as constrained runs sample them
        regexes = constraints(prompts, features)
        answers = generate(cfg, bundles, prompts, args.temperature, cfg.seeds.run, args.max_new_tokens,
                           regexes)
        seconds["generation_constrained"] = time.perf_counter() - clock
        result["formats_constrained"] = score({a: prompts[a] for a in answers}, answers, features)
        print(f"[{model}] constrained " + json.dumps(result["formats_constrained"]), file=sys.stderr,
              flush=True)
    return result


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2-135m-instruct",
                        help="comma-separated catalogue names")
    parser.add_argument("--teacher-episodes", type=int, default=None,
                        help="expert episodes (training seeds); default the config's sft.episodes_per_game")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="decisions per teacher episode; default the config's sft.max_steps")
    parser.add_argument("--examples-per-adapter", type=int, default=None,
                        help="SFT examples cap per adapter; default sft.max_examples_per_adapter")
    parser.add_argument("--min-batches-cap", type=int, default=None,
                        help="cap on the config's minimum batches (default: none)")
    parser.add_argument("--starts", type=int, default=16, help="held-out 2048 starts (first seeds.eval)")
    parser.add_argument("--eval-steps", type=int, default=2, help="act/retrieve decisions per held-out start")
    parser.add_argument("--bank-steps", type=int, default=250,
                        help="decisions of the expert episode of each held-out start that builds its own "
                             "seed bank")
    parser.add_argument("--eval-prompts", type=int, default=32, help="contract/curator held-out prompts cap")
    parser.add_argument("--max-epochs", type=int, default=None, help="cap on the config's sft.epochs")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="cap on the config's sampling.max_tokens (smoke runs only: it cuts answers)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    parser.add_argument("--with-segment", action="store_true", help="also SFT `segment` (not measured)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny only, small sizes")
    parser.add_argument("--no-constrained", action="store_true",
                        help="skip the second pass of `act` and `contract` under the runs' constraints")
    parser.add_argument("--adapters", default=",".join(MEASURED),
                        help=f"comma-separated adapters to train and measure, of {','.join(MEASURED)}")
    parser.add_argument("--formats", default="",
                        help="comma-separated rollout.prompt_format values, each run in turn (default: the "
                             "config's)")
    parser.add_argument("overrides", nargs="*", help="config overrides for every model, e.g. "
                        "model.tiny.cache_dir=/tmp/tiny")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/cold-start-formats"
                                                    "[-quick].json)")
    args = parser.parse_args(argv)
    unknown = set(args.adapters.split(",")) - set(MEASURED)
    if unknown:
        parser.error(f"--adapters: {sorted(unknown)} not among {list(MEASURED)}")
    if args.quick:
        args.models, args.teacher_episodes, args.max_steps = "tiny", 6, 40
        args.examples_per_adapter, args.min_batches_cap, args.starts, args.eval_steps = 4, 1, 2, 1
        args.eval_prompts, args.bank_steps, args.max_epochs, args.max_new_tokens = 2, 250, 1, 16
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    started, load_before = time.time(), os.getloadavg()
    out = Path(args.out) if args.out else RESULTS / f"cold-start-formats{'-quick' if args.quick else ''}.json"
    models: dict[str, Any] = {}
    formats = [f for f in args.formats.split(",") if f] or [None]
    for model in (m for m in args.models.split(",") if m):
        for fmt in formats:
            run_args = args if fmt is None else argparse.Namespace(
                **{**vars(args), "overrides": [*args.overrides, f"rollout.prompt_format={fmt}"]})
            models[model if fmt is None else f"{model}@{fmt}"] = run_model(model, run_args)
            result = _result(args, started, load_before, models, torch.get_num_threads())
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1) + "\n")  # after each run: survives a later timeout
    print(json.dumps(result, indent=1))
    return result


def format_differences(models: dict[str, Any], formats: list[str]) -> dict[str, Any]:
    """Per model, each later format's rates minus the first format's (same model, same held-out seeds)."""
    out: dict[str, Any] = {}
    names = sorted({key.split("@", 1)[0] for key in models if "@" in key})
    for name in names:
        base = models.get(f"{name}@{formats[0]}")
        for fmt in formats[1:]:
            other = models.get(f"{name}@{fmt}")
            if base is None or other is None:
                continue
            diffs: dict[str, Any] = {}
            for section in ("formats", "formats_constrained"):
                for adapter, rates in (other.get(section) or {}).items():
                    for key, value in rates.items():
                        old = (base.get(section) or {}).get(adapter, {}).get(key)
                        if key.endswith("_rate") and value is not None and old is not None:
                            diffs[f"{section}.{adapter}.{key}"] = round(value - old, 4)
            out[f"{name}: {fmt} minus {formats[0]}"] = diffs
    return out


def recorded_command(args: argparse.Namespace) -> str:
    """The command a result records: every flag that sets a size (or `--quick`), and what was measured
    (`--adapters`, `--formats`) either way, then the overrides."""
    sizes = {"--teacher-episodes": args.teacher_episodes, "--max-steps": args.max_steps,
             "--examples-per-adapter": args.examples_per_adapter, "--min-batches-cap": args.min_batches_cap}
    flags = (f"--models {args.models} "
             + "".join(f"{flag} {value} " for flag, value in sizes.items() if value is not None)
             + f"--starts {args.starts} --eval-steps {args.eval_steps} --bank-steps {args.bank_steps} "
             f"--eval-prompts {args.eval_prompts} "
             f"--temperature {args.temperature}{' --with-segment' if args.with_segment else ''}"
             + (f" --max-epochs {args.max_epochs}" if args.max_epochs else "")
             + (f" --max-new-tokens {args.max_new_tokens}" if args.max_new_tokens else ""))
    # what is measured, recorded with --quick too
    picked = ((f" --adapters {args.adapters}" if args.adapters != ",".join(MEASURED) else "")
              + (f" --formats {args.formats}" if args.formats else ""))
    return (f"nice -n 10 {COMMAND} {'--quick' + picked if args.quick else flags + picked} "
            f"{' '.join(args.overrides)}").strip()


def _result(args: argparse.Namespace, started: float, load_before: tuple[float, ...], models: dict[str, Any],
            threads: int) -> dict[str, Any]:
    result = {"command": recorded_command(args), "quick": args.quick,
              "commit": _commit(), "host": platform.node(), "cpus": os.cpu_count(),
              "threads": threads, "loadavg_before": list(load_before),
              "loadavg_after": list(os.getloadavg()), "seconds": time.time() - started,
              "sampling": "greedy" if args.temperature == 0 else f"temperature {args.temperature}",
              "models": models}
    formats = [f for f in args.formats.split(",") if f]
    if len(formats) > 1:
        result["format_differences"] = format_differences(models, formats)
    return result


if __name__ == "__main__":
    main()
