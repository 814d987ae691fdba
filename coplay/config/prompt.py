"""`rollout.prompt_format`: the layout of every `act` prompt (`coplay.agent.prompts`, docs/agents.md). A
module of its own so that tree.py stays short. Imports only the standard library.
"""

from __future__ import annotations

from typing import Literal

PromptFormat = Literal["full", "compact"]

PROMPT_FORMAT_HELP = (
    "the act prompt's layout, the same for rollouts, evaluation, play, the cold start's teacher data and the "
    "curriculum's solver: `full` (the legal actions listed again below the observation, 'none' lines) or "
    "`compact` (rules once, legal actions once, history only when there is some; SmolLM2 tokens per decision "
    "0.74x full on Candy Crush, 0.85x Tetris, 0.95-0.97x the others: benchmarks/prompt_tokens.py). The "
    "default stays `full` until the cold start's answer rates are measured on `compact`")
