"""`coplay eval --compare`: the interval code against textbook values and hand computations, and the view.

Known values used:
- Student t: the mean of 1..10 is 5.5 with s = 3.02765; t(0.975, 9) = 2.262157 gives [3.33415, 7.66585].
- Wilson (z = 1.959964): 8/10 -> [0.4902, 0.9433]; 0/10 -> [0, 0.2775] (Newcombe 1998, table I).
- Newcombe 1998 (Stat. Med. 17:873), example (a): 56/70 - 48/80, method 10 (hybrid score) -> [0.0524, 0.3339].
- Welch: n = 10 each, s = 4 each gives df = 18 exactly; t(0.975, 18) = 2.100922; se = sqrt(3.2).
- Welch-Satterthwaite df for (s=4, n=10) and (s=6, n=12): 4.6^2 / (1.6^2/9 + 3^2/11) = 19.1905.
"""

from __future__ import annotations

import json
import math

import pytest

from coplay.cli import main
from coplay.eval.compare import (
    compare_files,
    compare_results,
    intervals_overlap,
    newcombe_interval,
    std_from_t_interval,
    welch_df,
    welch_interval,
)
from coplay.eval.protocol import write_eval
from coplay.eval.stats import summarize, t_interval, wilson_interval


def test_t_interval_matches_the_textbook_value():
    low, high = t_interval(list(range(1, 11)))
    assert (low, high) == pytest.approx((3.33415, 7.66585), abs=1e-4)


def test_standard_deviation_is_recovered_from_a_t_interval():
    values = [1.0, 4.0, 4.0, 7.0, 9.0, 12.0]
    s = summarize(values)
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    assert std_from_t_interval(s.n, s.ci_low, s.ci_high) == pytest.approx(sd, rel=1e-9)
    assert std_from_t_interval(1, 5.0, 5.0) == 0.0


def test_wilson_interval_matches_newcombe_table():
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)


def test_newcombe_difference_matches_the_published_example():
    # B - A with A = 48/80 and B = 56/70 is Newcombe's 56/70 - 48/80.
    a, b = 48 / 80, 56 / 70
    low, high = newcombe_interval(a, wilson_interval(48, 80), b, wilson_interval(56, 70))
    assert (low, high) == pytest.approx((0.0524, 0.3339), abs=1e-4)


def test_welch_interval_by_hand():
    assert welch_df(4.0, 10, 6.0, 12) == pytest.approx(19.1905, abs=1e-4)
    half = 2.100922 * math.sqrt(3.2)
    assert welch_interval(20.0, 4.0, 10, 23.0, 4.0, 10) == pytest.approx((3 - half, 3 + half), abs=1e-5)
    assert welch_interval(20.0, 4.0, 1, 23.0, 4.0, 10) is None  # one side has a single episode
    assert welch_interval(1.0, 0.0, 5, 1.0, 0.0, 5) == (0.0, 0.0)


def test_intervals_overlap_is_closed():
    assert intervals_overlap((1.0, 2.0), (2.0, 3.0))
    assert intervals_overlap((0.0, 10.0), (4.0, 5.0))
    assert not intervals_overlap((1.0, 2.0), (2.01, 3.0))
    assert not intervals_overlap((2.01, 3.0), (1.0, 2.0))


def _results(scores: dict[str, list[float]], wins: dict[str, tuple[int, int]] | None = None) -> dict:
    out = {g: {"episodes": len(v), "score": summarize(v).as_dict()} for g, v in scores.items()}
    if wins:
        out["avalon"]["win_rate"] = {k: {"rate": w / n, "n": n, "ci95": list(wilson_interval(w, n))}
                                     for k, (w, n) in wins.items()}
    return out


def test_rows_say_which_difference_is_clear():
    a = _results({"2048": [100, 110, 120, 130, 140, 150], "tetris": [10, 12, 14, 16], "avalon": [0, 1, 0, 1]},
                 {"side:good": (48, 80)})
    b = _results({"2048": [400, 410, 420, 430, 440, 450], "tetris": [11, 13, 15, 17], "avalon": [1, 1, 0, 1]},
                 {"side:good": (56, 70)})
    rows = {(r.game, r.group): r for r in compare_results(a, b)}
    clear = rows[("2048", "score")]
    assert clear.difference == pytest.approx(300.0)
    assert not clear.overlap and clear.difference_excludes_zero
    unclear = rows[("tetris", "score")]
    assert unclear.overlap and not unclear.difference_excludes_zero
    win = rows[("avalon", "win:side:good")]
    assert win.difference == pytest.approx(0.2)
    assert win.overlap and win.difference_excludes_zero  # overlapping CIs, yet a significant difference
    assert set(rows) == {("2048", "score"), ("tetris", "score"), ("avalon", "score"),
                         ("avalon", "win:side:good")}


def test_cli_compare_prints_both_sides_and_writes_json(tmp_path, capsys):
    a = write_eval(tmp_path, "a", _results({"2048": [100, 110, 120], "tetris": [5, 6]}),
                   {"player": "random"})[0]
    b = write_eval(tmp_path, "b", _results({"2048": [300, 310, 330], "mario": [1, 2]}),
                   {"player": "expert"})[0]
    out = tmp_path / "cmp.json"
    assert main(["eval", "--compare", str(a), str(b), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2048" in text and "+203.33" in text
    assert "games in only one of the two files (not compared): mario, tetris" in text
    rows = json.loads(out.read_text())["rows"]
    assert [(r["game"], r["group"], r["overlap"]) for r in rows] == [("2048", "score", False)]


def test_compare_names_a_file_that_is_not_an_evaluation(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    good = write_eval(tmp_path, "good", _results({"2048": [1.0, 2.0]}), {})[0]
    with pytest.raises(ValueError, match="bad.json"):
        compare_files(bad, good)
    assert main(["eval", "--compare", str(bad), str(good)]) == 2
    assert "bad.json" in capsys.readouterr().err
