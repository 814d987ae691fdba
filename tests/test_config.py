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
    assert set(cfg.adapters) == {"act", "retrieve", "segment", "contract", "curator", "propose"}
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
    assert cfg.rewards.game_scale["tetris"] == CoplayConfig().rewards.game_scale["tetris"]


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
        ("learner.adapter_lr={planner: 1e-4}", "planner"),
        ("sft.adapter_min_batches={act: -1}", "greater than or equal to 0"),
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
    assert cfg.sft.min_batches() == {"act": 24, "retrieve": 24, "segment": 24, "contract": 150, "curator": 24,
                                     "propose": 24}


def test_propose_is_a_known_adapter_but_active_only_with_the_curriculum():
    cfg = CoplayConfig()
    assert "propose" in cfg.adapters and cfg.sampling.max_tokens["propose"] == 256
    assert cfg.learner.adapter_lr.get("propose", cfg.learner.lr) == cfg.learner.lr
    assert cfg.curriculum.enabled is False
    assert cfg.active_adapters == ("act", "retrieve", "segment", "contract", "curator")
    on = load_config(overrides=["curriculum.enabled=true", "adapters.propose.r=8"])
    assert on.active_adapters[-1] == "propose" and on.adapters["propose"].r == 8
    from coplay.driver.serving import frozen_slots
    assert frozen_slots(cfg) - frozen_slots(on) == 2  # its current and previous version are served too


def test_per_adapter_mappings_reject_unknown_keys_naming_the_allowed_ones(tmp_path):
    allowed = "act, contract, curator, propose, retrieve, segment"
    with pytest.raises(ConfigError, match=f"unknown key 'actt'; allowed here: {allowed}"):
        load_config(overrides=["sampling.max_tokens.actt=10"])
    path = tmp_path / "typo.yaml"
    path.write_text("learner:\n  adapter_lr: {currator: 1.0e-4}\n")
    with pytest.raises(ConfigError,
                       match="learner.adapter_lr.currator: unknown key 'currator'.*act, retrieve"):
        load_config(path)
    assert (load_config(overrides=["sft.adapter_min_batches.contract=150"]).sft.min_batches()["contract"]
            == 150)


def test_a_dotted_mapping_override_merges_like_a_yaml_file(tmp_path):
    defaults = dict(CoplayConfig().sampling.max_tokens)
    for override in ("sampling.max_tokens.act=10", "sampling.max_tokens={act: 10}"):
        assert dict(load_config(overrides=[override]).sampling.max_tokens) == {**defaults, "act": 10}
    path = tmp_path / "c.yaml"
    path.write_text("sampling:\n  max_tokens: {act: 10}\n")
    assert dict(load_config(path).sampling.max_tokens) == {**defaults, "act": 10}
    lr = load_config(overrides=["learner.adapter_lr={curator: 1e-4}"]).learner
    assert lr.adapter_lr.get("curator", lr.lr) == 1e-4 and lr.adapter_lr.get("act", lr.lr) == lr.lr


def test_a_file_extends_another_and_changes_only_what_it_sets(tmp_path):
    (tmp_path / "base.yaml").write_text("loop: {iterations: 3, staleness: 0}\nrollout: {group_size: 2}\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nloop: {iterations: 7}\n")
    cfg = load_config(tmp_path / "child.yaml")
    assert (cfg.loop.iterations, cfg.loop.staleness, cfg.rollout.group_size) == (7, 0, 2)
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "a.yaml")


def test_the_demo_config_is_the_base_of_the_learning_config():
    demo = load_config("launch/configs/demo-2048.yaml")
    learning = load_config("launch/configs/cpu-2048-learning.yaml")
    assert demo.model.name == learning.model.name == "tiny" and demo.games == learning.games == ["2048"]
    assert learning.rollout.max_steps == 40 and learning.sft.adapter_min_batches.contract == 150


def test_config_game_facts_agree_with_the_games_package():
    import subprocess
    import sys

    code = "import sys, coplay.config; sys.exit(int('coplay_envs' in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0  # config never imports the games
    import coplay_envs
    from coplay.config import GAME_KEYS

    assert GAME_KEYS == coplay_envs.GAME_KEYS
    assert set(CoplayConfig().game) == set(coplay_envs.GAME_KEYS)
    assert set(CoplayConfig().skill_bank.segmentation.duration_prior) == set(coplay_envs.GAME_KEYS)


def test_the_smollm2_demo_config_runs_the_demo_on_the_catalogue_model_with_top_layer_lora():
    demo = load_config("launch/configs/demo-2048.yaml")
    real = load_config("launch/configs/demo-2048-smollm2.yaml")
    assert real.model.name == "smollm2-135m-instruct" and demo.model.name == "tiny"
    assert {spec.top_layers for spec in real.adapters.values()} == {8}
    assert real.games == demo.games and real.learner.backend == demo.learner.backend


def test_make_demo_runs_the_real_model_and_the_tiny_model_is_one_config_away():
    from coplay.driver.demo import DEMO_CONFIG

    assert load_config(DEMO_CONFIG).model.name == "smollm2-135m-instruct"
    tiny = DEMO_CONFIG.with_name("demo-2048.yaml")
    assert load_config(tiny).model.name == "tiny"


def test_skipping_zero_advantage_samples_is_refused_with_a_kl_term():
    assert load_config(overrides=["learner.skip_zero_advantage=true"]).learner.skip_zero_advantage
    with pytest.raises(ConfigError, match="kl_beta"):
        load_config(overrides=["learner.skip_zero_advantage=true", "learner.kl_beta=0.01"])
