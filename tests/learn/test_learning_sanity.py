"""Learning sanity (slow): GRPO lifts the tiny model on a one-token 2048 task from chance to clearly above it,
and a short SFT on the expert's answers starts it above chance.

Task: a random 2048 board, answer the index of the expert's move (0 up, 1 down, 2 left, 3 right). The expert
here is a fixed rule (this test must not depend on the games package): the move that merges the most tile
value; ties go to the direction of the largest tile's half of the board (up/down by its row, left/right by
its column), then to the lower index. Sampling is constrained to the four answer tokens (like an engine's
allowed-token list); the behaviour log-prob recorded is the full-vocabulary one the learner computes.
Reward 1 for the expert's move, else 0; G samples per board form a group.

`python tests/learn/test_learning_sanity.py` prints the curves as JSON.
"""

from __future__ import annotations

import json
import random
import sys

import pytest
import torch

DIRECTIONS = ("up", "down", "left", "right")
GROUP = 8
BOARDS_PER_STEP = 16
GRPO_STEPS = 30


def _slide(row: list[int]) -> tuple[list[int], int]:
    tiles = [v for v in row if v]
    out, merged, i = [], 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            merged += 2 * tiles[i]
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (4 - len(out)), merged


def _lines(board: list[list[int]], direction: str) -> list[list[int]]:
    cols = [[board[r][c] for r in range(4)] for c in range(4)]
    return {"left": board, "right": [row[::-1] for row in board], "up": cols,
            "down": [c[::-1] for c in cols]}[direction]


def expert_move(board: list[list[int]]) -> int:
    merged = {d: sum(_slide(line)[1] for line in _lines(board, d)) for d in DIRECTIONS}
    biggest = max(max(row) for row in board)
    r, c = next((r, c) for r in range(4) for c in range(4) if board[r][c] == biggest)
    toward = {"up": r < 2, "down": r >= 2, "left": c < 2, "right": c >= 2}
    return min(range(4), key=lambda i: (-merged[DIRECTIONS[i]], not toward[DIRECTIONS[i]], i))


def random_board(rng: random.Random) -> list[list[int]]:
    return [[rng.choice([0, 0, 2, 2, 4, 4, 8, 16]) for _ in range(4)] for _ in range(4)]


def prompt_text(board: list[list[int]]) -> str:
    rows = "\n".join(" ".join(f"{v:>2}" for v in row) for row in board)
    return f"2048 board:\n{rows}\nbest move (0 up, 1 down, 2 left, 3 right):"


class Task:
    def __init__(self, learner, seed: int):
        tok = learner.tokenizer
        self.learner = learner
        self.answer_ids = [tok(str(i), add_special_tokens=False)["input_ids"] for i in range(4)]
        assert all(len(a) == 1 for a in self.answer_ids), self.answer_ids
        self.answer_ids = [a[0] for a in self.answer_ids]
        self.rng = random.Random(seed)
        self.eval_set = [self.example(random_board(random.Random(10_000 + i))) for i in range(256)]

    def example(self, board):
        return (self.learner.tokenizer(prompt_text(board), add_special_tokens=False)["input_ids"],
                expert_move(board))

    @torch.no_grad()
    def answer_logprobs(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Full-vocabulary log-probs of the four answers, and their log-probs restricted to the four."""
        from coplay.learn.logprobs import completion_logprobs

        full = torch.tensor([completion_logprobs(self.learner.policy, "act", prompts, [[a]] * len(prompts),
                                                 1.0)
                             for a in self.answer_ids]).squeeze(-1).T  # [N, 4]
        return full, torch.log_softmax(full, dim=-1)

    def accuracy(self) -> dict[str, float]:
        prompts, targets = zip(*self.eval_set, strict=True)
        _, restricted = self.answer_logprobs(list(prompts))
        target = torch.tensor(targets)
        return {"greedy_accuracy": float((restricted.argmax(-1) == target).float().mean()),
                "p_correct": float(restricted.exp()[torch.arange(len(target)), target].mean())}

    def grpo_step(self, step: int) -> None:
        from coplay.learn.advantages import sample_group_advantages
        from coplay.types import Sample

        boards = [self.example(random_board(self.rng)) for _ in range(BOARDS_PER_STEP)]
        full, restricted = self.answer_logprobs([p for p, _ in boards])
        gen = torch.Generator().manual_seed(step)
        samples = []
        for b, (prompt, target) in enumerate(boards):
            choices = torch.multinomial(restricted[b].exp(), GROUP, replacement=True, generator=gen).tolist()
            for g, choice in enumerate(choices):
                samples.append(Sample(adapter="act", adapter_version=step, prompt_ids=prompt,
                                      completion_ids=[self.answer_ids[choice]],
                                      logprobs=[float(full[b, choice])], group_id=f"{step}-{b}",
                                      reward=float(choice == target),
                                      sample_id=f"{step}-{b}-{g}"))
        self.learner.train_step(samples, sample_group_advantages(samples))


def run_curves(cache_dir: str, lr: float = 2e-3, steps: int = GRPO_STEPS) -> dict[str, object]:
    from scenarios import make_learner

    from coplay.learn.sft import run_sft

    names = ("act",)
    learner = make_learner(cache_dir, "torch", names=names, lr=lr, adapter_lr={}, kl_beta=0.0, epochs=1,
                           micro_batch_size=64)
    task = Task(learner, seed=0)
    chance = [sum(t == i for _, t in task.eval_set) / len(task.eval_set) for i in range(4)]
    curve = [task.accuracy()]
    for step in range(steps):
        task.grpo_step(step)
        if (step + 1) % 5 == 0:
            curve.append(task.accuracy())
    sft_learner = make_learner(cache_dir, "torch", names=names, micro_batch_size=64)
    sft_task = Task(sft_learner, seed=1)
    before_sft = sft_task.accuracy()
    rng = random.Random(7)
    examples = []
    for _ in range(256):
        board = random_board(rng)
        examples.append(([{"role": "user", "content": prompt_text(board)}], str(expert_move(board))))
    run_sft(sft_learner, "act", examples, epochs=2, lr=3e-3, batch_size=32)
    # SFT trains with the chat template; the GRPO task prompts raw text, so score SFT with the chat prompt
    sft_task.eval_set = [
        (sft_learner.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt_text(random_board(random.Random(10_000 + i)))}],
            tokenize=True, add_generation_prompt=True, return_dict=False),
         target) for i, (_, target) in enumerate(sft_task.eval_set)]
    return {"class_shares": chance, "grpo_curve_every_5_steps": curve, "before_sft": before_sft,
            "after_sft": sft_task.accuracy()}


@pytest.mark.slow
def test_grpo_and_sft_lift_the_tiny_model_above_chance(tiny_model_config):
    curves = run_curves(tiny_model_config.tiny.cache_dir)
    print(json.dumps(curves, indent=1))
    start, end = curves["grpo_curve_every_5_steps"][0], curves["grpo_curve_every_5_steps"][-1]
    assert start["p_correct"] < 0.32  # about chance (0.25) from random adapters
    assert end["p_correct"] > start["p_correct"] + 0.08
    assert end["greedy_accuracy"] > 0.40
    assert curves["after_sft"]["greedy_accuracy"] > 0.40 and curves["after_sft"]["p_correct"] > 0.27

if __name__ == "__main__":
    curves = run_curves(sys.argv[1] if len(sys.argv) > 1 else "/tmp/coplay-tiny-cache",
                        lr=float(sys.argv[2]) if len(sys.argv) > 2 else 2e-3)
    print(json.dumps(curves, indent=1))
