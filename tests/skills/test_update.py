"""`update_bank` as a whole: bad input, versions on disk, the model rounds and their rewards, retrieval and
the report."""

from __future__ import annotations

import json

import pytest

from coplay.config import SkillBankConfig
from coplay.report.bank import show_bank, write_bank_report
from coplay.runs import RunDir
from coplay.skills import (
    Bank,
    BankError,
    FunctionCaller,
    UnknownSkillError,
    load_bank,
    save_bank,
    update_bank,
)
from coplay.skills.caller import CallerError, Completion
from coplay.skills.retrieval import rank_skills, render_ranked, skill_status
from coplay.skills.rewards import contract_reward, curator_reward, f1, segment_reward
from coplay.skills.schema import bank_versions
from coplay.types import Trajectory
from tests.skills.synthetic import alternating_trajectory, shard

CFG = SkillBankConfig()


def scripted(answers: dict[str, list[str] | str]) -> FunctionCaller:
    """Test double for the model's answers: per adapter one text, or a list used in turn per sample."""
    def generate(adapter, prompts, n):
        texts = answers[adapter]
        texts = texts if isinstance(texts, list) else [texts]
        return [[Completion(text=texts[j % len(texts)], prompt_ids=[1, 2], completion_ids=[3],
                            logprobs=[-0.5])
                 for j in range(n)] for _ in prompts]
    return FunctionCaller(generate)


@pytest.fixture(scope="module")
def bank1() -> Bank:
    return update_bank(Bank("2048"), shard(8), None, CFG, iteration=1)[0]


def test_another_games_trajectory_is_a_clear_error(bank1):
    other = alternating_trajectory(1, game="tetris")
    with pytest.raises(BankError, match=r"2048-syn|tetris-syn.*belongs to bank 'tetris', not to bank '2048'"):
        update_bank(bank1, shard(2) + [other], None, CFG, iteration=2)
    evil = Trajectory("av-1", "avalon", "player_1", "assassin", 1, steps=alternating_trajectory(1).steps)
    with pytest.raises(BankError, match="avalon/evil"):
        update_bank(Bank("avalon/good"), [evil], None, CFG, iteration=1)


def test_empty_trajectories_and_unknown_skill_ids_are_counted(bank1):
    odd = alternating_trajectory(5)
    odd.steps[3].skill_id = "s404"
    empty = Trajectory("2048-empty", "2048", "player_0", "player", 9)
    new, _, report = update_bank(bank1, [odd, empty] + shard(3, 40), None, CFG, iteration=2)
    assert report["empty_trajectories"] == 1 and report["unknown_skill_ids"] == 1
    assert report["trajectories"] == 4
    with pytest.raises(UnknownSkillError, match="s404"):
        new.get("s404")
    nothing, samples, report = update_bank(bank1, [empty], None, CFG, iteration=2)
    assert report["empty_trajectories"] == 1 and samples == [] and nothing.version == bank1.version + 1


def test_update_never_changes_the_previous_version(bank1, tmp_path):
    before = json.dumps(bank1.to_json(), sort_keys=True)
    caller = scripted({"segment": "RANK: NEW", "curator": "VERDICT: APPROVE", "contract": "{}"})
    bank2, _, _ = update_bank(bank1, shard(8, 30), caller, CFG, iteration=2)
    assert json.dumps(bank1.to_json(), sort_keys=True) == before
    run = RunDir.create(tmp_path, "t", "x: 1\n")
    save_bank(run, bank1)
    save_bank(run, bank2)
    with pytest.raises(BankError, match="already exists"):
        save_bank(run, bank2)
    assert bank_versions(run, "2048") == [1, 2]
    assert load_bank(run, "2048", 1).to_json() == bank1.to_json()
    assert load_bank(run, "2048").version == 2
    nested = Bank("avalon/good", version=1)
    save_bank(run, nested)
    assert load_bank(run, "avalon/good").bank_key == "avalon/good"
    (run.root / "banks" / "2048" / "v3.json").write_text("{not json")
    with pytest.raises(BankError, match="v3.json"):
        load_bank(run, "2048", 3)


