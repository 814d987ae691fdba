"""The cold start trains on the prompts the run serves: its teacher episodes play the game as
`game.<game>.env_kwargs` configures it. Before this, the SmolLM2 Candy Crush demo's cold start saw 50-move
boards without the candies each swap clears, and was then asked about 6-move boards that list them."""

from __future__ import annotations

import coplay_envs
from coplay.agent.prompts import act_messages
from coplay.config import load_config
from coplay.driver.cold_start import teacher_examples
from tests.helpers import REPO

CANDY_DEMO = REPO / "launch" / "configs" / "demo-candy_crush-smollm2.yaml"


def served_first_prompt(cfg, game: str, seed: int, skill_section: bool) -> list[dict[str, str]]:
    """The decision agent's first `act` prompt of an episode on `seed`, from the env the run makes."""
    env = coplay_envs.make_env(game, **cfg.game[game].env_kwargs)
    observation, info = env.reset(seed=seed)
    env.close()
    return act_messages(game, coplay_envs.rules(game), observation, list(info["legal_actions"]), None, [],
                        skill_section=skill_section, prompt_format=cfg.rollout.prompt_format)


def test_teacher_prompts_show_the_configured_game():
    cfg = load_config(CANDY_DEMO, ["ablation.variant=grpo_no_bank"])
    assert cfg.game["candy_crush"].env_kwargs["max_moves"] == 6, "the demo's Candy Crush changed"
    examples = [e for e in teacher_examples(cfg, "candy_crush", 5) if e.adapter == "act"]
    assert len(examples) == 6, "an episode of the configured 6 moves"
    first = examples[0].messages
    assert first == served_first_prompt(cfg, "candy_crush", 5, skill_section=False)
    text = first[-1]["content"]
    assert "Move 0 of 6" in text and "each with the candies it clears" in text


def test_teacher_prompts_with_a_bank_keep_the_skill_section():
    cfg = load_config(CANDY_DEMO, [])
    first = next(e for e in teacher_examples(cfg, "candy_crush", 5) if e.adapter == "act").messages
    assert first == served_first_prompt(cfg, "candy_crush", 5, skill_section=True)
