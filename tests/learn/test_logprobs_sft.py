"""Learner log-probs (batched == one at a time, temperature, base vs adapter) and cold-start SFT."""

from __future__ import annotations

import math

import pytest
import torch
from scenarios import make_learner

from coplay.learn.logprobs import completion_logprobs


@pytest.fixture(scope="module")
def learner(tiny_model_config):
    return make_learner(tiny_model_config.tiny.cache_dir, "torch", names=("act", "curator"))


def test_batched_logprobs_equal_single_sequences_and_follow_temperature(learner):
    prompts = [[5, 6, 7], [8], [9, 10, 11, 12, 13, 14]]
    completions = [[20, 21], [22, 23, 24, 25], [26]]
    batched = completion_logprobs(learner.policy, "act", prompts, completions, 0.7)
    assert [len(x) for x in batched] == [2, 4, 1]
    for p, c, got in zip(prompts, completions, batched, strict=True):
        alone = completion_logprobs(learner.policy, "act", [p], [c], 0.7)[0]
        assert got == pytest.approx(alone, abs=1e-5)
    # by hand: log_softmax(logits / T) of the full sequence at the completion positions
    with torch.no_grad():
        logits = learner.policy(input_ids=torch.tensor([prompts[0] + completions[0]])).logits[0]
    for j, token in enumerate(completions[0]):
        expected = torch.log_softmax(logits[len(prompts[0]) - 1 + j] / 0.7, -1)[token].item()
        assert batched[0][j] == pytest.approx(expected, abs=1e-5)
    hot = completion_logprobs(learner.policy, "act", prompts[:1], completions[:1], 2.0)[0]
    assert hot != pytest.approx(batched[0], abs=1e-4)
    with pytest.raises(ValueError, match="temperature"):
        completion_logprobs(learner.policy, "act", prompts, completions, 0.0)


def test_adapter_none_is_the_base_model(learner):
    with torch.no_grad():
        for name, p in learner.policy.named_parameters():
            if "lora_B.curator" in name:
                p.add_(0.05)
    base = completion_logprobs(learner.policy, None, [[5, 6]], [[7, 8]], 1.0)[0]
    act = completion_logprobs(learner.policy, "act", [[5, 6]], [[7, 8]], 1.0)[0]  # act still has B = 0
    curator = completion_logprobs(learner.policy, "curator", [[5, 6]], [[7, 8]], 1.0)[0]
    assert base == pytest.approx(act, abs=1e-6)
    assert curator != pytest.approx(base, abs=1e-4)


def test_sft_lowers_completion_loss_and_trains_only_completion_tokens(learner):
    from coplay.learn.sft import completion_nll, run_sft, tokenize_example

    examples = [([{"role": "user", "content": f"board {i} {i + 1}"}], f"INTENTION: MERGE left\nACTION: {d}")
                for i, d in enumerate(["left", "right", "up", "down"] * 2)]
    tok = tokenize_example(learner.tokenizer, *examples[0])
    text = learner.tokenizer.decode(tok.completion_ids)
    assert text.startswith("INTENTION: MERGE left") and text.endswith("<|im_end|>")
    assert learner.tokenizer.decode(tok.prompt_ids).endswith("<|im_start|>assistant\n")
    act_before = learner.adapter_weights("act")
    before = completion_nll(learner, "curator", examples)
    losses = run_sft(learner, "curator", examples, epochs=4, lr=3e-3, batch_size=4)
    after = completion_nll(learner, "curator", examples)
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert after < before - 0.5, (before, after)
    assert learner.optimizer_state("curator") == {}  # fresh moments for GRPO
    for name, tensor in learner.adapter_weights("act").items():
        assert torch.equal(tensor, act_before[name])


def test_sft_repeats_a_small_example_set_until_it_has_the_minimum_batches():
    from coplay.learn.sft import sft_epochs

    assert sft_epochs(1500, 6, 40) == 6  # 94 batches per epoch: the configured epochs stand
    assert sft_epochs(5, 6, 40) == 40  # one batch per epoch
    assert sft_epochs(40, 2, 10) == 4  # three batches per epoch -> 12 >= 10
    assert sft_epochs(5, 3, 0) == 3


