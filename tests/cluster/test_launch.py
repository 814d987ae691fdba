"""`launch/`: the Ray job entry point, its runtime env and the per-game configs (issue 9 part 1).

Every config must load; the tiny ones must stay on CPU with short horizons; the real ones must use a real
model on GPUs; `launch/train.py` must resolve a config exactly as `coplay config show` does.
"""

from __future__ import annotations

import importlib.util
import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coplay.cli import main as coplay_main
from coplay.config import GAME_KEYS, CoplayConfig, load_config

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "launch" / "configs"
TRAIN_PY = REPO / "launch" / "train.py"
GAME_CONFIGS = [CONFIGS / f"{game}.yaml" for game in GAME_KEYS]
TINY_CONFIGS = [CONFIGS / f"tiny-{game}.yaml" for game in GAME_KEYS]
SELFPLAY_CONFIGS = [CONFIGS / "diplomacy-selfplay.yaml", CONFIGS / "avalon-selfplay.yaml"]
ALL_CONFIGS = GAME_CONFIGS + TINY_CONFIGS + SELFPLAY_CONFIGS
# `coplay demo` and `python -m benchmarks.learning` (which extends the demo's): their own local Ray
LOCAL_CONFIGS = [CONFIGS / "cpu-2048-learning.yaml", CONFIGS / "demo-2048.yaml",
                 CONFIGS / "demo-2048-smollm2.yaml", CONFIGS / "demo-candy_crush-smollm2.yaml",
                 CONFIGS / "tiny-2048-maintenance.yaml"]
# `python -m benchmarks.coevolution` (the ablation, docs/ablations.md): SmolLM2 on the local machine
COEVOLUTION_CONFIGS = [CONFIGS / "coevolution-2048.yaml", CONFIGS / "coevolution-tetris.yaml",
                       CONFIGS / "coevolution-candy_crush.yaml"]
# `python -m benchmarks.skill_sp` (docs/curriculum.md): SmolLM2 on the local machine
CURRICULUM_CONFIGS = [CONFIGS / "curriculum-2048-smollm2.yaml",
                      CONFIGS / "curriculum-candy_crush-smollm2.yaml"]
# learning runs (does the policy beat its cold start, issue 36): SmolLM2 on the local machine, float32
LEARNING_CONFIGS = [CONFIGS / "learning-candy_crush.yaml", CONFIGS / "learning-candy_crush-clears.yaml",
                    CONFIGS / "learning-candy_crush-from-base.yaml",
                    CONFIGS / "learning-candy_crush-from-base-mini4.yaml",
                    CONFIGS / "learning-candy_crush-from-base-board.yaml",
                    CONFIGS / "learning-2048-from-base-merges.yaml"]
# the episode-grouping arm beside a state-grouping learning config (which grouping learns faster, issue 36)
GROUPING_ARMS = {CONFIGS / "learning-candy_crush-from-base-board-episode.yaml":
                 CONFIGS / "learning-candy_crush-from-base-board.yaml",
                 CONFIGS / "learning-2048-from-base-merges-episode.yaml":
                 CONFIGS / "learning-2048-from-base-merges.yaml"}