def test_contract_adapter_protocol_is_applied_when_valid(bank1):
    answer = json.dumps({"summary": "Build up x.", "plan": ["find room", "push x"],
                         "preconditions": "not flag", "success": "flag == true and x > 1", "abort": "false",
                         "effects": ["x↑", "flag=true"]})
    caller = scripted({"segment": "RANK: NEW", "curator": "VERDICT: APPROVE",
                       "contract": f"Sure:\n```{answer}```"})
    new, samples, report = update_bank(Bank("2048"), shard(8), caller, CFG, iteration=1)
    assert report["contract_accepted"] == 2 and report.get("contract_rejected", 0) == 0
    assert all(s.protocol_source.startswith("contract@") and s.summary == "Build up x."
               for s in new.skills.values())
    rewards = sorted(round(s.reward, 4) for s in samples if s.adapter == "contract")
    assert rewards[-1] == 1.3  # x skill: F1({x↑, flag=true}, {x↑, flag=true, score↑}) = 0.8, + 0.5 valid
    assert rewards[0] == pytest.approx(0.5)  # F1 = 0 on the y skill + 0.5 valid


def test_contract_adapter_garbage_is_rejected_and_the_deterministic_protocol_stands(bank1):
    caller = scripted({"segment": "RANK: NEW", "curator": "VERDICT: APPROVE",
                       "contract": ['{"summary": "x", "plan": ["a", "b"], "preconditions": "__import__(1)", '
                                    '"success": "true", "abort": "false"}', "no json at all"]})
    new, samples, report = update_bank(Bank("2048"), shard(8), caller, CFG, iteration=1)
    assert report["contract_rejected"] == 2 and report["contract_invalid_samples"] == 2 * CFG.group_size
    assert all(s.protocol_source == "deterministic" for s in new.skills.values())
    assert all(s.reward is not None and s.reward <= 1.0 for s in samples if s.adapter == "contract")


def test_a_contract_answer_cut_off_or_invalid_is_rejected_but_its_stated_effects_earn_their_f1(bank1):
    cut = 'EFFECTS: x↑, flag=true\n{"summary": "Build up x.", "plan": ["find room", "pu'
    bad = json.dumps({"effects": ["x↑"], "summary": "x", "plan": ["a", "b"], "preconditions": "__import__(1)",
                      "success": "true", "abort": "false"})
    caller = scripted({"segment": "RANK: NEW", "curator": "VERDICT: APPROVE", "contract": [cut, bad]})
    new, samples, report = update_bank(Bank("2048"), shard(8), caller, CFG, iteration=1)
    assert report["contract_rejected"] == 2 and all(s.protocol_source == "deterministic"
                                                    for s in new.skills.values())
    contract = [s for s in samples if s.adapter == "contract"]
    rewards = sorted({round(s.reward, 4) for s in contract})
    assert contract and not any(s.meta["valid"] for s in contract)
    # the x skill's held-out effects are {x↑, flag=true, score↑}: F1 0.8 for the cut answer, 0.5 for {x↑}
    assert {0.8, 0.5} <= set(rewards), rewards  # no validity bonus, and the samples differ: a GRPO signal


def test_skills_that_gained_evidence_get_their_protocol_rewritten_too(bank1):
    answer = ('EFFECTS: x↑\n{"summary": "Rewritten.", "plan": ["a", "b"], "preconditions": "true", '
              '"success": "x > 1", "abort": "false"}')
    caller = scripted({"segment": "RANK: NEW", "curator": "VERDICT: REJECT", "contract": answer})
    new, samples, report = update_bank(bank1, shard(8, 60), caller, CFG, iteration=2)
    asked = {s.meta["skill_id"] for s in samples if s.adapter == "contract"}
    assert asked and asked <= set(bank1.skills)  # nothing new was applied: the asked skills are the used ones
    assert all(new.skills[sid].summary == "Rewritten." for sid in asked)
    quiet = CFG.with_values({"contracts.refresh": 0})
    _, samples0, _ = update_bank(bank1, shard(8, 60), caller, quiet, iteration=2)
    assert not [s for s in samples0 if s.adapter == "contract"]  # refresh off: only maintenance's skills


def test_segment_adapter_ranking_enters_the_score(bank1):
    cfg = CFG.with_values({"segmentation.margin": 1e9, "segmentation.rank_weight": 1e3,
                           "segmentation.max_prompts": 5})
    caller = scripted({"segment": "RANK: NEW > s1 > s2", "curator": "VERDICT: REJECT", "contract": ""})
    new, samples, report = update_bank(bank1, shard(8, 60), caller, cfg, iteration=2)
    seg = [s for s in samples if s.adapter == "segment"]
    assert report["segment_prompts"] == 5 and len(seg) == 5 * cfg.group_size
    assert report["segment_relabels"] == 5 and report["new_segments"] == 5
    assert all(s.meta["label"] == "NEW" and 0.0 <= s.reward <= 2.0 for s in seg)
    assert len({s.group_id for s in seg}) == 5 and seg[0].prompt_ids == [1, 2]
    keep = scripted({"segment": "no idea", "curator": "VERDICT: REJECT", "contract": ""})
    _, samples2, report2 = update_bank(bank1, shard(8, 60), keep, cfg, iteration=2)
    assert report2["segment_unparseable"] == 5 * cfg.group_size and report2.get("segment_relabels", 0) == 0
    by_segment = {s.meta["start"]: s.reward for s in samples2
                  if s.adapter == "segment" and s.meta["episode_id"] == seg[0].meta["episode_id"]}
    assert all(r > 0 for r in by_segment.values())  # kept labels: contracts pass held out


