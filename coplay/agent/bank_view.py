"""The decision agent's view of a skill bank: ranking, rendering and the runtime status of a skill,
delegated to `coplay.skills.retrieval` (one implementation of the abort rule for the agent and the bank)."""

from __future__ import annotations

from typing import Any

from coplay.skills.prompts import render_skill
from coplay.skills.retrieval import rank_skills, skill_status
from coplay.skills.schema import Bank


class BankSkills:
    """`SkillSource` over one bank version."""

    def __init__(self, bank: Bank) -> None:
        self.bank = bank

    def __len__(self) -> int:
        return len(self.bank.skills)

    def candidates(self, features: dict[str, Any], observation: str, k: int) -> list[tuple[str, str]]:
        ranked = rank_skills(self.bank, features, observation, k=k)
        return [(r.skill.id, f"{render_skill(r.skill)}\n  preconditions hold now: "
                             f"{'yes' if r.preconditions_hold else 'no'}") for r in ranked]

    def protocol_text(self, skill_id: str) -> str:
        return render_skill(self.bank.get(skill_id))

    def status(self, skill_id: str, features: dict[str, Any], steps_active: int) -> str:
        status = skill_status(self.bank.get(skill_id), features, steps_active)
        return "active" if status == "running" else status

    def preconditions_hold(self, skill_id: str, features: dict[str, Any]) -> bool:
        return self.bank.get(skill_id).expression("preconditions").holds(features)