def _load_train_module():
    spec = importlib.util.spec_from_file_location("launch_train", TRAIN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train_py = _load_train_module()


def test_every_game_has_a_real_and_a_tiny_config_and_nothing_else_is_there():
    listed = (ALL_CONFIGS + LOCAL_CONFIGS + COEVOLUTION_CONFIGS + CURRICULUM_CONFIGS + LEARNING_CONFIGS
              + list(GROUPING_ARMS))
    assert sorted(CONFIGS.glob("*.yaml")) == sorted(listed)


@pytest.mark.parametrize("path", LEARNING_CONFIGS, ids=lambda p: p.stem)
def test_the_learning_configs_train_grpo_alone_on_same_state_groups_on_a_separating_protocol(path):
    from coplay.config import require_trainable

    cfg = load_config(path)
    require_trainable(cfg)
    assert cfg.cluster.address is None and cfg.model.name == "smollm2-135m-instruct"
    assert cfg.ablation.variant == "grpo_no_bank" and cfg.rollout.grouping == "state"
    # a protocol benchmarks.ruler found to separate the bots on 32 seeds: Candy Crush at 6 moves, 2048 at 50
    assert len(cfg.games) == 1 and cfg.eval.episodes >= 32
    assert cfg.eval.max_steps == {"candy_crush": 6, "2048": 50}[cfg.games[0]]
    assert cfg.eval.at_start and cfg.loop.iterations % cfg.eval.every == 0
    assert cfg.model.dtype == cfg.engine.dtype == "float32" and cfg.learner.bf16 is False
    # without a cold start only the constraint gives the base model the answer format, and its free
    # INTENTION text would eat the act token budget
    assert cfg.sft.enabled or (cfg.rollout.constrained_actions and cfg.rollout.intention_chars == 0)


@pytest.mark.parametrize("arm", list(GROUPING_ARMS), ids=lambda p: p.stem)
def test_a_grouping_arm_differs_from_its_state_arm_only_in_how_groups_are_formed(arm):
    from coplay.config import require_trainable

    episode, state = load_config(arm), load_config(GROUPING_ARMS[arm])
    require_trainable(episode)
    assert episode.rollout.grouping == "episode" and state.rollout.grouping == "state"
    # about the same trained decisions per iteration: G episodes of max_steps moves per start seed against
    # G answers per anchor (in state grouping max_steps is the untrained trunks' length)
    trained = episode.rollout.start_states * episode.rollout.group_size * episode.rollout.max_steps
    assert 0.8 <= trained / (state.rollout.start_states * state.rollout.group_size) <= 1.2
    assert episode.eval.max_steps == state.eval.max_steps  # evaluated on the same horizon
    mine, theirs = episode.model_dump(), state.model_dump()
    for dump in (mine, theirs):
        dump.pop("run")
        for key in ("grouping", "start_states", "group_size", "max_steps"):
            dump["rollout"].pop(key)
    assert mine == theirs


def test_the_curriculum_config_runs_the_curriculum_on_smollm2_with_constrained_tasks():
    cfg = load_config(CURRICULUM_CONFIGS[0])
    assert cfg.curriculum.enabled and cfg.curriculum.constrained_tasks and cfg.rollout.constrained_actions
    assert cfg.model.name == "smollm2-135m-instruct" and cfg.loop.iterations >= 5  # the 5 iterations
    assert "propose" in cfg.active_adapters


def test_the_candy_curriculum_config_measures_the_solver_on_the_demo_ruler():
    """The Candy Crush Skill-SP arms evaluate the cold start and the last iteration on the demo's protocol
    (whose bots separate) and probe both; task bounds stay within the game's moves."""
    from coplay.config import require_trainable

    cfg, demo = load_config(CURRICULUM_CONFIGS[1]), load_config(CONFIGS / "demo-candy_crush-smollm2.yaml")
    require_trainable(cfg)
    assert cfg.curriculum.enabled and cfg.curriculum.constrained_tasks and "propose" in cfg.active_adapters
    assert cfg.eval.at_start and cfg.loop.iterations % cfg.eval.every == 0
    assert cfg.probe.every and cfg.loop.iterations % cfg.probe.every == 0
    assert (cfg.eval.episodes, cfg.eval.max_steps, cfg.eval.temperature, cfg.probe.positions) == (
        demo.eval.episodes, demo.eval.max_steps, demo.eval.temperature, demo.probe.positions)
    assert cfg.curriculum.max_bound <= cfg.game["candy_crush"].env_kwargs["max_moves"]


@pytest.mark.parametrize("path", COEVOLUTION_CONFIGS, ids=lambda p: p.stem)
def test_the_ablation_configs_run_locally_with_smollm2_and_evaluate_the_final_iteration(path):
    from coplay.config import require_trainable

    cfg = load_config(path)
    require_trainable(cfg)
    raw = yaml.safe_load(path.read_text())
    assert cfg.cluster.address is None and cfg.model.name == "smollm2-135m-instruct"
    assert cfg.ablation.variant == "full"  # benchmarks.coevolution sets the variant per run
    # the seeds are written down before any run (coevolution-tetris extends coevolution-2048)
    assert {"run", "train", "eval"} <= set(yaml.safe_load(COEVOLUTION_CONFIGS[0].read_text())["seeds"])
    assert cfg.games == [path.stem.split("-", 1)[1]] and cfg.eval.at_start
    assert cfg.loop.iterations % cfg.eval.every == 0  # benchmarks.coevolution compares final evaluations
    assert "minutes" in path.read_text() and raw["run"]["name"] == path.stem


def test_the_learning_evidence_config_runs_locally_on_cpu_with_seeds_fixed_in_it():
    path = LOCAL_CONFIGS[0]
    cfg = load_config(path)
    raw = yaml.safe_load(path.read_text())
    assert cfg.cluster.address is None and cfg.model.name == "tiny" and cfg.games == ["2048"]
    assert {"run", "train", "eval"} <= set(raw["seeds"]) and cfg.eval.at_start and cfg.sft.enabled


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: p.stem)
def test_every_launch_config_loads_and_connects_to_the_cluster_it_runs_in(path):
    cfg = load_config(path)
    # the tiny configs are also what `coplay train` is pointed at (README): a local run of them must start
    # its own Ray, never join one that happens to be up; launch/train.py points them at the job's cluster
    assert cfg.cluster.address == (None if path in TINY_CONFIGS else "auto")
    assert train_py.resolve_config(str(path), []).cluster.address == "auto"
    assert cfg.model.trust_remote_code is False
    assert "trust_remote_code: true" not in path.read_text().lower()


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: p.stem)
def test_every_game_env_accepts_the_configs_env_kwargs(path):
    from coplay_envs.registry import resolve, spec

    cfg = load_config(path)
    for game in cfg.games:
        env_class = resolve(spec(game).env)
        inspect.signature(env_class).bind(**cfg.game[game].env_kwargs)  # raises TypeError on a wrong key


