"""An evaluation counts its model calls: how many `act` and `retrieve` calls its decisions took and their
prompt and completion tokens, per game. Why: the demo's 48-decision evaluation took 106 to 167 s on the same
machine, and a decision is an `act` call plus a `retrieve` call only at some moves (the first, every
`rollout.retrieve_every`, wherever no skill is active), so two evaluations' seconds compare only beside
their calls."""

from __future__ import annotations

from coplay.eval.protocol import summarize_eval
from coplay.types import Sample, Trajectory


def _sample(adapter: str, prompt: int, completion: int) -> Sample:
    return Sample(adapter=adapter, adapter_version=1, prompt_ids=[1] * prompt,
                  completion_ids=[2] * completion,
                  logprobs=[0.0] * completion, group_id="g")


def test_the_summary_counts_each_adapters_calls_and_tokens_and_bots_have_none():
    model = [Trajectory(episode_id=f"e{seed}", game="candy_crush", seat="player_0", role="player", seed=seed,
                        score=10.0, samples=[_sample("retrieve", 700, 5), _sample("act", 800, 20),
                                             _sample("act", 790, 18)][: 3 - seed])
             for seed in range(2)]
    calls = summarize_eval(model)["candy_crush"]["calls"]
    assert calls == {"act": {"calls": 3, "prompt_tokens": 2390, "completion_tokens": 58},
                     "retrieve": {"calls": 2, "prompt_tokens": 1400, "completion_tokens": 10}}
    bots = [Trajectory(episode_id="b", game="candy_crush", seat="player_0", role="player", seed=0, score=5.0)]
    assert "calls" not in summarize_eval(bots)["candy_crush"]
