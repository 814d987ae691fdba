"""Records that cross process boundaries, and the msgpack codec for trajectory shards.

A shard file is: MAGIC (8 bytes) | schema version (u16) | payload length (u64) | CRC32 of payload (u32) |
payload (msgpack). Every corruption a disk or a network can produce — truncation at any offset, flipped
bits, a file from another schema version — is detected and reported with the file's name; the other shards
of a folder still load. Only msgpack and the standard library: no torch, no ray, never pickle.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import msgpack

SCHEMA_VERSION = 1
SHARD_MAGIC = b"COPLAYSH"
_HEADER = struct.Struct("<8sHQI")  # magic, schema version, payload length, crc32


class ShardError(ValueError):
    """A shard that cannot be trusted: the message names the file and what is wrong."""


@dataclass
class Sample:
    """One model call, exactly as sampled (docs/rewards.md): what GRPO trains on.

    `logprobs[i]` is the behaviour log-prob of `completion_ids[i]` under the sampling distribution at
    `temperature`. `reward` is filled later (None until then). `adapter_version` 0 is the untrained adapter.
    """

    adapter: str
    adapter_version: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    group_id: str
    temperature: float = 1.0
    reward: float | None = None
    completion_text: str = ""
    finish_reason: str = ""
    sample_id: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Step:
    """One environment step of one seat: what the agent saw, did, and what followed.

    `sample_ids` point into the trajectory's samples (the `retrieve` and `act` calls of this step).
    """

    t: int
    observation: str
    action: str
    reward: float
    score: float
    invalid: int = 0
    intention: str = ""
    skill_id: str | None = None
    skill_event: str = ""  # "", "success", "abort", "switch"
    features_before: dict[str, float | int | bool] = field(default_factory=dict)
    features_after: dict[str, float | int | bool] = field(default_factory=dict)
    sample_ids: list[str] = field(default_factory=list)
    parse_error: str = ""
    # `info["state"]` the decision was made in (JSON-able; for infrastructure only, never shown to a policy):
    # recorded on every step of a state-grouping trunk (the next iteration's anchors are drawn from them)
    # and on a branch's first step (its anchor); None elsewhere, so other shards stay small
    state: dict[str, Any] | None = None


@dataclass
class Trajectory:
    """One seat's episode: the unit the skill bank segments and GRPO groups (by start seed and role)."""

    episode_id: str
    game: str
    seat: str
    role: str
    seed: int
    steps: list[Step] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    score: float = 0.0
    adapter_versions: dict[str, int] = field(default_factory=dict)
    bank_version: int = 0
    iteration: int = 0
    terminated: bool = False
    truncated: bool = False
    # model | current | expert | random | frozen@<adapter>@v<n> | openai | model+<continuation> (a branch)
    policy: str = "model"
    group: str = ""  # GRPO group of self-play episodes sharing start state and line-up ("" = by seed)
    # what the episode is in GRPO (`rollout.grouping`, docs/rewards.md): `episode` (a group of whole
    # episodes compared per step index), `trunk` (state grouping: a whole episode of the policy that supplies
    # anchor states; its `act` samples do not train) or `branch` (state grouping: the policy's one decision
    # at an anchor, then the continuation policy; only the `act` sample of step 0 trains)
    kind: str = "episode"


@dataclass
class Shard:
    """A batch of trajectories written by one rollout worker in one iteration."""

    shard_id: str
    iteration: int
    worker: int
    trajectories: list[Trajectory] = field(default_factory=list)


@dataclass
class AdapterVersion:
    """A published adapter: `<adapter>@v<version>` names it for ever (docs/architecture.md)."""

    adapter: str
    version: int
    sha256: str
    learner_step: int
    path: str = ""

    @property
    def engine_name(self) -> str:
        return f"{self.adapter}@v{self.version}"


@dataclass
class BankVersion:
    """A published skill bank for one bank key (`2048`, `avalon/good`, `diplomacy/FRANCE`, ...)."""

    bank_key: str
    version: int
    sha256: str
    iteration: int
    path: str = ""


