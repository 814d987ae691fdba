"""Versioned artifacts: the ledger (checksums, immutable versions, run-folder copies with one manifest format,
acknowledgements), what a worker serves, and the driver's republish/stop policy."""

from __future__ import annotations

import json

import pytest

from coplay.artifacts import (
    ArtifactError,
    ArtifactLedger,
    Manifest,
    Refusal,
    RepublishPolicy,
    bank_manifest_path,
    bundle_sha256,
    read_adapter_version,
    read_bank_version,
)
from coplay.artifacts.serving import adapters_to_load, adapters_to_retire
from coplay.files import sha256_bytes
from coplay.runs import RunDir


def _bundle(tag: bytes) -> dict[str, bytes]:
    return {"adapter_config.json": b'{"r": 8, "tag": "' + tag + b'"}',
            "adapter_model.safetensors": b"w" + tag}


def test_adapter_publish_copy_and_republish(tmp_path):
    run = RunDir.create(tmp_path, "a", "{}\n")
    ledger = ArtifactLedger(run)
    files = _bundle(b"1")
    record = ledger.publish_adapter("act", 1, files, bundle_sha256(files), learner_step=1)
    assert record.engine_name == "act@v1"
    folder = run.adapter_dir("act", 1)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["sha256"] == record.sha256 and manifest["kind"] == "adapter"
            and manifest["learner_step"] == 1)
    assert manifest["files"] == {name: sha256_bytes(data) for name, data in files.items()}
    assert ledger.republish_adapter("act", 1) == record and ledger.get_adapter("act", 1)[0].files == files
    (folder / "adapter_model.safetensors").write_bytes(b"corrupt")
    with pytest.raises(ArtifactError, match="adapter_model.safetensors"):
        ledger.republish_adapter("act", 1)


def test_checksum_mismatch_and_rewrites_are_refused(tmp_path):
    ledger = ArtifactLedger(None)
    files = _bundle(b"1")
    with pytest.raises(ArtifactError, match="does not match"):
        ledger.publish_adapter("act", 1, files, "0" * 64, 1)
    ledger.publish_adapter("act", 1, files, bundle_sha256(files), 1)
    ledger.publish_adapter("act", 1, files, bundle_sha256(files), 1)  # the same bytes again: a no-op
    other = _bundle(b"2")
    with pytest.raises(ArtifactError, match="other bytes"):
        ledger.publish_adapter("act", 1, other, bundle_sha256(other), 1)
    with pytest.raises(ArtifactError, match="never published"):
        ledger.get_adapter("act", 2)


def test_banks_get_the_same_manifest_format_and_acks_are_checked(tmp_path):
    run = RunDir.create(tmp_path, "b", "{}\n")
    ledger = ArtifactLedger(run)
    data = json.dumps({"skills": []}).encode()
    record = ledger.publish_bank("avalon/good", 2, data, iteration=2)
    path = run.bank_path("avalon/good", 2)
    assert path.read_bytes() == data and record.sha256 == sha256_bytes(data)
    manifest = Manifest.read(bank_manifest_path(path), "bank")
    assert (manifest.name, manifest.version, manifest.sha256, manifest.iteration) == (
        "avalon/good", 2, record.sha256, 2)
    assert read_bank_version(path) == (data, record)
    assert (ledger.latest_bank_version("avalon/good", 5) == 2
            and ledger.latest_bank_version("avalon/good", 1) is None)
    with pytest.raises(ArtifactError, match="not JSON"):
        ledger.publish_bank("x", 1, b"{not json", 1)
    ledger.acknowledge("w0", "bank", "avalon/good", 2, record.sha256)
    assert ledger.acknowledged_by("bank", "avalon/good", 2) == {"w0": record.sha256}
    with pytest.raises(ArtifactError, match="acknowledged"):
        ledger.acknowledge("w1", "bank", "avalon/good", 2, "f" * 64)


def test_a_fresh_ledger_restores_versions_from_the_run_folder_and_refuses_corrupt_copies(tmp_path):
    run = RunDir.create(tmp_path, "c", "{}\n")
    first = ArtifactLedger(run)
    files = _bundle(b"1")
    adapter = first.publish_adapter("retrieve", 3, files, bundle_sha256(files), learner_step=2)
    bank = first.publish_bank("2048", 1, b'{"v": 1}', iteration=1)
    fresh = ArtifactLedger(run)
    assert fresh.restore_adapter("retrieve", 3) == adapter and fresh.restore_bank("2048", 1) == bank
    bundle, _ = read_adapter_version(run.adapter_dir("retrieve", 3))
    assert bundle.files == files
    run.bank_path("2048", 1).write_bytes(b'{"v": 2}')
    with pytest.raises(ArtifactError, match="v1.json"):
        ArtifactLedger(run).restore_bank("2048", 1)


def test_a_worker_keeps_the_previous_version_of_an_adapter_whose_new_version_was_refused():
    wanted = [("act", 3), ("retrieve", 2)]
    loaded = ["act@v2", "retrieve@v1", "curator@v1"]
    assert adapters_to_load(wanted, loaded) == [("act", 3), ("retrieve", 2)]
    refused = [Refusal("adapter", "act", 3, "checksum")]
    assert adapters_to_retire([*loaded, "retrieve@v2"], wanted, refused) == ["retrieve@v1", "curator@v1"]


def test_the_republish_policy_stops_after_the_configured_failures():
    policy = RepublishPolicy(max_failures=3)
    bad = Refusal("adapter", "act", 3, "bad")
    assert policy.refused(bad) == 1 and policy.refused(bad) == 2
    assert policy.refused(Refusal("bank", "2048", 1, "bad")) == 1  # counted per version
    with pytest.raises(ArtifactError, match="3 times"):
        policy.refused(bad)
    assert policy.counts() == {"adapter:act@v3": 3, "bank:2048@v1": 1}


