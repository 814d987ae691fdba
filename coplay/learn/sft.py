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
from collections.abc import Iterator, Sequence
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


class SftSession:
    """Cold-start SFT of several adapters, run a few optimizer batches per call.

    The cold start of a real model trains for minutes; running it in chunks lets the driver move a progress
    bar between calls (one Ray call per chunk on every rank, no queue actor) while every rank still runs the
    same batches in the same order, as the collectives need. `plan` is (adapter, examples, epochs) per
    adapter, trained in that order; each adapter shuffles with its own `random.Random(seed)`, trains at `lr`
    with dropout on, and afterwards gets its optimizer moments reset and its version advanced.
    """

    def __init__(self, learner: Any, plan: Sequence[tuple[str, Sequence[Any], int]], lr: float = 1e-4,
                 batch_size: int = SFT_BATCH_SIZE, seed: int = 0) -> None:
        self.learner, self.lr, self.batch_size, self.seed = learner, lr, batch_size, seed
        self.plan: list[tuple[str, list[TokenizedExample], int]] = []
        # completions longer than the adapter's sampling budget: the engines cut such an answer off, so the
        # SFT'd model can never give it whole (a JSON protocol cut at 128 tokens never parses)
        self.over_budget: dict[str, int] = {}
        budgets = learner.max_tokens
        for adapter, examples, epochs in plan:
            tokenized = [tokenize_example(learner.tokenizer, *_parts(e)) for e in examples]
            tokenized = [t for t in tokenized if t.completion_ids]
            if tokenized:
                self.plan.append((adapter, tokenized, epochs))
            budget = budgets.get(adapter)
            over = sum(len(t.completion_ids) > budget for t in tokenized) if budget else 0
            if over:
                self.over_budget[adapter] = over
        self.total = sum(epochs * -(-len(t) // batch_size) for _, t, epochs in self.plan)
        self.losses: dict[str, list[float]] = {adapter: [] for adapter, _, _ in self.plan}
        self.examples: dict[str, int] = {}  # examples given per adapter (before empty completions drop out)
        self._batches = self._run()

    @classmethod
    def for_examples(cls, learner: Any, examples: Sequence[Any], epochs: int, lr: float,
                     min_batches: dict[str, int] | None = None, seed: int = 0,
                     batch_size: int = SFT_BATCH_SIZE) -> SftSession:
        """Every adapter of `learner` that has examples (objects with `.adapter`), in the learner's order; an
        adapter with few examples runs more epochs, until it has at least `min_batches[adapter]` batches of
        `batch_size`."""
        plan = []
        for adapter in learner.adapter_names:
            mine = [e for e in examples if e.adapter == adapter]
            if mine:
                floor = (min_batches or {}).get(adapter, 0)
                plan.append((adapter, mine, sft_epochs(len(mine), epochs, floor, batch_size)))
        session = cls(learner, plan, lr=lr, batch_size=batch_size, seed=seed)
        session.examples = {adapter: len(mine) for adapter, mine, _ in plan}
        return session

    def report(self) -> dict[str, Any]:
        """Per adapter trained so far: examples, epochs, batches, first and last batch loss, and (when any)
        `over_max_tokens`: examples whose completion is longer than the adapter's `sampling.max_tokens`."""
        out = {adapter: {"examples": self.examples.get(adapter, len(tokenized)), "epochs": epochs,
                         "batches": len(self.losses[adapter]), "first_loss": self.losses[adapter][0],
                         "last_loss": self.losses[adapter][-1]}
               for adapter, tokenized, epochs in self.plan if self.losses[adapter]}
        for adapter, over in self.over_budget.items():
            if adapter in out:
                out[adapter]["over_max_tokens"] = over
        return out

    def run(self, max_batches: int | None = None) -> list[tuple[str, float]]:
        """Train up to `max_batches` more batches (all that are left when None); (adapter, loss) of each.
        An empty list means the session is done."""
        out: list[tuple[str, float]] = []
        for item in self._batches:
            out.append(item)
            if max_batches is not None and len(out) >= max_batches:
                break
        return out

    def _run(self) -> Iterator[tuple[str, float]]:
        from coplay.learn.distributed import all_reduce_sum

        learner = self.learner
        for adapter, tokenized, epochs in self.plan:
            trainer = learner.trainers[adapter]
            order = list(range(len(tokenized)))
            rng = random.Random(self.seed)
            trainer.set_lr(self.lr)
            learner.policy.train()
            try:
                for _ in range(epochs):
                    rng.shuffle(order)
                    for start in range(0, len(order), self.batch_size):
                        items = _sft_items([tokenized[i] for i in order[start : start + self.batch_size]])
                        loss = all_reduce_sum([self._batch(trainer, items)])[0]
                        self.losses[adapter].append(loss)
                        yield adapter, loss
            finally:
                learner.eval_mode()
                trainer.set_lr(learner.lr_of(adapter))
            trainer.reset_optimizer_state()
            learner.versions[adapter] += 1
            learner.changed = [adapter]

    def _batch(self, trainer: Any, items: list[TrainItem]) -> float:
        """One optimizer step on this rank's share of the batch; the summed loss of that share."""
        learner = self.learner
        set_weights(items, "token-mean", None)
        chunks = rank_micro_batches(items, learner.rank, learner.world_size, learner.cfg.micro_batch_size)
        total = 0.0
        for k, chunk in enumerate(chunks):
            mb = to_micro_batch(chunk, learner.pad_id)
            logprobs = trainer.forward(mb.tokens, mb.temperatures)
            weights = mb.weights.to(logprobs.device)[:, None] * mb.tokens.completion_mask.to(logprobs.device)
            loss = -(logprobs * weights).sum()
            trainer.backward(loss, last=k == len(chunks) - 1)
            total += float(loss.detach())
        trainer.step()
        return total


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
    session = SftSession(learner, [(adapter, examples, epochs)], lr, batch_size, seed)
    return [loss for _, loss in session.run()]


def sft_adapters(learner: Any, examples: Sequence[Any], epochs: int, lr: float,
                 min_batches: dict[str, int] | None = None, seed: int = 0,
                 batch_size: int = SFT_BATCH_SIZE) -> dict[str, Any]:
    """Cold-start SFT of every adapter of `learner` that has examples, in one go (`SftSession.report`)."""
    session = SftSession.for_examples(learner, examples, epochs, lr, min_batches, seed, batch_size)
    session.run()
    return session.report()


@torch.no_grad()
def completion_nll(learner: Any, adapter: str, examples: Sequence[Any]) -> float:
    """Mean negative log-likelihood per completion token of the examples under `adapter` (eval mode)."""
    from coplay.learn.logprobs import completion_logprobs

    tokenized = [tokenize_example(learner.tokenizer, *_parts(e)) for e in examples]
    lps = completion_logprobs(learner.policy, adapter, [t.prompt_ids for t in tokenized],
                              [t.completion_ids for t in tokenized], 1.0)
    tokens = sum(len(lp) for lp in lps)
    return -sum(sum(lp) for lp in lps) / max(tokens, 1)
