"""Teacher data for the bank adapters (`segment`, `contract`, `curator`): the deterministic policy's own
decisions, phrased as the answers those adapters are asked for (docs/rewards.md, cold start).

`TeacherCaller` stands in for a model during a deterministic bank update and answers as the deterministic
policy decides: every curator proposal approved (the deterministic policy applies them all) and every
segment ranked in the segmentation's own score order (the order the prompt lists the ids in). The curator
*examples* are then relabelled by what the proposal did to the bank's quality (`label_curator_by_quality`):
APPROVE when ΔQ ≥ 0, REJECT when it fell, the verdict the curator reward pays for — so the SFT'd curator
has seen both answers instead of memorising APPROVE. Contract
examples are the final deterministic protocols of the bank's skills under the prompt `contract_round`
builds. Every prompt and answer is recorded as an example. `seed_bank` builds one seed bank this way and
returns it with its examples (the SkillBankActor's `seed_banks` and benchmarks call it). Pure Python: no ray,
no torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from coplay.config import SkillBankConfig
from coplay.skills.caller import ChatMessages, Completion, FunctionCaller
from coplay.skills.model_rounds import skill_contract_prompt
from coplay.skills.schema import Bank
from coplay.skills.update import update_bank
from coplay.types import Sample, Trajectory

Example = tuple[str, ChatMessages, str]  # (adapter, prompt messages, completion)
_RANK_IDS = re.compile(r"Rank these ids: (.+)$", re.MULTILINE)
SEED_UPDATES = 2  # updates that build the seed bank (the first materializes skills, the second refines them)


def _deterministic_answer(adapter: str, prompt: ChatMessages) -> str:
    if adapter == "curator":
        return "VERDICT: APPROVE"
    if adapter == "segment":
        match = _RANK_IDS.search(prompt[-1]["content"])
        ids = [i.strip() for i in match.group(1).split(",")] if match else ["NEW"]
        return "RANK: " + " > ".join(ids)
    return "(no answer: the deterministic protocol stands)"


class TeacherCaller(FunctionCaller):
    """A caller answering as the deterministic policy and recording (adapter, prompt, answer) examples."""

    def __init__(self) -> None:
        self.examples: list[Example] = []
        super().__init__(self._answer, pass_max_tokens=False)

    def _answer(self, adapter: str, prompts: list[ChatMessages], n: int) -> list[list[Completion | str]]:
        out: list[list[Completion | str]] = []
        for prompt in prompts:
            answer = _deterministic_answer(adapter, prompt)
            if adapter in ("curator", "segment"):
                self.examples.append((adapter, prompt, answer))
            out.append([answer] * n)
        return out

    def label_curator_by_quality(self, samples: Sequence[Sample]) -> int:
        """Relabel the recorded curator examples of one `update_bank` call with the verdict its quality
        change supports, from that call's curator samples (n per prompt, in prompt order, ΔQ in their meta).
        Returns how many examples became REJECT; a count that does not line up is an error, not a guess."""
        where = [i for i, example in enumerate(self.examples) if example[0] == "curator"]
        mine = [s for s in samples if s.adapter == "curator"]
        if not where:
            return 0
        if len(mine) % len(where):
            raise ValueError(f"{len(mine)} curator samples for {len(where)} recorded curator prompts")
        n = len(mine) // len(where)
        rejected = 0
        for j, i in enumerate(where):
            meta = mine[j * n].meta
            worse = float(meta["quality_after"]) < float(meta["quality_before"])
            self.examples[i] = ("curator", self.examples[i][1],
                                "VERDICT: REJECT" if worse else "VERDICT: APPROVE")
            rejected += worse
        return rejected


def contract_examples(bank: Bank) -> list[Example]:
    """The protocol of every skill of `bank` as the `contract` adapter's answer to its prompt."""
    examples: list[Example] = []
    for skill in sorted(bank.skills.values(), key=lambda s: s.id):
        prompt = skill_contract_prompt(bank, skill)
        # the effects line first: it is what the reward scores, it survives an answer cut off at the token
        # limit, and a small model learns a comma list far sooner than the same list inside JSON
        effects = ", ".join(skill.contract.literals) or "(none)"
        protocol = {"summary": skill.summary, "plan": list(skill.plan), "preconditions": skill.preconditions,
                    "success": skill.success, "abort": skill.abort}
        examples.append(("contract", prompt,
                         f"EFFECTS: {effects}\n{json.dumps(protocol, ensure_ascii=False)}"))
    return examples


def seed_bank(bank: Bank, trajectories: Sequence[Trajectory], cfg: SkillBankConfig,
              iteration: int = 0, example_groups: int = 1) -> tuple[Bank, list[Example]]:
    """One bank key's seed bank, built deterministically from teacher trajectories: `SEED_UPDATES` updates
    over interleaved parts of them, then a labelling pass, with `TeacherCaller` answering as the
    deterministic policy. Returns the bank and the bank adapters' teacher examples it recorded (the
    `contract` examples: the protocols of every seed step's bank).

    One build over all trajectories saturates at a handful of skills, so its `contract` and `curator`
    examples stop growing with more episodes (2048: 12 and 8 from 48 episodes). With `example_groups` = G > 1,
    G more builds over disjoint slices of the trajectories (every G-th one) each find their own skills,
    protocols and proposals; their examples are added and their banks dropped."""
    # every segment goes to the (teacher) segment adapter: its answer is the DP order, so nothing changes
    cfg = cfg.with_values({"use_model": True, "segmentation.margin": float("inf")})
    examples: list[Example] = []
    for part in (list(trajectories[i::SEED_UPDATES]) for i in range(SEED_UPDATES)):
        if not part:
            continue
        teacher = TeacherCaller()
        bank, samples, _ = update_bank(bank, part, teacher, cfg, iteration)
        teacher.label_curator_by_quality(samples)
        # every seed step's protocols: more (and more varied) contract prompts than the final bank alone
        examples += teacher.examples + contract_examples(bank)
    if bank.skills:  # a labelling pass over everything against the final skills; its bank is dropped
        teacher = TeacherCaller()
        update_bank(bank, list(trajectories), teacher, cfg, iteration)
        examples += [e for e in teacher.examples if e[0] == "segment"]
    if example_groups > 1:
        for g in range(example_groups):
            part = list(trajectories[g::example_groups])
            if part:
                examples += seed_bank(Bank(bank_key=bank.bank_key), part, cfg, iteration)[1]
    return bank, examples


def dedupe(examples: Sequence[Example], limit_per_adapter: int) -> list[Example]:
    """Drop repeated prompts and keep at most `limit_per_adapter` examples per adapter (first come first)."""
    seen: set[str] = set()
    counts: dict[str, int] = {}
    out: list[Example] = []
    for adapter, prompt, answer in examples:
        key = adapter + json.dumps(prompt, sort_keys=True)
        if key in seen or counts.get(adapter, 0) >= limit_per_adapter:
            continue
        seen.add(key)
        counts[adapter] = counts.get(adapter, 0) + 1
        out.append((adapter, prompt, answer))
    return out
