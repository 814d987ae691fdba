"""Skill analysis (issue 17, item 3): the figures a user reads about a run's skills, on a bank history with
known lineage written by the project's own save functions, and trajectories written as real shards.

The history (bank 2048): v1 (iteration 0) materializes s1, s2, s3; v2 (iteration 1) merges s1 + s2 into s4,
refines s3, and has a rejected retirement of s3; v3 (iteration 2) splits s4 into s5 and s6 and retires s3;
v4 (iteration 3) materializes s7 and evicts s5.
"""

from __future__ import annotations

import json

import pytest

from coplay.cli import main
from coplay.config import SkillBankConfig
from coplay.report.bank import write_bank_report
from coplay.report.skill_analysis import load_skill_analysis
from coplay.runs import RunDir
from coplay.skills.contracts import learn_contract
from coplay.skills.maintenance import Proposal, apply_proposal, build_skill
from coplay.skills.schema import Bank, Instance, save_bank
from coplay.types import Shard, Step, Trajectory, write_shard

CFG = SkillBankConfig()
FEATURES = {"x": "number", "y": "number", "flag": "bool"}


def _skill(bank: Bank, sid: str, tags: dict[str, int], effects: list[str], duration: int, iteration: int,
           lineage: dict):
    n = sum(tags.values())
    tag_list = [t for t, c in sorted(tags.items()) for _ in range(c)]
    instances = [Instance(effects=effects, duration=duration, reward=1.0, tag=tag_list[i],
                          episode_id=f"2048-e{i}", start=0, iteration=iteration) for i in range(n)]
    contract = learn_contract([i.effects for i in instances], CFG.contracts.eff_freq)
    return build_skill(bank, instances, contract, CFG, iteration, lineage, dict(tags), skill_id=sid)


def _lineage(op: str, parents: list[str], iteration: int) -> dict:
    return {"op": op, "parents": parents, "iteration": iteration}


def _publish(run: RunDir, prev: Bank, iteration: int, applied: list[Proposal],
             rejected: tuple[Proposal, ...] = ()) -> Bank:
    """The next version as `update_bank` writes it: proposals applied in order, one record per proposal."""
    bank = prev
    records = []
    for proposal in applied:
        bank = apply_proposal(bank, proposal)
        records.append({**proposal.describe(), "verdict": "APPROVE", "applied": True})
    records += [{**p.describe(), "verdict": "REJECT", "applied": False} for p in rejected]
    bank = bank.copy()
    bank.version, bank.iteration, bank.operations = prev.version + 1, iteration, records
    save_bank(run, bank)
    return bank


def _steps(spec: list[tuple[str | None, str, str]]) -> list[Step]:
    return [Step(t=t, observation=f"obs {t}", action="up", reward=0.0, score=0.0, intention=intention,
                 skill_id=skill, skill_event=event) for t, (skill, event, intention) in enumerate(spec)]


def _traj(episode: str, iteration: int, spec, policy: str = "model") -> Trajectory:
    return Trajectory(episode_id=episode, game="2048", seat="player_0", role="player", seed=1,
                      steps=_steps(spec), iteration=iteration, policy=policy)


