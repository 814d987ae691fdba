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