@pytest.mark.parametrize("path", TINY_CONFIGS, ids=lambda p: p.stem)
def test_tiny_configs_keep_to_cpu_with_the_local_tiny_model_and_short_horizons(path):
    cfg = load_config(path)
    assert cfg.model.name == "tiny" and cfg.model.dtype == "float32"
    assert cfg.engine.backend == "hf" and cfg.learner.backend == "torch" and cfg.learner.bf16 is False
    assert cfg.cluster.rollout_worker_gpus == 0 and cfg.cluster.learner_rank_gpus == 0
    assert cfg.rollout.workers == 1 and cfg.learner.ranks == 1
    assert cfg.rollout.max_steps is not None and cfg.rollout.max_steps <= 40
    assert cfg.loop.iterations <= 2


@pytest.mark.parametrize("path", GAME_CONFIGS + SELFPLAY_CONFIGS, ids=lambda p: p.stem)
def test_real_configs_train_a_qwen3_model_with_vllm_and_deepspeed_zero2_on_gpus(path):
    cfg = load_config(path)
    assert cfg.model.name.startswith("Qwen/Qwen3-")
    assert cfg.engine.backend == "vllm" and cfg.learner.backend == "deepspeed" and cfg.learner.zero_stage == 2
    assert cfg.cluster.rollout_worker_gpus == 1 and cfg.cluster.learner_rank_gpus == 1
    assert cfg.engine.max_lora_rank >= max(spec.r for spec in cfg.adapters.values())
    assert Path(cfg.run.out_dir).is_absolute()


@pytest.mark.parametrize("path", GAME_CONFIGS + SELFPLAY_CONFIGS, ids=lambda p: p.stem)
def test_real_configs_pass_the_learners_memory_check_on_the_40_gib_a100s_of_the_ray_up_cluster(path):
    """The estimate every rank checks at start (`coplay.learn.memory`), with Qwen3-8B's published
    dimensions (no download), fits the p4d.24xlarge GPUs of `cluster/ray-up.yaml`."""
    from coplay.learn.memory import GIB, ModelDims, check_memory, estimate_memory

    cfg = load_config(path)
    assert cfg.model.name == "Qwen/Qwen3-8B"
    qwen3_8b = ModelDims(hidden=4096, layers=36, intermediate=12288, heads=32, kv_heads=8, head_dim=128,
                         vocab=151936, tied_embeddings=False, qk_norm=True)
    check_memory(estimate_memory(cfg, qwen3_8b, cfg.learner.ranks, on_gpu=True), 40 * GIB, "an A100 40GB")


@pytest.mark.parametrize("path", SELFPLAY_CONFIGS, ids=lambda p: p.stem)
def test_selfplay_configs_are_cluster_scale_with_an_opponent_pool(path):
    cfg = load_config(path)
    pool = cfg.rollout.opponents
    assert cfg.rollout.workers >= 16 and cfg.learner.ranks >= 4
    assert pool.current > 0 and pool.frozen > 0 and pool.expert > 0
    assert cfg.engine.max_loras >= 2 * len(cfg.active_adapters) + 4, "room for frozen opponents' adapters"


@pytest.mark.parametrize("path", SELFPLAY_CONFIGS, ids=lambda p: p.stem)
def test_selfplay_configs_keep_every_worker_busy_and_every_role_scheduled(path):
    from coplay.driver.lineups import role_weights

    cfg = load_config(path)
    rollout, game = cfg.rollout, cfg.games[0]
    assert rollout.start_states % rollout.workers == 0, "whole groups split evenly over the workers"
    per_worker = rollout.start_states // rollout.workers * rollout.group_size
    assert per_worker == rollout.concurrent_episodes, "each worker plays all its games at once, no more"
    assert rollout.start_states % sum(role_weights(cfg, game).values()) == 0, "every role in every iteration"