def test_sft_session_runs_in_chunks_over_adapters_and_counts_its_batches(tiny_model_config):
    """The cold start trains a chunk at a time so the driver's bar moves: the chunks add up to the
    announced total, each adapter's batches come in order, and each adapter ends with a new version and
    fresh moments."""
    from coplay.learn.sft import SftSession

    fresh = make_learner(tiny_model_config.tiny.cache_dir, "torch", names=("act", "curator"))
    act = [([{"role": "user", "content": f"board {i}"}], f"ACTION: {d}")
           for i, d in enumerate(["left", "right", "up"] * 3)]  # 9 examples: 3 batches of 4 per epoch
    curator = [([{"role": "user", "content": f"op {i}"}], "VERDICT: approve") for i in range(4)]
    versions = dict(fresh.versions)
    session = SftSession(fresh, [("act", act, 2), ("curator", curator, 1)], lr=1e-3, batch_size=4)
    assert session.total == 2 * 3 + 1
    chunks = []
    while batch := session.run(2):
        chunks.append(batch)
    assert [len(c) for c in chunks] == [2, 2, 2, 1]
    assert [adapter for c in chunks for adapter, _ in c] == ["act"] * 6 + ["curator"]
    assert len(session.losses["act"]) == 6 and all(math.isfinite(x) for x in session.losses["act"])
    assert fresh.versions == {"act": versions["act"] + 1, "curator": versions["curator"] + 1}
    assert fresh.optimizer_state("act") == {} and fresh.optimizer_state("curator") == {}
    assert session.run(2) == []
    report = session.report()
    assert [report[a]["batches"] for a in ("act", "curator")] == [6, 1]
    assert report["act"]["first_loss"] == session.losses["act"][0]


def test_sft_batch_size_sets_the_optimizer_steps_and_minimum_batches_count_in_it(tiny_model_config):
    """`sft.batch_size`: a real model learns the answer formats in optimizer steps, so the same examples
    in batches of 4 give four times the steps of batches of 16; an adapter's minimum counts its batches."""
    from coplay.learn.sft import SftSession
    from coplay.learn.teacher import ChatExample

    fresh = make_learner(tiny_model_config.tiny.cache_dir, "torch", names=("act", "curator"))
    act = [ChatExample("act", [{"role": "user", "content": f"board {i}"}], "ACTION: left") for i in range(16)]
    curator = [ChatExample("curator", [{"role": "user", "content": f"op {i}"}], "VERDICT: approve")
               for i in range(3)]
    sixteen = SftSession.for_examples(fresh, act + curator, 1, 1e-3, {"curator": 3}, batch_size=16)
    four = SftSession.for_examples(fresh, act + curator, 1, 1e-3, {"curator": 3}, batch_size=4)
    assert sixteen.total == 1 + 3 and four.total == 4 + 3
    assert four.run(5) and [len(four.losses[a]) for a in ("act", "curator")] == [4, 1]


def test_teacher_answers_longer_than_the_sampling_budget_are_counted(tiny_model_config):
    """A teacher answer longer than `sampling.max_tokens` is cut off by the engines, so the SFT'd model can
    never give it whole (SmolLM2's contract protocols run to 190 tokens against a 128 budget): counted."""
    from coplay.learn.sft import SftSession
    from coplay.learn.teacher import ChatExample

    fresh = make_learner(tiny_model_config.tiny.cache_dir, "torch", names=("act", "contract"))
    fresh.max_tokens = {"act": 64, "contract": 4}
    long = "EFFECTS: merges up, empty cells up, max tile up"
    examples = [ChatExample("contract", [{"role": "user", "content": f"skill {i}"}], long) for i in range(3)]
    examples += [ChatExample("act", [{"role": "user", "content": "board"}], "ACTION: left")]
    session = SftSession.for_examples(fresh, examples, 1, 1e-3)
    session.run()
    report = session.report()
    assert report["contract"]["over_max_tokens"] == 3 and "over_max_tokens" not in report["act"]
