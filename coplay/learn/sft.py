"""Cold-start SFT (docs/rewards.md): chat-formatted teacher examples, loss on completion tokens only, on one
named adapter of a `Learner` (so it runs on plain torch or DeepSpeed like GRPO).

An example is (messages, completion): the prompt is the chat template applied to `messages` with the
assistant turn opened (`add_generation_prompt=True`) — exactly what the engines are prompted with — and the
completion tokens are the assistant turn's text including the template's end-of-turn marker, so the model
learns to stop. The loss of one optimizer batch is the token mean of -log p(completion tokens):

    L = -(1 / sum_i |c_i|) * sum_i sum_j log p(c_ij | prompt_i, c_i<j)

Dropout is on while training (`train()`), off again afterwards. The adapter's optimizer moments are reset at
the end, so GRPO starts from fresh moments at its own learning rate. Teacher-data builders live elsewhere
(`teacher.py`); this module takes any objects with `.messages` / `.completion`, or (messages, completion)
pairs. Imports torch (and, through the learner, transformers/peft).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from coplay.learn.batching import TrainItem, rank_micro_batches, set_weights, to_micro_batch

ChatMessages = list[dict[str, str]]


@dataclass
class TokenizedExample:
    prompt_ids: list[int]
    completion_ids: list[int]


def _parts(example: Any) -> tuple[ChatMessages, str]:
    if isinstance(example, tuple):
        return example[0], example[1]
    return example.messages, example.completion


def tokenize_example(tokenizer: Any, messages: ChatMessages, completion: str) -> TokenizedExample:
    """Prompt ids (template with the assistant turn opened) and completion ids (text + end-of-turn marker)."""
    from coplay.agent.prompts import template_kwargs

    extra = template_kwargs(tokenizer)  # the same template variables as the engines' prompts
    prompt_text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **extra)
    full_text = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": completion}],
                                              tokenize=False, add_generation_prompt=False, **extra)
    if not full_text.startswith(prompt_text):
        raise ValueError("the chat template renders the assistant turn differently from the generation "
                         "prompt; cannot split prompt and completion tokens")
    completion_text = full_text[len(prompt_text):].rstrip()
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion_text, add_special_tokens=False)["input_ids"]
    return TokenizedExample(list(prompt_ids), list(completion_ids))


def _sft_items(examples: list[TokenizedExample]) -> list[TrainItem]:
    # only the token weights matter: the SFT loss uses neither advantages nor behaviour log-probs
    return [TrainItem(e.prompt_ids, e.completion_ids, [0.0] * len(e.completion_ids), 1.0, 1.0)
            for e in examples]


SFT_BATCH_SIZE = 16  # examples per optimizer batch


def sft_epochs(n_examples: int, epochs: int, min_batches: int, batch_size: int = SFT_BATCH_SIZE) -> int:
    """Epochs for an adapter with `n_examples`: at least `epochs`, more when that gives fewer than
    `min_batches` optimizer batches (a bank adapter with five teacher examples would otherwise get one
    batch per epoch)."""
    per_epoch = max(1, -(-n_examples // batch_size))
    return max(epochs, -(-min_batches // per_epoch))


def run_sft(
    learner: Any,
    adapter: str,
    examples: Sequence[Any],
    epochs: int = 1,
    lr: float = 1e-4,
    batch_size: int = SFT_BATCH_SIZE,
    seed: int = 0,
) -> list[float]:
    """Train `adapter` on the examples; returns the loss of every optimizer batch (mean over ranks' sums).

    Every rank passes the same examples; each batch of `batch_size` is split over the ranks like GRPO.
    """
    from coplay.learn.distributed import all_reduce_sum

    tokenized = [tokenize_example(learner.tokenizer, *_parts(e)) for e in examples]
    tokenized = [t for t in tokenized if t.completion_ids]
    trainer = learner.trainers[adapter]
    order = list(range(len(tokenized)))
    rng = random.Random(seed)
    losses: list[float] = []
    trainer.set_lr(lr)
    learner.policy.train()
    try:
        for _ in range(epochs):
            rng.shuffle(order)
            for start in range(0, len(order), batch_size):
                items = _sft_items([tokenized[i] for i in order[start : start + batch_size]])
                set_weights(items, "token-mean", None)
                chunks = rank_micro_batches(items, learner.rank, learner.world_size,
                                            learner.cfg.micro_batch_size)
                total = 0.0
                for k, chunk in enumerate(chunks):
                    mb = to_micro_batch(chunk, learner.pad_id)
                    logprobs = trainer.forward(mb.tokens, mb.temperatures)
                    weights = (mb.weights.to(logprobs.device)[:, None]
                               * mb.tokens.completion_mask.to(logprobs.device))
                    loss = -(logprobs * weights).sum()
                    trainer.backward(loss, last=k == len(chunks) - 1)
                    total += float(loss.detach())
                trainer.step()
                losses.append(all_reduce_sum([total])[0])
    finally:
        learner.eval_mode()
        trainer.set_lr(learner.lr_of(adapter))
    trainer.reset_optimizer_state()
    learner.versions[adapter] += 1
    learner.changed = [adapter]
    return losses


def sft_adapters(learner: Any, examples: Sequence[Any], epochs: int, lr: float,
                 min_batches: dict[str, int] | None = None, seed: int = 0) -> dict[str, Any]:
    """Cold-start SFT of every adapter of `learner` that has examples (objects with `.adapter`); per adapter
    the first and last batch loss. An adapter with few examples runs more epochs, until it has at least
    `min_batches[adapter]` batches."""
    report = {}
    for adapter in learner.adapter_names:
        mine = [e for e in examples if e.adapter == adapter]
        if mine:
            adapter_epochs = sft_epochs(len(mine), epochs, (min_batches or {}).get(adapter, 0))
            losses = run_sft(learner, adapter, mine, epochs=adapter_epochs, lr=lr, seed=seed)
            report[adapter] = {"examples": len(mine), "epochs": adapter_epochs, "batches": len(losses),
                               "first_loss": losses[0], "last_loss": losses[-1]}
    return report


@torch.no_grad()
def completion_nll(learner: Any, adapter: str, examples: Sequence[Any]) -> float:
    """Mean negative log-likelihood per completion token of the examples under `adapter` (eval mode)."""
    from coplay.learn.logprobs import completion_logprobs

    tokenized = [tokenize_example(learner.tokenizer, *_parts(e)) for e in examples]
    lps = completion_logprobs(learner.policy, adapter, [t.prompt_ids for t in tokenized],
                              [t.completion_ids for t in tokenized], 1.0)
    tokens = sum(len(lp) for lp in lps)
    return -sum(sum(lp) for lp in lps) / max(tokens, 1)
