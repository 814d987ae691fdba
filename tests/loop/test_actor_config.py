"""Issue 41 item 3: a run's restartable actors get no constructor argument that Ray keeps in its object store.
Ray logs an error line ("constructor arguments in the object store and max_restarts > 0", once per driver
process) for such an argument, since it can be lost before a restart (Ray issue 53727). Two kinds drew it:
the config put in the object store, and actor handles (the ArtifactStore's, handed to the rollout workers
and the bank actor; the rollout workers', handed to the bank actor). Now the config travels inline and the
actors take one another by name. Each case runs in a fresh process with its own local Ray, since Ray says it
only once per process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINE = "constructor arguments in the object store"

SCRIPT = """
import sys, time
import ray
from coplay.actors.artifact_store import ArtifactStore
from coplay.actors.skill_bank_actor import SkillBankActor
from coplay.config import ClusterConfig, load_config
from coplay.security import ray_init_kwargs

ray.init(**ray_init_kwargs(ClusterConfig(num_cpus=2)))
config = load_config("launch/configs/demo-2048.yaml", []).model_dump(mode="json")
store = ArtifactStore.options(name="run.store").remote(None)
ray.get(store.ping.remote())  # as System starts them: the store first, then the actors that name it
case = sys.argv[1]
if case == "config in the object store":
    config = ray.put(config)
named = store if case == "the store's handle" else "run.store"
bank = SkillBankActor.options(num_cpus=0, max_restarts=3, max_task_retries=0).remote(config, named,
                                                                                     ["run.worker-0"])
assert ray.get(bank.submit.remote(1, b"shard")) == 1
ray.kill(bank, no_restart=False)  # a restart reads the config again (and has an empty queue)
deadline = time.monotonic() + 60
while True:  # the old actor may answer (2 shards) before the kill lands; the new one starts empty
    try:
        if ray.get(bank.submit.remote(1, b"shard"), timeout=30) == 1:
            break
    except ray.exceptions.RayActorError:
        pass
    assert time.monotonic() < deadline, "the bank actor did not come back"
    time.sleep(1.0)
time.sleep(1.0)
print("restarted", flush=True)
"""


def _stderr_of(case: str) -> str:
    done = subprocess.run([sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0 and "restarted" in done.stdout, done.stderr[-3000:]
    return done.stderr


def test_the_bank_actor_starts_without_rays_object_store_line_and_restarts_with_its_config():
    assert LINE not in _stderr_of("as a run starts it")


@pytest.mark.parametrize("case", ["config in the object store", "the store's handle"])
def test_either_old_argument_draws_rays_line(case):
    """The causes, shown: either of the old arguments brings the line back."""
    assert LINE in _stderr_of(case)
