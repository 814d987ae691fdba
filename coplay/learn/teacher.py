"""Teacher data for the cold-start SFT (DESIGN.md §5): expert-bot episodes turned into `act` examples.

Each example is the exact prompt the decision agent would see at that step (the one prompt builder of
`coplay.agent.prompts`, no skill active, the same bounded history) and the completion in the `act` format
built from the bot's intention tag, its one-line reason and its action. No torch, no ray.
"""

from __future__ import annotations

from dataclasses import dataclass

from coplay.agent.prompts import MULTI_LINE_GAMES, ChatMessages, HistoryEntry, act_messages
from coplay.rollout.bot_episodes import play_bot_episodes


@dataclass(frozen=True)
class ChatExample:
    """One SFT example: chat messages (the prompt) and the assistant completion, for one adapter."""

    adapter: str
    messages: ChatMessages
    completion: str


def act_completion(game: str, intention: str, action: str) -> str:
    """The `act` answer format for a teacher decision (`intention` is "<TAG> <reason>")."""
    key = "ORDERS:\n" if game in MULTI_LINE_GAMES else "ACTION: "
    return f"INTENTION: {intention.strip()}\n{key}{action.strip()}"


def expert_act_examples(game: str, seeds: list[int], rules: str, history_len: int = 4,
                        max_steps: int | None = None, policy: str = "expert") -> list[ChatExample]:
    """`act` examples from `policy` bots playing every seat of one episode per seed."""
    seen: dict[tuple[int, str], list[tuple[str, list[str]]]] = {}
    current_seed = {"seed": seeds[0] if seeds else 0}

    def hook(seat: str, observation: str, info: dict) -> None:
        seen.setdefault((current_seed["seed"], seat), []).append(
            (str(observation), list(info.get("legal_actions", []))))

    examples: list[ChatExample] = []
    for seed in seeds:
        current_seed["seed"] = seed
        for traj in play_bot_episodes(game, policy, [seed], max_steps=max_steps, hook=hook):
            views = seen.get((seed, traj.seat), [])
            history: list[HistoryEntry] = []
            for step, (observation, legal) in zip(traj.steps, views, strict=False):
                messages = act_messages(game, rules, observation, legal, None, history[-history_len:] if history_len else [])
                examples.append(ChatExample("act", messages, act_completion(game, step.intention, step.action)))
                history.append(HistoryEntry(step.t, step.intention, step.action, step.reward))
    return examples