def test_garbage_model_answers_keep_the_bank_valid_and_are_counted(bank1, tmp_path):
    garbage = scripted({"segment": "\x00ξ}{", "curator": "]]]", "contract": "{\"summary\": 3"})
    cfg = CFG.with_values({"segmentation.margin": 1e9})
    new, samples, report = update_bank(bank1, shard(8, 70), garbage, cfg, iteration=2)
    assert report["segment_unparseable"] > 0
    assert all(s.reward is not None for s in samples)
    save_bank(RunDir.create(tmp_path, "g", "x: 1\n"), new)  # still a valid, loadable bank
    assert sorted(new.skills) == sorted(bank1.skills)


def test_caller_contract_violations_are_errors():
    bad = FunctionCaller(lambda adapter, prompts, n: [["only one"]])
    with pytest.raises(CallerError, match="expected n=2"):
        bad.complete("curator", [[{"role": "user", "content": "?"}]], n=2, max_tokens=4)


def test_rewards_match_the_design():
    assert (f1({"a", "b"}, {"b", "c"}) == pytest.approx(0.5) and f1(set(), set()) == 1.0
            and f1({"a"}, set()) == 0.0)
    assert contract_reward(["x↑"], [{"x↑", "y↓"}, {"x↑"}], 0.5, valid=True) == pytest.approx(0.5 + 2 / 3)
    assert contract_reward(["x↑"], [{"x↑", "y↓"}, {"x↑"}], 0.6, valid=False) == pytest.approx(1.0)
    assert segment_reward(0.8, 3.0, 4.0) == pytest.approx(1.55) and segment_reward(0.5, 0.0, 0.0) == 0.5
    assert curator_reward("approve", 0.2, 0.5) == pytest.approx(0.3)
    assert curator_reward("reject", 0.2, 0.5) == pytest.approx(-0.3)
    # no verdict is strictly worse than either verdict, also when the operation leaves Q unchanged
    assert curator_reward(None, 0.5, 0.2) < -0.3 and curator_reward(None, 0.2, 0.5) < -0.3
    assert (curator_reward(None, 0.4, 0.4) < curator_reward("approve", 0.4, 0.4)
            == curator_reward("reject", 0.4, 0.4))


def test_retrieval_ranks_skills_whose_preconditions_hold_first(bank1):
    merge = next(s for s in bank1.skills.values() if "x↑" in s.contract.literals)
    build = next(s for s in bank1.skills.values() if "y↓" in s.contract.literals)
    ranked = rank_skills(bank1, {"flag": False, "shield": False, "x": 0, "y": 9}, k=1)
    assert [r.skill.id for r in ranked] == [merge.id] and ranked[0].preconditions_hold
    ranked = rank_skills(bank1, {"flag": True, "shield": False}, observation="time to build", k=2)
    assert ranked[0].skill.id == build.id
    text = render_ranked(ranked)
    assert f"[{build.id}]" in text and "SKILL: <id>" in text and "preconditions hold now: yes" in text
    assert skill_status(merge, {"flag": True, "shield": False}, 1) == "success"
    assert skill_status(merge, {"flag": False, "shield": True}, 1) == "abort"
    assert skill_status(merge, {"flag": False, "shield": False}, 1) == "running"
    assert skill_status(merge, {"flag": False, "shield": False}, 1000) == "abort"


def test_bank_show_and_report(bank1, tmp_path):
    run = RunDir.create(tmp_path, "r", "x: 1\n")
    save_bank(run, bank1)
    bank2, _, _ = update_bank(bank1, shard(8, 80), None, CFG, iteration=2)
    save_bank(run, bank2)
    text = show_bank(run.root, game="2048")
    assert "bank 2048 v2" in text and all(sid in text for sid in bank2.skills)
    assert "bank 2048 v1" in show_bank(run.root, version=1)
    with pytest.raises(BankError, match="no banks for game 'tetris'"):
        show_bank(run.root, game="tetris")
    page = write_bank_report(run.root).read_text()
    # size and pass-rate charts, and the skill analysis's skills and tags per version, all inline
    assert page.count("<svg") == 4 and "Operations per version" in page and "Skill analysis" in page
    assert all(sid in page for sid in bank2.skills) and "materialize" in page


