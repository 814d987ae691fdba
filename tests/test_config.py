"""The config tree: defaults, YAML + dotted overrides, and rejection messages a user can act on."""

from __future__ import annotations

import pytest
import yaml

from coplay.config import ConfigError, CoplayConfig, load_config


def test_defaults_round_trip_through_yaml(tmp_path):
    cfg = CoplayConfig()
    path = tmp_path / "c.yaml"
    path.write_text(cfg.to_yaml())
    assert load_config(path) == cfg
    assert set(cfg.adapters) == {"act", "retrieve", "segment", "contract", "curator"}
    assert cfg.adapters["act"].r == 16 and cfg.adapters["act"].alpha == 32
    assert cfg.adapters["act"].dropout == 0.05
    assert cfg.model.trust_remote_code is False


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"games": ["tetris"], "learner": {"lr": 1e-4}}))
    cfg = load_config(path, ["learner.lr=2e-5", "rollout.group_size=8", "games=[2048, avalon]",
                             "adapters.act.r=8", "game.mario.env_kwargs.frames_per_action=9"])
    assert cfg.learner.lr == 2e-5
    assert cfg.rollout.group_size == 8
    assert cfg.games == ["2048", "avalon"]
    assert cfg.adapters["act"].r == 8 and cfg.adapters["retrieve"].r == 16
    assert cfg.game["mario"].env_kwargs == {"frames_per_action": 9}
    assert cfg.game["tetris"].reward_scale == CoplayConfig().game["tetris"].reward_scale


def test_unknown_override_key_names_key_and_choices():
    with pytest.raises(ConfigError) as err:
        load_config(overrides=["learner.lrr=1"])
    assert "learner.lrr" in str(err.value) and "'lrr'" in str(err.value) and "lr" in str(err.value)


def test_unknown_yaml_key_is_rejected(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("learner:\n  zero_stag: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "learner.zero_stag" in str(err.value) and "unknown key" in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("learner.zero_stage=4", "learner.zero_stage"),
        ("learner.lr=-1", "greater than 0"),
        ("games=[chess]", "chess"),
        ("learner.loss_agg=sum", "token-mean"),
        ("seeds.eval.start=10", "overlaps"),
        ("learner.adapter_lr={propose: 1e-4}", "propose"),
        ("sft.adapter_min_batches={act: -1}", ">= 0"),
        ("sft.adapter_min_batches={actor: 10}", "actor"),
        ("engine.backend=tgi", "vllm"),
    ],
)
def test_bad_values_name_key_value_and_allowed(override, fragment):
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[override])
    assert fragment in str(err.value)


def test_malformed_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(overrides=["learner.lr"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_sft_min_batches_per_adapter_override_the_common_floor():
    cfg = load_config(overrides=["sft.min_batches_per_adapter=24", "sft.adapter_min_batches={contract: 150}"])
    assert cfg.sft.min_batches() == {"act": 24, "retrieve": 24, "segment": 24, "contract": 150, "curator": 24}