@pytest.fixture
def lineage_run(tmp_path) -> RunDir:
    run = RunDir.create(tmp_path, "lineage", "x: 1\n")
    empty = Bank("2048", features=dict(FEATURES))
    s1 = _skill(empty, "s1", {"MERGE": 4}, ["x↑"], 3, 0, _lineage("materialize", [], 0))
    s2 = _skill(empty, "s2", {"MERGE": 2, "BUILD": 1}, ["x↑", "flag=true"], 4, 0,
                _lineage("materialize", [], 0))
    s3 = _skill(empty, "s3", {"BUILD": 5}, ["y↓"], 2, 0, _lineage("materialize", [], 0))
    v1 = _publish(run, empty, 0, [Proposal("materialize", [], [s]) for s in (s1, s2, s3)])

    s4 = _skill(v1, "s4", {"MERGE": 6, "BUILD": 1}, ["x↑"], 3, 1, _lineage("merge", ["s1", "s2"], 1))
    s3r = _skill(v1, "s3", {"BUILD": 5}, ["y↓", "flag=false"], 2, 1, _lineage("refine", ["s3"], 1))
    s3r.lineage = v1.skills["s3"].lineage + s3r.lineage
    v2 = _publish(run, v1, 1, [Proposal("merge", ["s1", "s2"], [s4]), Proposal("refine", ["s3"], [s3r])],
                  rejected=(Proposal("retire", ["s3"], []),))

    s5 = _skill(v2, "s5", {"MERGE": 4}, ["x↑"], 3, 2, _lineage("split", ["s4"], 2))
    s6 = _skill(v2, "s6", {"MERGE": 2, "BUILD": 1}, ["x↑", "flag=true"], 5, 2, _lineage("split", ["s4"], 2))
    v3 = _publish(run, v2, 2, [Proposal("split", ["s4"], [s5, s6]), Proposal("retire", ["s3"], [])])

    s7 = _skill(v3, "s7", {"DEFEND": 3}, ["y↑"], 2, 3, _lineage("materialize", [], 3))
    _publish(run, v3, 3, [Proposal("materialize", [], [s7]), Proposal("evict", ["s5"], [])])

    e1 = _traj("2048-e1", 1, [("s1", "", "MERGE a"), ("s1", "", "MERGE a"), ("s1", "switch", "MERGE b"),
                              ("s2", "", "BUILD"), ("s2", "", "BUILD"), (None, "", "EXPLORE"),
                              ("s2", "", "BUILD"), ("s2", "success", "BUILD")])
    e2 = _traj("2048-e2", 1, [(None, "", "EXPLORE")] * 3 + [(None, "", "LEFT is not a tag")])
    opponent = _traj("2048-f1", 1, [("s3", "", "BUILD")] * 6, policy="frozen@act@v0")  # not the policy
    e3 = _traj("2048-e3", 2, [("s4", "", "MERGE"), ("s4", "abort", "MERGE"), ("s4", "", "MERGE"),
                              ("s5", "", "MERGE"), ("s5", "", "MERGE")])
    write_shard(run.shard_path(1, 0), Shard("it1", 1, 0, [e1, e2, opponent]))
    write_shard(run.shard_path(2, 0), Shard("it2", 2, 0, [e3]))
    return run


def test_discovered_active_and_absorbed_per_version(lineage_run):
    bank = load_skill_analysis(lineage_run.root).banks["2048"]
    rows = {r.version: r for r in bank.versions}
    assert [(r.version, r.iteration, r.active, r.discovered) for r in bank.versions] == [
        (1, 0, 3, 3), (2, 1, 2, 1), (3, 2, 2, 2), (4, 3, 2, 1)]
    assert (rows[2].absorbed_by_merge, rows[2].refined, rows[2].not_applied) == (2, 1, 1)
    assert (rows[3].absorbed_by_split, rows[3].retired) == (1, 1) and rows[4].evicted == 1
    assert [r.discovered_total for r in bank.versions] == [3, 4, 6, 7]
    s = bank.summary
    assert (s.discovered, s.inherited, s.active, s.absorbed_by_merge, s.absorbed_by_split) == (7, 0, 2, 2, 1)
    assert (s.retired, s.evicted) == (1, 1)


def test_lineage_names_the_operation_parents_and_iteration(lineage_run):
    skills = {s.id: s for s in load_skill_analysis(lineage_run.root).banks["2048"].skills}
    s1, s4 = skills["s1"], skills["s4"]
    assert (s4.made_by, s4.parents, s4.born_iteration) == ("merge", ["s1", "s2"], 1)
    assert (s1.ended_by, s1.ended_into, s1.ended_iteration) == ("merge", ["s4"], 1)
    assert (skills["s2"].ended_by, skills["s2"].ended_into) == ("merge", ["s4"])
    assert (skills["s4"].ended_by, skills["s4"].ended_into) == ("split", ["s5", "s6"])
    assert (skills["s5"].made_by, skills["s5"].parents, skills["s5"].ended_by) == ("split", ["s4"], "evict")
    assert [(x.op, x.iteration) for x in skills["s3"].lineage] == [("materialize", 0), ("refine", 1)]
    assert skills["s3"].ended_by == "retire" and skills["s3"].ended_version == 3
    assert skills["s7"].ended_by == "" and skills["s6"].last_version == 4  # still in the newest bank


