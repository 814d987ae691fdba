"""The `curriculum:` config section: off by default, checked before a run trains."""

from __future__ import annotations

import pytest

from coplay.config import ConfigError, CoplayConfig, load_config, require_trainable


def test_a_curriculum_needs_a_single_player_game_to_train() -> None:
    require_trainable(load_config(overrides=["curriculum.enabled=true", "games=[2048, avalon]"]))
    with pytest.raises(ConfigError, match="curriculum.enabled=true with games=.'avalon'.: curriculum tasks"):
        require_trainable(load_config(overrides=["curriculum.enabled=true", "games=[avalon]"]))


def test_the_section_is_off_by_default_and_rejects_unknown_values() -> None:
    assert CoplayConfig().curriculum.enabled is False
    with pytest.raises(ConfigError, match="routing"):
        load_config(overrides=["curriculum.routing=greedy"])
    with pytest.raises(ConfigError, match="freeze"):
        load_config(overrides=["curriculum.freeze=[retrieve]"])


def test_mix_share_is_the_share_of_solver_episodes_that_start_from_tasks() -> None:
    from coplay.config import CurriculumConfig

    # 4 ordinary episodes, K = 4: at share 0.5 task episodes match them (1 task), at 0.8 they are 4x (4)
    assert CurriculumConfig(mix_share=0.5, attempts=4).max_tasks(4) == 1
    assert CurriculumConfig(mix_share=0.8, attempts=4).max_tasks(4) == 4
    assert CurriculumConfig(mix_share=0.25, attempts=2).max_tasks(12) == 2
    assert CurriculumConfig(mix_share=0.0).max_tasks(4) == 0
    assert CurriculumConfig(mix_share=1.0).max_tasks(4) is None  # every valid task is played
