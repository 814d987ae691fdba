"""Records and the shard codec: every record round-trips; every corruption is caught and names the file."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coplay.types import (
    SCHEMA_VERSION,
    AdapterVersion,
    BankVersion,
    Sample,
    Shard,
    ShardError,
    Step,
    Trajectory,
    decode_shard,
    encode_shard,
    from_dict,
    read_shard,
    read_shard_dir,
    to_dict,
    write_shard,
)

text = st.text(max_size=30)
ints = st.integers(min_value=0, max_value=2**31)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
features = st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(st.booleans(), ints, floats),
                           max_size=4)

samples = st.builds(
    Sample, adapter=st.sampled_from(["act", "retrieve", "segment", "contract", "curator"]),
    adapter_version=ints,
    prompt_ids=st.lists(ints, max_size=20), completion_ids=st.lists(ints, max_size=10),
    logprobs=st.lists(st.floats(max_value=0, allow_nan=False, allow_infinity=False), max_size=10),
    group_id=text, temperature=st.floats(0, 2), reward=st.one_of(st.none(), floats),
    completion_text=text,
    finish_reason=st.sampled_from(["stop", "length", ""]), sample_id=text,
    meta=st.dictionaries(st.text(max_size=5), st.one_of(text, ints), max_size=3),
)
steps = st.builds(
    Step, t=ints, observation=text, action=text, reward=floats, score=floats, invalid=st.integers(0, 7),
    intention=text, skill_id=st.one_of(st.none(), text),
    skill_event=st.sampled_from(["", "success", "abort"]),
    features_before=features, features_after=features, sample_ids=st.lists(text, max_size=3),
    parse_error=text,
)
trajectories = st.builds(
    Trajectory, episode_id=text, game=st.sampled_from(["2048", "avalon"]), seat=text, role=text, seed=ints,
    steps=st.lists(steps, max_size=4), samples=st.lists(samples, max_size=4), score=floats,
    adapter_versions=st.dictionaries(st.sampled_from(["act", "retrieve"]), ints), bank_version=ints,
    iteration=ints, terminated=st.booleans(), truncated=st.booleans(), policy=text,
)
shards = st.builds(Shard, shard_id=text, iteration=ints, worker=ints,
                   trajectories=st.lists(trajectories, max_size=3))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(shards)
def test_shard_round_trips(shard):
    assert decode_shard(encode_shard(shard)) == shard


@given(st.one_of(samples, steps, trajectories))
def test_record_dict_round_trips(record):
    assert from_dict(type(record), to_dict(record)) == record


@given(st.builds(AdapterVersion, adapter=text, version=ints, sha256=text, learner_step=ints, path=text),
       st.builds(BankVersion, bank_key=text, version=ints, sha256=text, iteration=ints, path=text))
def test_version_records_round_trip(adapter_version, bank_version):
    assert from_dict(AdapterVersion, to_dict(adapter_version)) == adapter_version
    assert from_dict(BankVersion, to_dict(bank_version)) == bank_version


def _valid_shard() -> Shard:
    sample = Sample("act", 3, [1, 2, 3], [4, 5], [-0.5, -1.25], "g0", reward=1.0,
                    completion_text="ACTION: up")
    step = Step(0, "board", "up", 4.0, 4.0, features_before={"max_tile": 2}, features_after={"max_tile": 4})
    traj = Trajectory("e0", "2048", "player_0", "player", 7, [step], [sample], 4.0, {"act": 3}, 2, 1)
    return Shard("s0", 1, 0, [traj])


def test_every_truncation_is_rejected():
    data = encode_shard(_valid_shard())
    for cut in range(len(data)):
        with pytest.raises(ShardError, match="x.msgpack"):
            decode_shard(data[:cut], "x.msgpack")


def test_random_bit_flips_are_rejected():
    data = encode_shard(_valid_shard())
    rng = random.Random(0)
    for _ in range(500):
        corrupted = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(corrupted))
            corrupted[pos] ^= 1 << rng.randrange(8)
        with pytest.raises(ShardError, match="y.msgpack"):
            decode_shard(bytes(corrupted), "y.msgpack")


def test_wrong_schema_version_is_rejected():
    data = bytearray(encode_shard(_valid_shard()))
    for version in (0, SCHEMA_VERSION + 1, 65535):
        data[8:10] = version.to_bytes(2, "little")
        with pytest.raises(ShardError, match=f"schema version {version}"):
            decode_shard(bytes(data), "z.msgpack")


def test_bad_shard_in_folder_does_not_stop_the_others(tmp_path):
    good = _valid_shard()
    write_shard(tmp_path / "a.msgpack", good)
    write_shard(tmp_path / "c.msgpack", good)
    (tmp_path / "b.msgpack").write_bytes(encode_shard(good)[:-3])
    loaded, errors = read_shard_dir(tmp_path)
    assert loaded == [good, good]
    assert len(errors) == 1 and "b.msgpack" in str(errors[0])
    assert read_shard(tmp_path / "a.msgpack") == good