def test_uses_per_skill_and_episodes_per_skill_count_the_policy_only(lineage_run):
    bank = load_skill_analysis(lineage_run.root).banks["2048"]
    skills = {s.id: s for s in bank.skills}
    used = {sid: (s.play_uses, s.play_steps, s.play_episodes) for sid, s in skills.items() if s.play_uses}
    assert used == {"s1": (1, 3, 1), "s2": (2, 4, 1), "s4": (2, 3, 1), "s5": (1, 2, 1)}
    assert skills["s3"].play_uses == 0  # only the frozen opponent ran it
    assert [s.id for s in bank.most_used(2)] == ["s2", "s4"]
    assert skills["s3"].bank_uses == 5 and skills["s4"].bank_uses == 7  # segments the bank labelled
    assert bank.summary.episodes == 3
    assert bank.summary.mean_episodes_per_skill == pytest.approx(4 / 7)


def test_duration_and_switches_per_episode(lineage_run):
    bank = load_skill_analysis(lineage_run.root).banks["2048"]
    s = bank.summary
    assert s.mean_skill_duration == pytest.approx(12 / 6)
    assert s.switches_per_episode == pytest.approx(2 / 3)  # s1 -> s2 in e1, s4 -> s5 in e3
    assert s.switch_requests_per_episode == pytest.approx(1 / 3)  # one `SKILL: SWITCH` answer
    first, second = bank.play
    assert (first.iteration, first.episodes, first.uses, first.switches_per_episode) == (1, 2, 3, 0.5)
    assert first.mean_duration == pytest.approx(7 / 3) and second.mean_duration == pytest.approx(5 / 3)
    assert first.ended == {"switch": 1, "success": 1, "no skill": 1}
    assert second.ended == {"abort": 1, "changed": 1, "episode end": 1}
    assert first.tags == {"BUILD": 4, "EXPLORE": 4, "MERGE": 3, "other": 1}


def test_intention_tags_per_version(lineage_run):
    bank = load_skill_analysis(lineage_run.root).banks["2048"]
    assert [r.tags for r in bank.versions] == [
        {"BUILD": 6, "MERGE": 6}, {"BUILD": 6, "MERGE": 6}, {"BUILD": 1, "MERGE": 6},
        {"BUILD": 1, "DEFEND": 3, "MERGE": 2}]


def test_a_bank_from_another_run_is_inherited_not_discovered(tmp_path):
    run = RunDir.create(tmp_path, "inherit", "x: 1\n")
    donor = Bank("2048", features=dict(FEATURES))
    s1 = _skill(donor, "s9", {"MERGE": 3}, ["x↑"], 3, 4, _lineage("materialize", [], 4))
    bank = apply_proposal(donor, Proposal("materialize", [], [s1])).copy()
    bank.version, bank.iteration = 1, 0
    save_bank(run, bank)
    analysis = load_skill_analysis(run.root).banks["2048"]
    assert (analysis.summary.discovered, analysis.summary.inherited) == (0, 1)
    assert analysis.skills[0].made_by == "inherited" and analysis.summary.episodes == 0
    assert analysis.summary.mean_episodes_per_skill is None  # no policy episodes: nothing to average


def test_a_corrupt_shard_is_named_and_the_rest_still_counts(lineage_run):
    (lineage_run.shards / "it00003-w000-0000.msgpack").write_bytes(b"not a shard")
    analysis = load_skill_analysis(lineage_run.root)
    assert any("it00003-w000-0000.msgpack" in p for p in analysis.problems)
    assert analysis.banks["2048"].summary.episodes == 3


