"""`cluster/`: the `ray up` YAML, the KubeRay manifests, the Slurm script and the image (issue 9 part 2).

The `ray up` YAML must pass the schema inside the installed `ray` package (and Ray's own config preparation);
the KubeRay manifests must carry the fields KubeRay requires; every shell script must pass `shellcheck`; every
entry point and runtime env must point at `launch/`.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from coplay.config import load_config

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster"
RAY_UP = CLUSTER / "ray-up.yaml"
RAYCLUSTER = CLUSTER / "kuberay" / "raycluster.yaml"
RAYJOB = CLUSTER / "kuberay" / "rayjob.yaml"
SBATCH = CLUSTER / "slurm" / "coplay.sbatch"
DOCKERFILE = CLUSTER / "docker" / "Dockerfile"
RAY_VERSION = "2.60.0"
SHELLCHECK_MISSING = "shellcheck is not installed (Debian: apt-get install -y shellcheck)"


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


def _launch_command(tokens: list[str]) -> tuple[Path, list[str]]:
    """`python launch/train.py --config C [overrides]` -> (C, overrides); asserts the shape."""
    assert tokens[:2] == ["python", "launch/train.py"], tokens
    assert tokens[2] == "--config", tokens
    return REPO / tokens[3], tokens[4:]


# ------------------------------------------------------------------------------------------ ray up


def test_ray_up_yaml_validates_against_the_schema_shipped_in_ray():
    import jsonschema
    import ray

    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    jsonschema.validate(_yaml(RAY_UP), schema)


def test_ray_up_yaml_survives_rays_own_preparation_and_validation():
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(_yaml(RAY_UP))
    validate_config(prepared)
    head, workers = prepared["head_node_type"], prepared["available_node_types"]
    gpu_groups = [name for name, node in workers.items()
                  if name != head and node.get("min_workers", 0) >= 1]
    assert gpu_groups, "a worker group with GPUs that starts with the cluster"


def test_ray_up_installs_coplay_gpu_binds_the_dashboard_to_loopback_and_turns_token_auth_on():
    cfg = _yaml(RAY_UP)
    assert any("coplay[gpu]" in command for command in cfg["setup_commands"])
    assert cfg["docker"]["image"].startswith(f"rayproject/ray:{RAY_VERSION}-py311")
    head = " ".join(cfg["head_start_ray_commands"])
    assert "--head" in head and "--dashboard-host=127.0.0.1" in head
    for command in (head, " ".join(cfg["worker_start_ray_commands"])):
        assert "RAY_AUTH_MODE=token" in command
    assert "~/.ray/auth_token" in cfg["file_mounts"].values()


def _shellcheck(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["shellcheck", "--shell=bash", "--severity=style", str(script)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason=SHELLCHECK_MISSING)
def test_ray_up_commands_pass_shellcheck(tmp_path):
    cfg = _yaml(RAY_UP)
    keys = ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
            "head_start_ray_commands", "worker_start_ray_commands")
    commands = [c for key in keys for c in cfg.get(key, [])]
    script = tmp_path / "ray-up-commands.sh"
    # RAY_HEAD_IP is exported by the cluster launcher before the worker commands run.
    script.write_text("#!/bin/bash\nset -e\n: \"${RAY_HEAD_IP:?}\"\n" + "\n".join(commands) + "\n")
    result = _shellcheck(script)
    assert result.returncode == 0, result.stdout + result.stderr


# ------------------------------------------------------------------------------------------ KubeRay


def _check_pod_template(template: dict, where: str) -> None:
    containers = template["spec"]["containers"]
    assert containers and all(c.get("name") and c.get("image") for c in containers), where


def test_raycluster_carries_the_fields_kuberay_requires():
    manifest = _yaml(RAYCLUSTER)
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayCluster"
    assert manifest["metadata"]["name"]
    _check_cluster_spec(manifest["spec"], "RayCluster.spec")


def _check_cluster_spec(spec: dict, where: str) -> None:
    assert spec["rayVersion"] == RAY_VERSION, where
    assert spec["authOptions"]["mode"] == "token", f"{where}: Ray token auth stays on"
    head = spec["headGroupSpec"]
    assert isinstance(head["rayStartParams"], dict), where
    _check_pod_template(head["template"], f"{where}.headGroupSpec")
    assert spec["workerGroupSpecs"], where
    for group in spec["workerGroupSpecs"]:
        for field in ("groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams", "template"):
            assert field in group, f"{where}.workerGroupSpecs: {field} missing"
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], where
        _check_pod_template(group["template"], f"{where}.workerGroupSpecs[{group['groupName']}]")
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) >= 1, f"{where}: the worker group has GPUs"


def test_rayjob_carries_the_fields_kuberay_requires_and_the_same_cluster_spec():
    job = _yaml(RAYJOB)
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob" and job["metadata"]["name"]
    _check_cluster_spec(job["spec"]["rayClusterSpec"], "RayJob.spec.rayClusterSpec")
    assert job["spec"]["rayClusterSpec"] == _yaml(RAYCLUSTER)["spec"], \
        "rayjob.yaml drifted from raycluster.yaml"
    assert job["spec"]["shutdownAfterJobFinishes"] is True


def test_rayjob_entrypoint_runs_launch_train_py_with_a_launch_config():
    job = _yaml(RAYJOB)["spec"]
    config, overrides = _launch_command(shlex.split(job["entrypoint"]))
    assert config.parent == REPO / "launch" / "configs" and config.is_file()
    cfg = load_config(config, overrides)
    assert cfg.run.out_dir.startswith("/mnt/coplay/"), "the run folder goes to the mounted coplay-runs volume"
    mounts = {m["mountPath"] for m in
              job["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert "/mnt/coplay" in mounts


def test_rayjob_runtime_env_is_launch_runtime_env_yaml_rooted_at_the_images_repository():
    job_env = yaml.safe_load(_yaml(RAYJOB)["spec"]["runtimeEnvYAML"])
    launch_env = _yaml(REPO / "launch" / "runtime_env.yaml")
    workdir = re.search(r"^WORKDIR\s+(\S+)", DOCKERFILE.read_text(), re.MULTILINE).group(1)
    assert job_env["working_dir"] == workdir
    assert {k: v for k, v in job_env.items() if k != "working_dir"} == \
        {k: v for k, v in launch_env.items() if k != "working_dir"}


def test_the_image_installs_coplay_gpu_on_the_ray_version_the_manifests_name():
    text = DOCKERFILE.read_text()
    assert re.search(rf"^FROM rayproject/ray:{re.escape(RAY_VERSION)}-py311-gpu$", text, re.MULTILINE)
    assert '".[gpu]"' in text
    ignored = (CLUSTER / "docker" / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", "runs", ".git"} <= set(ignored)


def test_kubernetes_manifests_parse_as_single_documents():
    for path in sorted((CLUSTER / "kuberay").glob("*.yaml")):
        documents = list(yaml.safe_load_all(path.read_text()))
        assert len(documents) == 1 and documents[0]["apiVersion"] and documents[0]["kind"], path.name


# ------------------------------------------------------------------------------------------ Slurm


def _repository_files() -> list[Path]:
    """Tracked and untracked-but-not-ignored files (what a commit would hold); without git, the folders that
    hold scripts."""
    listing = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    if listing.returncode == 0:
        return [REPO / line for line in listing.stdout.splitlines() if line]
    return [p for folder in ("cluster", "launch", ".ci") for p in (REPO / folder).rglob("*")]


def _shell_scripts() -> list[Path]:
    """Every shell script of the repository: by suffix, or by a shell shebang."""
    scripts = []
    for path in sorted(set(_repository_files())):
        if not path.is_file():
            continue
        if (path.suffix in {".sh", ".bash", ".sbatch"}
                or re.match(rb"#!\S*(/|env )(ba)?sh\b", path.read_bytes()[:40])):
            scripts.append(path)
    return scripts


def test_the_slurm_script_is_found_among_the_shell_scripts():
    assert SBATCH in _shell_scripts()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason=SHELLCHECK_MISSING)
@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: p.name)
def test_every_shell_script_passes_shellcheck(script):
    result = _shellcheck(script)
    assert result.returncode == 0, result.stdout + result.stderr


def test_slurm_script_starts_ray_with_srun_on_loopback_dashboard_and_submits_with_token_auth():
    text = SBATCH.read_text()
    assert re.search(r"srun .*\\\n\s+ray start --head", text), "the head starts through srun"
    assert re.search(r"srun .*\\\n\s+ray start --block --address", text), "workers start through srun"
    assert "dashboard_host=${COPLAY_DASHBOARD_HOST:-127.0.0.1}" in text
    assert '--dashboard-host="$dashboard_host"' in text
    assert "export RAY_AUTH_MODE=token" in text
    assert "--runtime-env=launch/runtime_env.yaml" in text
    submit = text[text.index("ray job submit"):]
    assert re.search(r"-- python launch/train.py --config \"\$config\"", submit)


def test_slurm_script_refuses_to_run_without_a_config(tmp_path):
    result = subprocess.run(["bash", str(SBATCH)], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert result.returncode == 2 and "usage: sbatch cluster/slurm/coplay.sbatch CONFIG.yaml" in result.stderr