@dataclass
class RolloutResult:
    """What a rollout worker returns for one chunk of episode plans: the shard (msgpack bytes), the episodes
    it holds, the generation wall time, the generated tokens, and the runners' counters (steps,
    invalid_actions, parse_errors, model_calls, env_ns, ...)."""

    shard: bytes
    episodes: list[str]
    seconds: float
    generated_tokens: int = 0
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class BankUpdate:
    """What one skill-bank update returns: the bank versions it published ({bank key: version}), the bank
    adapters' Samples (rewards set), one report per bank key, the seconds it took, and per adapter what its
    model calls cost (`coplay.skills.caller.CallUsage`: calls, prompts, completions, tokens in and out,
    seconds)."""

    versions: dict[str, int] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    calls: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class TrainStep:
    """One learner step: what the learner did (per-adapter losses, trained tokens, versions after it), what
    was published, and what the driver knows about its batch (advantages, rewards, which episodes)."""

    learner_step: int
    adapters: dict[str, dict[str, float]] = field(default_factory=dict)
    trained_tokens: int = 0
    versions: dict[str, int] = field(default_factory=dict)
    published: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    nonzero_advantages: dict[str, int] = field(default_factory=dict)
    reward_parts: dict[str, dict[str, float]] = field(default_factory=dict)
    # per adapter, each reward part's share of the total absolute reward (`learn.rewards.reward_shares`)
    reward_shares: dict[str, dict[str, float]] = field(default_factory=dict)
    trained_iteration: int | None = None
    trained_episodes: list[str] = field(default_factory=list)
    # per published adapter, how far the served weights and policy moved (`coplay.learn.update_size`)
    served_change: dict[str, dict[str, Any]] = field(default_factory=dict)
    measure_seconds: float = 0.0
    # seconds of the step's parts (`coplay.driver.phases.LEARNER_TIMINGS`): the ranks' forward, backward,
    # optimizer; the driver's batch, export, publish and measure
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The metrics-line form (`train_seconds` is the historical name of `seconds`)."""
        out = asdict(self)
        out["train_seconds"] = out.pop("seconds")
        return out


_NESTED: dict[type, dict[str, type]] = {
    Trajectory: {"steps": Step, "samples": Sample},
    Shard: {"trajectories": Trajectory},
}


def to_dict(record: Any) -> dict[str, Any]:
    """A record as plain msgpack/JSON-able data (nested records become dicts)."""
    out: dict[str, Any] = {}
    nested = _NESTED.get(type(record), {})
    for f in fields(record):
        value = getattr(record, f.name)
        out[f.name] = [to_dict(v) for v in value] if f.name in nested else value
    return out


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Inverse of `to_dict`; unknown keys are an error (they mean a schema mismatch)."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a mapping, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise TypeError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    nested = _NESTED.get(cls, {})
    kwargs = {k: ([from_dict(nested[k], v) for v in data[k]] if k in nested else data[k]) for k in data}
    return cls(**kwargs)


def encode_shard(shard: Shard) -> bytes:
    """Shard -> bytes with header and CRC."""
    payload = msgpack.packb(to_dict(shard), use_bin_type=True)
    return _HEADER.pack(SHARD_MAGIC, SCHEMA_VERSION, len(payload), zlib.crc32(payload)) + payload


def decode_shard(data: bytes, name: str = "<bytes>") -> Shard:
    """Bytes -> Shard, or `ShardError` naming `name` and the fault."""
    if len(data) < _HEADER.size:
        raise ShardError(f"shard {name}: truncated header ({len(data)} of {_HEADER.size} bytes)")
    magic, version, length, crc = _HEADER.unpack_from(data)
    if magic != SHARD_MAGIC:
        raise ShardError(f"shard {name}: not a coplay shard (magic {magic!r}, expected {SHARD_MAGIC!r})")
    if version != SCHEMA_VERSION:
        raise ShardError(f"shard {name}: schema version {version}, "
                         f"this coplay reads version {SCHEMA_VERSION}")
    payload = data[_HEADER.size :]
    if len(payload) != length:
        raise ShardError(f"shard {name}: payload is {len(payload)} bytes, header says {length} (truncated?)")
    if zlib.crc32(payload) != crc:
        raise ShardError(f"shard {name}: CRC mismatch (corrupted payload)")
    try:
        return from_dict(Shard, msgpack.unpackb(payload, raw=False, strict_map_key=False))
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ShardError(f"shard {name}: payload does not decode as schema {SCHEMA_VERSION}: {exc}") from None


def write_shard(path: str | Path, shard: Shard) -> Path:
    """Write atomically (temp file + rename): a reader never sees half a shard."""
    from coplay.files import write_bytes_atomic

    return write_bytes_atomic(Path(path), encode_shard(shard))


def read_shard(path: str | Path) -> Shard:
    """Read one shard file; `ShardError` names the file when it is bad."""
    path = Path(path)
    return decode_shard(path.read_bytes(), str(path))


def read_shard_dir(folder: str | Path) -> tuple[list[Shard], list[ShardError]]:
    """Every `*.msgpack` shard of a folder, sorted by name; bad ones are returned as errors, not raised."""
    shards, errors = [], []
    for path in sorted(Path(folder).glob("*.msgpack")):
        try:
            shards.append(read_shard(path))
        except ShardError as exc:
            errors.append(exc)
    return shards, errors


def iter_trajectories(shards: list[Shard]) -> Iterator[Trajectory]:
    """All trajectories of some shards, in order."""
    for shard in shards:
        yield from shard.trajectories