def test_train_py_help_works_without_a_cluster():
    result = subprocess.run([sys.executable, str(TRAIN_PY), "--help"], capture_output=True, text=True,
                            timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout and "overrides" in result.stdout


@pytest.mark.parametrize("path", [CONFIGS / "tiny-2048.yaml", CONFIGS / "diplomacy-selfplay.yaml"],
                         ids=lambda p: p.stem)
def test_train_py_resolves_the_same_config_as_coplay_config_show(path, capsys):
    overrides = ["rollout.workers=3", "learner.lr=2e-5", "run.out_dir=/tmp/coplay-runs"]
    assert coplay_main(["config", "show", "--config", str(path), *overrides]) == 0
    shown = capsys.readouterr().out
    assert train_py.main(["--print-config", "--config", str(path), *overrides]) == 0
    printed = capsys.readouterr().out
    # the same config, except that the job joins the cluster it runs in where the file names no address
    assert printed == shown.replace("  address: null\n", "  address: auto\n")
    resolved = CoplayConfig.model_validate(yaml.safe_load(printed))
    assert resolved.rollout.workers == 3 and resolved.learner.lr == 2e-5


def test_train_py_connects_to_the_running_cluster_when_the_config_names_none(tmp_path):
    bare = tmp_path / "bare.yaml"
    bare.write_text("games: [tetris]\n")
    assert load_config(bare).cluster.address is None
    assert train_py.resolve_config(str(bare), []).cluster.address == "auto"
    named = train_py.resolve_config(str(bare), ["cluster.address=ray://head:10001"])
    assert named.cluster.address == "ray://head:10001"


def test_train_py_rejects_bad_overrides_with_the_key_and_exit_code_2(capsys):
    assert train_py.main(["--config", str(CONFIGS / "tiny-2048.yaml"), "rollout.wokers=3"]) == 2
    assert "rollout.wokers" in capsys.readouterr().err


def test_train_py_refuses_a_relative_run_folder_before_starting_anything(capsys):
    assert train_py.main(["--config", str(CONFIGS / "tiny-2048.yaml"), "run.out_dir=runs"]) == 2
    err = capsys.readouterr().err
    assert "run.out_dir='runs' is relative" in err and "absolute" in err


def _copy_envs(tmp_path: Path) -> Path:
    working_dir = tmp_path / "working_dir"
    shutil.copytree(REPO / "envs", working_dir / "envs", ignore=shutil.ignore_patterns("__pycache__"))
    return working_dir


def test_an_uploaded_envs_folder_equal_to_the_installed_games_is_accepted(tmp_path):
    train_py.check_envs_match_working_dir(_copy_envs(tmp_path))
    train_py.check_envs_match_working_dir(REPO)


def test_an_uploaded_envs_folder_that_differs_from_the_installed_games_is_refused(tmp_path):
    working_dir = _copy_envs(tmp_path)
    rules = working_dir / "envs" / "game2048" / "env.py"
    rules.write_text(rules.read_text() + "\n# a local edit\n")
    with pytest.raises(train_py.LaunchError, match=r"game2048/env\.py.*rebuild the image"):
        train_py.check_envs_match_working_dir(working_dir)


def test_runtime_env_uploads_the_repository_without_local_state_or_packages():
    runtime_env = yaml.safe_load((REPO / "launch" / "runtime_env.yaml").read_text())
    assert runtime_env["working_dir"] == "."
    assert {".venv/", "runs/", ".git/"} <= set(runtime_env["excludes"])
    assert "pip" not in runtime_env and "conda" not in runtime_env and "uv" not in runtime_env
    assert "DS_ACCELERATOR" not in runtime_env.get("env_vars", {})


def test_runtime_env_is_accepted_by_ray():
    from ray.runtime_env import RuntimeEnv

    runtime_env = yaml.safe_load((REPO / "launch" / "runtime_env.yaml").read_text())
    assert RuntimeEnv(**runtime_env)["working_dir"] == "."


def test_launch_readme_gives_the_submit_command_the_token_and_how_to_scale():
    readme = (REPO / "launch" / "README.md").read_text()
    assert "ray job submit" in readme and "--runtime-env launch/runtime_env.yaml" in readme
    assert "RAY_AUTH_MODE=token" in readme
    assert "rollout.workers=" in readme
    for path in ALL_CONFIGS:
        assert f"launch/configs/{path.name}" in readme, f"launch/README.md does not mention {path.name}"