def test_the_ledger_holds_the_serving_set_and_a_window_and_reads_older_versions_back(tmp_path):
    run = RunDir.create(tmp_path, "w", "{}\n")
    ledger = ArtifactLedger(run, window_bytes=3 * 1010)  # room for three of these 1008-byte versions
    published = {}
    for v in range(1, 21):
        files = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": bytes([v]) * 1000}
        ledger.publish_adapter("act", v, files, bundle_sha256(files), learner_step=v)
        published[v] = files
        ledger.pin([("act", v), ("act", 1)], {})  # the current version and a frozen opponent
        assert len(ledger.held) <= 3 + 2
    assert ledger.held_bytes() <= 5 * 1010 < 20 * 1000
    assert {("adapter", "act", 1), ("adapter", "act", 20)} <= set(ledger.held)
    assert ("adapter", "act", 5) not in ledger.held
    assert ledger.get_adapter("act", 5)[0].files == published[5] and ledger.reads == 1
    (run.adapter_dir("act", 6) / "adapter_model.safetensors").write_bytes(b"corrupt")
    with pytest.raises(ArtifactError, match="adapter_model.safetensors"):
        ledger.get_adapter("act", 6)


def test_a_ledger_rebuilt_from_the_run_folder_knows_every_version_and_skips_bad_manifests(tmp_path):
    run = RunDir.create(tmp_path, "r", "{}\n")
    first = ArtifactLedger(run, window_bytes=1)
    files = _bundle(b"1")
    adapter = first.publish_adapter("retrieve", 3, files, bundle_sha256(files), learner_step=2)
    bank = first.publish_bank("avalon/good", 2, b'{"v": 2}', iteration=2)
    other = _bundle(b"2")
    first.publish_adapter("act", 1, other, bundle_sha256(other), learner_step=1)
    broken = run.adapter_dir("act", 2)
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    (run.root / "adapters" / "act" / ".v3.tmp").mkdir()  # a version the store died while writing
    rebuilt = ArtifactLedger.from_run(run, window_bytes=1)
    assert rebuilt.adapters == {("retrieve", 3): adapter, ("act", 1): first.adapters[("act", 1)]}
    assert rebuilt.banks == {("avalon/good", 2): bank} and rebuilt.held_bytes() == 0
    assert len(rebuilt.skipped) == 1 and "act/v2/manifest.json" in rebuilt.skipped[0]
    assert rebuilt.get_adapter("retrieve", 3)[0].files == files
    assert rebuilt.get_bank("avalon/good", 2)[0] == b'{"v": 2}'


def test_the_window_is_a_byte_budget_not_a_count_of_versions(tmp_path):
    """One large version takes the room of many small ones; the serving set is held whatever its size."""
    run = RunDir.create(tmp_path, "b", "{}\n")
    ledger = ArtifactLedger(run, window_bytes=10_000)
    for v in range(1, 9):  # eight small versions of about 1 KB fit
        files = {"adapter_config.json": b"{}", "adapter_model.safetensors": bytes([v]) * 1000}
        ledger.publish_adapter("act", v, files, bundle_sha256(files), learner_step=v)
    assert len(ledger.held) == 8
    big = {"adapter_config.json": b"{}", "adapter_model.safetensors": b"x" * 9_500}
    ledger.publish_adapter("act", 9, big, bundle_sha256(big), learner_step=9)
    assert set(ledger.held) == {("adapter", "act", 9)} and ledger.held_bytes() == 9_502  # the rest went
    huge = {"adapter_config.json": b"{}", "adapter_model.safetensors": b"y" * 50_000}
    ledger.publish_adapter("act", 10, huge, bundle_sha256(huge), learner_step=10)
    assert not ledger.held and ledger.held_bytes() == 0  # alone larger than the window: let go at once
    ledger.pin([("act", 10)], {})  # once served, held whatever its size (read back once)
    assert ledger.get_adapter("act", 10)[0].files == huge and ledger.reads == 1
    assert set(ledger.held) == {("adapter", "act", 10)} and ledger.held_bytes() == 50_002


def test_sealed_payloads_are_held_and_handed_out_as_sealed(tmp_path):
    """The store's sealing (Ray's object store) stands in here as a box: held and handed out as the box,
    opened for `get_adapter`, sealed anew when read back from the run folder; a publisher's seal is kept."""
    run = RunDir.create(tmp_path, "s", "{}\n")
    seals = []

    def seal(bundle):
        seals.append(bundle.sha256)
        return ("box", bundle)

    ledger = ArtifactLedger(run, window_bytes=0, seal=seal, unseal=lambda box: box[1])
    files = _bundle(b"1")
    ledger.pin([("act", 1)], {})  # served: held although the window is 0
    ledger.publish_adapter("act", 1, files, bundle_sha256(files), learner_step=1)
    sealed, record = ledger.holding("act", 1)
    assert sealed[0] == "box" and ledger.get_adapter("act", 1)[0].files == files and len(seals) == 1
    other = _bundle(b"2")
    ledger.publish_adapter("act", 2, other, bundle_sha256(other), learner_step=2, sealed=("mine", None))
    assert len(seals) == 1 and ("adapter", "act", 2) not in ledger.held  # window 0: let go at once
    again, _ = ledger.holding("act", 2)  # read back from the run folder and sealed by the ledger
    assert again[0] == "box" and again[1].files == other and ledger.reads == 1 and len(seals) == 2
