"""The artifact ledger: checksums, immutable versions, run-folder copies, acknowledgements, failure limit."""

from __future__ import annotations

import json

import pytest

from coplay.artifacts import ArtifactError, ArtifactLedger, bank_sha256
from coplay.engines.adapters import bundle_sha256
from coplay.runs import RunDir


def _bundle(tag: bytes) -> dict[str, bytes]:
    return {"adapter_config.json": b'{"r": 8, "tag": "' + tag + b'"}', "adapter_model.safetensors": b"w" + tag}


def test_adapter_publish_copy_and_republish(tmp_path):
    run = RunDir.create(tmp_path, "a", "{}\n")
    ledger = ArtifactLedger(run)
    files = _bundle(b"1")
    record = ledger.put_adapter("act", 1, files, bundle_sha256(files), learner_step=1)
    assert record.engine_name == "act@v1"
    folder = run.adapter_dir("act", 1)
    assert json.loads((folder / "manifest.json").read_text())["sha256"] == record.sha256
    assert ledger.reload_adapter("act", 1)[0] == files
    (folder / "adapter_model.safetensors").write_bytes(b"corrupt")
    with pytest.raises(ArtifactError, match="no longer matches"):
        ledger.reload_adapter("act", 1)


def test_checksum_mismatch_and_rewrites_are_refused(tmp_path):
    ledger = ArtifactLedger(None)
    files = _bundle(b"1")
    with pytest.raises(ArtifactError, match="does not match"):
        ledger.put_adapter("act", 1, files, "0" * 64, 1)
    ledger.put_adapter("act", 1, files, bundle_sha256(files), 1)
    other = _bundle(b"2")
    with pytest.raises(ArtifactError, match="other bytes"):
        ledger.put_adapter("act", 1, other, bundle_sha256(other), 1)
    with pytest.raises(ArtifactError, match="never published"):
        ledger.get_adapter("act", 2)


def test_banks_acks_and_failure_limit(tmp_path):
    run = RunDir.create(tmp_path, "b", "{}\n")
    ledger = ArtifactLedger(run, max_failures=3)
    data = json.dumps({"skills": []}).encode()
    record = ledger.put_bank("avalon/good", 2, data, iteration=2)
    assert run.bank_path("avalon/good", 2).read_bytes() == data and record.sha256 == bank_sha256(data)
    assert ledger.latest_bank_version("avalon/good", 5) == 2 and ledger.latest_bank_version("avalon/good", 1) is None
    with pytest.raises(json.JSONDecodeError):
        ledger.put_bank("x", 1, b"{not json", 1)
    ledger.acknowledge("w0", "bank", "avalon/good", 2, record.sha256)
    assert ledger.acknowledged_by("bank", "avalon/good", 2) == {"w0": record.sha256}
    with pytest.raises(ArtifactError, match="acknowledged"):
        ledger.acknowledge("w1", "bank", "avalon/good", 2, "f" * 64)
    assert ledger.report_failure("adapter", "act", 3, "bad") == 1
    assert ledger.report_failure("adapter", "act", 3, "bad") == 2
    with pytest.raises(ArtifactError, match="3 times"):
        ledger.report_failure("adapter", "act", 3, "bad")
