"""The skill-bank agent's sections of the config tree (docs/agents.md): boundaries, segmentation, contracts
and maintenance, under `skill_bank`. Imports only pydantic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coplay.config.base import Section


class BoundaryConfig(Section):
    """Boundary proposal: where a trajectory may split into segments (feature changes around a step)."""

    radius: int = Field(2, ge=0, description="steps on each side whose features a boundary score compares")
    threshold: float = Field(1.0, ge=0.0, description="boundary score above which a step is a candidate cut")


class SegmentationConfig(Section):
    """Segmentation: the DP over candidate cuts labelling segments with skills (or NEW)."""

    new_skill_penalty: float = Field(1.0, ge=0.0)
    duration_prior: dict[str, float] = Field(
        default_factory=lambda: {"2048": 6.0, "candy_crush": 4.0, "tetris": 5.0, "mario": 8.0, "avalon": 4.0,
                                 "diplomacy": 3.0},
        description="typical segment length (steps) per game: the segmentation's duration prior")
    max_len: int = Field(40, ge=1, description="longest segment (steps)")
    margin: float = Field(1.0, ge=0.0, description="label margins below this go to the segment adapter")
    rank_weight: float = Field(1.0, ge=0.0, description="score bonus of the segment adapter's first choice")
    max_prompts: int = Field(16, ge=0, description="segment-adapter prompts per update")


class ContractConfig(Section):
    """Contract learning: which literals are a skill's effects, and when an instance passes."""

    eff_freq: float = Field(
        0.5, gt=0.0, le=1.0, description="a literal holding in this share of instances is an effect")
    pass_threshold: float = Field(0.7, gt=0.0, le=1.0)
    literal_window: int = Field(2, ge=1, description="steps in a segment's start and end windows")
    trivial_literal_rate: float = Field(
        0.8, gt=0.0, le=1.0, description="literals holding in this share of all segments are not effects")
    min_literals: int = Field(2, ge=1, description="a materialized skill's contract has at least this many")
    refresh: int = Field(
        4, ge=0, description="per update, skills that gained evidence (most first) whose protocol the "
                             "contract adapter rewrites, besides the skills maintenance created or changed")
    evidence_limit: int = Field(32, ge=1, description="recent instances kept per skill")


class ProposalCaps(Section):
    """Per operation kind, the most proposals one bank update sends to the curator (the rest are counted as
    `deferred_<op>` and proposed again next time, while their evidence still holds). 0 turns a kind off."""

    materialize: int = Field(4, ge=0)
    merge: int = Field(2, ge=0)
    split: int = Field(2, ge=0)
    refine: int = Field(4, ge=0)
    retire: int = Field(2, ge=0)
    induce: int = Field(2, ge=0, description="new skills from the curriculum's exploration stream "
                                             "(`curriculum.induce`, docs/curriculum.md)")


class MaintenanceConfig(Section):
    """Bank maintenance: the operations proposed to the curator (materialize, merge, split, refine, retire),
    from the evidence of segmentation (docs/agents.md "Maintenance"): how often, how many, and on what
    evidence."""

    every: int = Field(1, ge=1, description="propose operations on every k-th update (iteration % k == 0)")
    max_proposals: ProposalCaps = ProposalCaps()
    poor_fit_pending: bool = Field(
        True, description="segments labelled with a skill whose contract they fail also join the pending "
                          "pool that materialize clusters (not only segments labelled NEW)")
    unparseable_verdict: Literal["reject", "quality"] = Field(
        "quality", description="when no curator sample of a proposal gives a verdict: reject it, or decide "
                               "by the held-out bank quality (approve iff it does not drop); counted either "
                               "way")
    quality_gate: bool = Field(
        True, description="apply an operation the curator approved only when the bank's held-out quality "
                          "(the measure every operation records: docs/agents.md \"Maintenance\") falls by "
                          "at most quality_tolerance; one the gate refuses is counted `gated_<op>` and "
                          "recorded (`gated`), with its quality change, like every other. Inductions and "
                          "the model-free seed banks are not gated (coplay/skills/curation.py)")
    quality_tolerance: float = Field(
        0.0, ge=0.0, description="how far the held-out quality may fall for an approved operation to apply "
                                 "(quality_gate), and the line the curator's agreement is judged by")

    min_instances: int = Field(3, ge=1)
    merge_jaccard: float = Field(0.85, gt=0.0, le=1.0)
    split_pass_rate: float = Field(0.7, gt=0.0, le=1.0)
    split_child_pass_rate: float = Field(0.8, gt=0.0, le=1.0)
    retire_after: int = Field(5, ge=1, description="R: iterations unused before retirement")
    score_floor: float = Field(0.2, ge=0.0, le=1.0)
    abort_ratio: float = Field(
        3.0, gt=0.0, description="retire a skill whose runs in play aborted more than this many times as "
                                 "often as they succeeded (over the run, at least min_instances aborts)")
    max_skills: int = Field(64, ge=1)
    pending_limit: int = Field(256, ge=1, description="NEW instances kept for materialization")
    size_penalty: float = Field(0.005, ge=0.0, description="bank quality penalty per skill")


