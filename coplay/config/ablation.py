"""The ablation switch (docs/ablations.md): `ablation.variant` turns parts of COS-PLAY off, one variant per
row of the paper's ablation over single-player games. `VARIANT_PARTS` is the one place that says what a
variant means; every decision in the run (cold start, prompts, retrieval, learner steps, bank updates) reads
it through `AblationConfig`'s properties, never the variant's name. Imports only pydantic and the standard
library.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from coplay.config.base import Section

Variant = Literal["full", "sft_only", "sft_first_bank", "sft_final_bank", "grpo_no_bank", "grpo_first_bank",
                  "base"]


@dataclass(frozen=True)
class VariantParts:
    """What runs under one variant.

    `sft`: the cold-start SFT of the adapters the variant uses (`sft.enabled` must also be on);
    `grpo`: learner steps after the cold start (rollouts and evaluations happen every iteration regardless);
    `bank`: skills in the decision agent's prompts (`retrieve` called, the act prompt's skill section shown);
    `bank_updates`: the skill-bank agent updates the bank from the policy's trajectories (otherwise the bank
    stays frozen at the one the run starts with);
    `bank_source`: where that bank comes from: `seed` (built from expert trajectories at the cold start) or
    `final` (a finished run's newest bank, `ablation.bank_from`);
    `adapters`: the model plays through its `act`/`retrieve` adapters (off: the base model itself)."""

    sft: bool
    grpo: bool
    bank: bool
    bank_updates: bool
    bank_source: Literal["seed", "final"] = "seed"
    adapters: bool = True


VARIANT_PARTS: dict[str, VariantParts] = {
    "full": VariantParts(sft=True, grpo=True, bank=True, bank_updates=True),
    "sft_only": VariantParts(sft=True, grpo=False, bank=False, bank_updates=False),
    "sft_first_bank": VariantParts(sft=True, grpo=False, bank=True, bank_updates=False),
    "sft_final_bank": VariantParts(sft=True, grpo=False, bank=True, bank_updates=False, bank_source="final"),
    "grpo_no_bank": VariantParts(sft=True, grpo=True, bank=False, bank_updates=False),
    "grpo_first_bank": VariantParts(sft=True, grpo=True, bank=True, bank_updates=False),
    "base": VariantParts(sft=False, grpo=False, bank=False, bank_updates=False, adapters=False),
}


class AblationConfig(Section):
    """Which parts of co-evolution run (`ablation.variant`, default `full`: all of them). See
    `VARIANT_PARTS` and docs/ablations.md."""

    variant: Variant = Field(
        "full", description="full | sft_only | sft_first_bank | sft_final_bank | grpo_no_bank | "
                            "grpo_first_bank | base (docs/ablations.md)")
    bank_from: str | None = Field(
        None, description="sft_final_bank only: a finished run folder whose newest bank of each game is "
                          "used, frozen")

    @model_validator(mode="after")
    def _bank_from(self) -> AblationConfig:
        if self.parts.bank_source == "final" and not self.bank_from:
            raise ValueError(f"ablation.variant={self.variant} needs ablation.bank_from=RUN_DIR (a finished "
                             f"run folder with banks/<game>/v<n>.json)")
        if self.bank_from and self.parts.bank_source != "final":
            raise ValueError(f"ablation.bank_from={self.bank_from!r} is only read by "
                             f"ablation.variant=sft_final_bank, not {self.variant}")
        return self

    @property
    def parts(self) -> VariantParts:
        return VARIANT_PARTS[self.variant]

    @property
    def runs_sft(self) -> bool:
        return self.parts.sft

    @property
    def trains_grpo(self) -> bool:
        return self.parts.grpo

    @property
    def uses_bank(self) -> bool:
        return self.parts.bank

    @property
    def updates_bank(self) -> bool:
        return self.parts.bank_updates

    @property
    def uses_adapters(self) -> bool:
        return self.parts.adapters

    def final_bank_files(self, games: list[str]) -> dict[str, Path]:
        """{bank key: newest `banks/<key>/v<n>.json`} of `bank_from` for every bank key of `games`
        (`2048`, or `avalon/good` ...); {} unless the variant reads a final bank. `ValueError` naming the
        folder and the game when a game has no bank there."""
        if self.parts.bank_source != "final" or not self.bank_from:
            return {}
        root = Path(self.bank_from).expanduser() / "banks"
        if not root.is_dir():
            raise ValueError(f"ablation.bank_from={self.bank_from!r}: {root} is not a folder; expected a "
                             f"finished run folder with banks/<game>/v<n>.json")
        out: dict[str, Path] = {}
        for game in games:
            top = root / game
            folders = [top, *sorted(p for p in top.iterdir() if p.is_dir())] if top.is_dir() else []
            for folder in folders:
                versions = [(int(p.stem[1:]), p) for p in folder.glob("v*.json") if p.stem[1:].isdigit()]
                if versions:
                    out[folder.relative_to(root).as_posix()] = max(versions)[1]
            if not any(key == game or key.startswith(f"{game}/") for key in out):
                raise ValueError(f"ablation.bank_from={self.bank_from!r}: no bank of game {game} "
                                 f"(no {root}/{game}/v<n>.json); expected a finished run of that game")
        return out
