"""The skill bank (docs/agents.md): boundaries, segmentation, contracts, curated maintenance, versions.

Pure Python: never imports ray, torch, vllm or transformers. The one entry point is `update_bank`; a model
reaches the bank only through a `ModelCaller`.
"""

from coplay.skills.caller import Completion, FunctionCaller, ModelCaller
from coplay.skills.retrieval import rank_skills, render_ranked, skill_status
from coplay.skills.schema import (
    Bank,
    BankError,
    Contract,
    Skill,
    SkillStats,
    UnknownSkillError,
    bank_key_for,
    bank_keys,
    bank_versions,
    load_bank,
    save_bank,
)
from coplay.skills.update import segment_with_bank, update_bank

__all__ = [
    "Bank", "BankError", "Completion", "Contract", "FunctionCaller", "ModelCaller", "Skill", "SkillStats",
    "UnknownSkillError", "bank_key_for", "bank_keys", "bank_versions", "load_bank",
    "rank_skills", "render_ranked", "save_bank", "segment_with_bank", "skill_status",
    "update_bank",
]