class BankCallsConfig(Section):
    """How a bank update's model calls reach the rollout workers' engines (issue 35 item 3). The old path
    (`concurrent: false`) makes one blocking call per round (segment, curator, contract) to one worker after
    another, seeds by call order; it stays selectable so the benchmark can measure both in one run
    (`benchmarks/bank_calls.py`)."""

    concurrent: bool = Field(
        True, description="send each round's prompts as futures split over every rollout worker, with a seed "
                          "per prompt derived from its content (never from call or completion order), and "
                          "answer prompts already asked in this actor from the content-keyed cache")
    prefetch: bool = Field(
        False, description="with `concurrent`: send the curator and contract prompts the update will "
                           "most likely ask (from the segmentation before the segment adapter answers) "
                           "together with the segment prompts; a round then takes the answers of the "
                           "prompts that came out byte-identical and asks only the others, so the three "
                           "rounds overlap instead of running one after another. Off by default: on the CPU "
                           "engine, which is busy, not idle, between rounds, the guesses a relabel or a "
                           "rejection made useless cost more than the overlap saved (SmolLM2, "
                           "benchmarks/results/bank-calls-smollm2-prefetch.json); where engines have "
                           "idle capacity (several workers, GPUs) it may pay, not measured")
    cache_size: int = Field(
        256, ge=0, description="with `concurrent`: answers (prompt groups) kept across updates, keyed by "
                               "engine adapter name, prompt, n, max_tokens and constraint; 0: only within "
                               "one update. An update asks a few dozen prompts, and a group holds its prompt "
                               "and completion token ids (tens of KB), so a few hundred is plenty")
    chunk_prompts: int = Field(
        0, ge=0, description="with `concurrent`: prompts per submitted call, each call split over the "
                             "workers (0: a round's prompts in one call)")


class SkillBankConfig(Section):
    """The skill-bank agent (docs/agents.md): its stages' thresholds, and how it runs."""

    use_model: bool = True
    constrained_contracts: bool = Field(
        False, description="sample `contract` answers under the protocol's grammar "
                           "(coplay/skills/contract_grammar.py): every finished answer parses and validates, "
                           "the model still chooses effects, plan and thresholds (vLLM structured outputs, "
                           "the same token mask in the HF engine and the learner)")
    queue_size: int = Field(8, ge=1)
    group_size: int = Field(4, ge=1, description="samples per bank-adapter prompt (GRPO group)")
    heldout_every: int = Field(
        4, ge=2, description="every k-th trajectory (sorted by episode id) is held out")
    heldout_window: int = Field(
        1, ge=1, description="the held-out quality (the quality gate's measure, a version's recorded "
                             "quality) is measured on the trajectories held out by this update and the k-1 "
                             "before it (1: this update's alone). Kept in the skill-bank actor's memory: a "
                             "resumed run starts the window over, so above 1 a resume is not bit-exact")
    boundaries: BoundaryConfig = BoundaryConfig()
    segmentation: SegmentationConfig = SegmentationConfig()
    contracts: ContractConfig = ContractConfig()
    maintenance: MaintenanceConfig = MaintenanceConfig()
    calls: BankCallsConfig = BankCallsConfig()
