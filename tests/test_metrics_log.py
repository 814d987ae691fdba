"""The console line of each metrics record says what that record is."""

from __future__ import annotations

from coplay.driver.metrics import console_line


def test_closing_records_are_not_shown_as_empty_iterations():
    rollout = console_line(3, {"episodes": 8, "generated_tokens_per_s": 366.4,
                               "scores": {"2048": {"mean": 21.0}},
                               "bank_sizes": {"2048": 5}, "versions": {"act": 2}})
    assert rollout.startswith("[bold]it 3[/] episodes=8 tok/s=366 2048=21.0")
    final_step = console_line(5, {"final_train": {"learner_step": 4, "published": {"act": 5}}})
    assert "final GRPO step" in final_step and "learner_step=4" in final_step and "episodes" not in final_step
    final = console_line(5, {"final_versions": {"act": 5}, "final_bank_versions": {"2048": 5}})
    assert "final" in final and "'act': 5" in final and "episodes" not in final