def test_bank_report_cli_prints_the_figures_and_json(lineage_run, capsys):
    assert main(["bank", "report", str(lineage_run.root)]) == 0
    out = capsys.readouterr().out
    assert "absorbed by merges" in out and "switches per episode" in out and "merge s1+s2 @it1" in out
    assert (lineage_run.root / "bank_report.html").is_file()
    assert main(["bank", "report", str(lineage_run.root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    summary = data["banks"]["2048"]["summary"]
    assert summary["absorbed_by_merge"] == 2 and summary["switches_per_episode"] == pytest.approx(2 / 3)


def test_the_bank_page_shows_the_analysis_with_drawn_charts(lineage_run):
    page = write_bank_report(lineage_run.root).read_text()
    assert "Skill analysis" in page and "absorbed by merges" in page
    assert "id='chart-skills-2048-count'" in page and "id='chart-skills-2048-tags'" in page
    assert "merged into s4" in page and "split into s5, s6" in page


def test_a_run_whose_banks_update_bank_made_agrees_with_its_operations(synthetic_run):
    from coplay.skills.schema import bank_versions, load_bank

    bank = load_skill_analysis(synthetic_run.root).banks["2048"]
    history = [load_bank(synthetic_run, "2048", v) for v in bank_versions(synthetic_run, "2048")]
    made = [sid for b in history for op in b.operations
            if op["applied"] and op["op"] in ("materialize", "merge", "split") for sid in op["new"]]
    assert bank.summary.discovered == len(made) > 0 and bank.summary.active == len(history[-1].skills)
    assert bank.summary.episodes == 16  # 4 policy episodes of 2048 per iteration; Avalon has no bank
    assert all(set(row.ended) == {"success"} for row in bank.play)  # the synthetic run ends every use so
    assert sum(s.play_uses for s in bank.skills) == sum(row.uses for row in bank.play)


def test_bank_report_for_a_game_without_a_bank_says_which_banks_there_are(lineage_run, capsys):
    assert main(["bank", "report", str(lineage_run.root), "--game", "tetris", "--json"]) == 2
    err = capsys.readouterr().err
    assert "no banks for game 'tetris'" in err and "['2048']" in err


def test_a_malformed_operation_record_is_named_not_fatal(tmp_path):
    run = RunDir.create(tmp_path, "bad-op", "x: 1\n")
    empty = Bank("2048", features=dict(FEATURES))
    s1 = _skill(empty, "s1", {"MERGE": 3}, ["x↑"], 3, 0, _lineage("materialize", [], 0))
    bank = apply_proposal(empty, Proposal("materialize", [], [s1])).copy()
    bank.version, bank.iteration = 1, 1
    good = {**Proposal("materialize", [], [s1]).describe(), "verdict": "APPROVE", "applied": True}
    bank.operations = [good, {"op": "merge", "targets": "s1", "new": []}, "garbage"]
    save_bank(run, bank)
    analysis = load_skill_analysis(run.root)
    assert analysis.banks["2048"].summary.discovered == 1
    assert sum("operation 1" in p or "operation 2" in p for p in analysis.problems) == 2


def test_an_iterations_skill_use_counts_picks_and_how_each_use_ended():
    """The metrics line's `skill_use`: s1 picked twice (a success, then a switch to s2), s2 once (aborted),
    s1 again to the episode's end; an opponent's steps are not the policy's."""
    from coplay.report.skill_analysis import skill_use

    mine = _traj("e1", 1, [("s1", "", "MERGE"), ("s1", "success", "MERGE"), ("s1", "switch", "MERGE"),
                           ("s2", "abort", "BUILD"), (None, "", "MERGE"), ("s1", "", "MERGE")])
    other = _traj("e2", 1, [("s3", "abort", "BUILD")], policy="expert")
    use = skill_use([mine, other])
    assert (use["steps"], use["steps_with_skill"], use["uses"]) == (6, 5, 4)
    assert use["ended"] == {"abort": 1, "episode end": 1, "success": 1, "switch": 1}
    assert use["per_skill"] == {"s1": {"uses": 3, "success": 1, "abort": 0, "switch": 1},
                                "s2": {"uses": 1, "success": 0, "abort": 1, "switch": 0}}
