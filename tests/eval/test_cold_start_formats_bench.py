"""The cold-start formats benchmark (benchmarks/cold_start_formats.py) end to end with `--quick`: the tiny
model only, teacher data, SFT of the four measured adapters and generation in the `hf` engine, all for real
and small (under a minute on two cores). Checks the JSON's shape and that every rate is a fraction; the
figures themselves come from the full run (`benchmarks/results/cold-start-formats.json`)."""

from __future__ import annotations

import json

RATES = {"act": ("parse_rate", "legal_rate"), "retrieve": ("parse_rate",),
         "contract": ("parse_validate_rate",), "curator": ("verdict_parse_rate",)}


def test_quick_run_writes_rates_per_adapter(tmp_path, tiny_model_config):
    from benchmarks.cold_start_formats import main

    out = tmp_path / "formats.json"
    printed = main(["--quick", "--out", str(out), f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}"])
    result = json.loads(out.read_text())
    assert result == json.loads(json.dumps(printed))
    assert result["quick"]
    assert result["command"].startswith("nice -n 10 python -m benchmarks.cold_start_formats --quick")
    assert len(result["loadavg_before"]) == 3 and result["commit"]
    tiny = result["models"]["tiny"]
    assert set(tiny["seconds"]) == {"teacher_data", "sft", "generation", "generation_constrained"}
    assert set(tiny["sft"]) == set(RATES)  # each measured adapter was trained
    assert tiny["sft"]["act"]["batches"] >= 1
    for adapter, keys in RATES.items():
        formats = tiny["formats"][adapter]
        assert formats["n"] >= 1, adapter
        for key in keys:
            assert 0.0 <= formats[key] <= 1.0, (adapter, key, formats[key])
        assert all(isinstance(text, str) for text in formats["examples"])
    constrained = tiny["formats_constrained"]  # the second pass, as constrained runs sample
    assert set(constrained) == {"act", "contract"}
    assert constrained["act"]["n"] == tiny["formats"]["act"]["n"]
    print("tiny act legal, free vs constrained:", tiny["formats"]["act"]["legal_rate"],
          constrained["act"]["legal_rate"])


def test_formats_side_by_side_measure_only_the_named_adapters(tmp_path, tiny_model_config):
    """`--formats full,compact --adapters act`: one entry per format, only `act` trained and answered, and
    the compact rates minus the full ones."""
    from benchmarks.cold_start_formats import main

    out = tmp_path / "formats.json"
    main(["--quick", "--adapters", "act", "--formats", "full,compact", "--no-constrained", "--out", str(out),
          f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}"])
    result = json.loads(out.read_text())
    assert set(result["models"]) == {"tiny@full", "tiny@compact"}
    for entry in result["models"].values():
        assert set(entry["sft"]) == {"act"} and set(entry["formats"]) == {"act"}
    diffs = result["format_differences"]["tiny: compact minus full"]
    full, compact = (result["models"][f"tiny@{f}"]["formats"]["act"] for f in ("full", "compact"))
    assert diffs["formats.act.legal_rate"] == round(compact["legal_rate"] - full["legal_rate"], 4)


def test_the_recorded_command_names_each_measured_flag_once():
    import argparse

    from benchmarks.cold_start_formats import recorded_command

    args = argparse.Namespace(models="smollm2-135m-instruct", teacher_episodes=None, max_steps=None,
                              examples_per_adapter=None, min_batches_cap=None, starts=16, eval_steps=2,
                              bank_steps=250, eval_prompts=32, temperature=0.0, with_segment=False,
                              max_epochs=None, max_new_tokens=None, adapters="act", formats="full,compact",
                              quick=False, overrides=[])
    full = recorded_command(args)
    assert full.count("--adapters act") == 1 and full.count("--formats full,compact") == 1
    assert "--starts 16" in full
    quick = recorded_command(argparse.Namespace(**{**vars(args), "quick": True}))
    assert quick == ("nice -n 10 python -m benchmarks.cold_start_formats --quick --adapters act "
                     "--formats full,compact")