def test_steps_without_features_are_counted_and_labelling_helper_works(bank1):
    from coplay.skills.update import segment_with_bank

    traj = alternating_trajectory(11)
    traj.steps[0].features_before = {}
    _, _, report = update_bank(bank1, [traj] + shard(3, 90), None, CFG, iteration=2)
    assert report["steps_without_features"] == 1
    segments = segment_with_bank(bank1, alternating_trajectory(12), CFG)
    assert segments and all(s.label in bank1.skills for s in segments)


def test_the_skill_bank_imports_no_heavy_framework():
    import subprocess
    import sys

    code = ("import sys, coplay.skills, coplay.report.bank, coplay.skills.retrieval, "
            "coplay.skills.model_rounds; "
            "heavy = [m for m in ('torch', 'ray', 'vllm', 'transformers', 'deepspeed', 'matplotlib') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_updates_are_deterministic_across_hash_seeds():
    import hashlib
    import os
    import subprocess
    import sys

    code = ("import json, hashlib; from coplay.config import SkillBankConfig; from coplay.skills import "
            "Bank, update_bank; from tests.skills.synthetic import shard; cfg = SkillBankConfig(); "
            "b = Bank('2048')\n"
            "for it in (1, 2): b, s, r = update_bank(b, shard(6, 10 * it, kinds='ABC'), None, cfg, it)\n"
            "print(hashlib.sha256(json.dumps(b.to_json(), sort_keys=True).encode()).hexdigest())")
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": "."}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.strip())
    assert len(digests) == 1 and hashlib.sha256().hexdigest() not in digests


def test_a_caller_answering_as_the_deterministic_policy_reproduces_the_deterministic_bank():
    from coplay.skills.teacher import TeacherCaller

    cfg = CFG.with_values({"segmentation.margin": 1e9})
    plain = teacher = Bank("2048")
    for it in (1, 2):
        plain, _, _ = update_bank(plain, shard(8, 100 * it, kinds="ABC"), None, cfg, it)
        caller = TeacherCaller()
        teacher, samples, report = update_bank(teacher, shard(8, 100 * it, kinds="ABC"), caller, cfg, it)
    assert report["segment_prompts"] > 0 and report.get("segment_relabels", 0) == 0
    assert {a for a, _, _ in caller.examples} == {"segment", "curator"}
    assert [s.to_json() for s in teacher.skills.values()] == [s.to_json() for s in plain.skills.values()]


def test_teacher_curator_examples_say_what_the_quality_change_supports():
    """The teacher applies every proposal (the deterministic bank), but its curator examples answer
    APPROVE only where bank quality did not fall, so the SFT'd curator sees both verdicts."""
    from coplay.skills.teacher import TeacherCaller

    caller = TeacherCaller()
    _, samples, _ = update_bank(Bank("2048"), shard(8, 100, kinds="ABC"), caller, CFG, 1)
    curator = [s for s in samples if s.adapter == "curator"]
    assert curator and all(s.meta["verdict"] == "approve" for s in curator)
    rejected = caller.label_curator_by_quality(samples)
    answers = [answer for adapter, _, answer in caller.examples if adapter == "curator"]
    expected = ["VERDICT: REJECT" if s.meta["quality_after"] < s.meta["quality_before"]
                else "VERDICT: APPROVE"
                for s in curator[:: CFG.group_size]]
    assert answers == expected and rejected == expected.count("VERDICT: REJECT")
    with pytest.raises(ValueError, match="curator samples"):
        caller.label_curator_by_quality(curator[:-1])


def test_teacher_contract_answers_state_the_effects_first_and_parse_back():
    from coplay.skills.prompts import parse_protocol
    from coplay.skills.teacher import contract_examples

    bank, _, _ = update_bank(Bank("2048"), shard(8, 100, kinds="ABC"), None, CFG, 1)
    examples = contract_examples(bank)
    assert examples
    for (_, _, answer), skill in zip(examples, sorted(bank.skills.values(), key=lambda s: s.id), strict=True):
        assert answer.startswith("EFFECTS: ")
        protocol, effects = parse_protocol(answer, bank.features)
        assert effects == sorted(skill.contract.literals) and protocol["success"] == skill.success


def test_the_effects_line_is_read_item_by_item():
    from coplay.skills.prompts import read_effects

    features = ["x", "flag"]
    assert read_effects("EFFECTS: x↑, flag=true\n{", features) == ["flag=true", "x↑"]
    # an item that is no literal stays as text (it lowers precision); the JSON after the line is not read
    assert (read_effects("effects: x↑, garbage ##\n{\"effects\": [\"flag=true\"]}", features)
            == ["garbage ##", "x↑"])
    assert read_effects("EFFECTS: (none)\n{}", features) == []
    # the JSON form still reads
    assert read_effects('{"effects": ["x↓"], "summary": "s"}', features) == ["x↓"]
    assert read_effects("no effects stated", features) is None


def test_renamed_avalon_roles_still_route_evil_seats_to_the_evil_bank():
    """Bank keys follow the role id, never its display label: a servant shown as "Minion" stays good, a
    minion shown as "Mordred" is evil."""
    from coplay.rollout.bot_episodes import play_bot_episodes
    from coplay.skills.schema import bank_key_for

    labels = {"minion": "Mordred", "assassin": "Merlin", "merlin": "Assassin", "servant": "Minion"}
    trajectories = play_bot_episodes("avalon", "random", [0, 1, 2], env_kwargs={"role_names": labels})
    for seed in (0, 1, 2):
        keys = {t.role: bank_key_for(t.game, t.seat, t.role) for t in trajectories if t.seed == seed}
        assert keys == {"minion": "avalon/evil", "assassin": "avalon/evil", "merlin": "avalon/good",
                        "servant": "avalon/good"}, keys
    assert sum(bank_key_for(t.game, t.seat, t.role) == "avalon/evil" for t in trajectories) == 2 * 3


def test_earlier_held_out_trajectories_are_measured_and_never_trained_on():
    """`skill_bank.heldout_window`: the held-out quality is measured on this update's held-out trajectories
    and those earlier updates held out; the earlier ones add nothing the update learns from."""
    from coplay.skills.curation import skills_fingerprint

    bank, _, _ = update_bank(Bank(bank_key="2048"), shard(8), None, CFG, 1)
    fresh, earlier = shard(4, first_seed=100), shard(3, first_seed=200)
    alone, _, own = update_bank(bank, fresh, None, CFG, 2)
    pooled, _, both = update_bank(bank, fresh, None, CFG, 2, heldout_pool=earlier)
    assert (own["heldout_trajectories"], own["heldout_earlier"]) == (1, 0)
    assert (both["heldout_trajectories"], both["heldout_earlier"]) == (4, 3)
    assert both["heldout_segments"] > own["heldout_segments"]
    assert skills_fingerprint(pooled) == skills_fingerprint(alone)
    assert (pooled.segments_seen, pooled.literal_counts) == (alone.segments_seen, alone.literal_counts)
    assert own["boundary_candidates"] == both["boundary_candidates"]  # the earlier ones are not counted
    # a lone trajectory is trained on; with earlier ones it is measured on those alone
    _, _, lone = update_bank(bank, fresh[:1], None, CFG, 2, heldout_pool=earlier)
    assert lone["heldout_trajectories"] == 3 and not lone["heldout_is_train"]


def test_the_bank_actor_keeps_the_last_updates_held_out_trajectories(monkeypatch):
    """The actor passes each update the trajectories the previous `heldout_window - 1` updates held out."""
    import coplay.actors.skill_bank_actor as actor_module
    from coplay.config import CoplayConfig
    from coplay.types import Shard, encode_shard

    class Store:
        class publish_bank:  # noqa: N801 - stands in for an actor method
            @staticmethod
            def remote(*args):
                return None

    pools = []
    real_update = actor_module.update_bank

    def update(*args, heldout_pool=(), **kwargs):
        pools.append(sorted(t.episode_id for t in heldout_pool))
        return real_update(*args, heldout_pool=heldout_pool, **kwargs)

    monkeypatch.setattr(actor_module, "named_actor", lambda a: a)
    monkeypatch.setattr(actor_module.ray, "get", lambda ref: ref)
    monkeypatch.setattr(actor_module, "update_bank", update)
    cfg = CoplayConfig(skill_bank={"use_model": False, "heldout_window": 3}).model_dump()
    impl = actor_module.SkillBankImpl(cfg, Store(), [])
    for iteration in range(1, 5):
        trajectories = shard(4, first_seed=10 * iteration)
        impl.submit(iteration, encode_shard(Shard(f"s{iteration}", iteration, 0, trajectories)))
        impl.update(iteration, {})
    held = [f"2048-syn-{10 * k + 3:04d}" for k in range(1, 5)]  # every 4th of each update's four
    assert pools == [[], held[:1], held[:2], held[1:3]]
