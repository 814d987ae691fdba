"""The `probe` section: the per-decision probe (`coplay.eval.probe`) inside a run, and the prompts on which
each learner step's served-policy KL is measured (`coplay.learn.update_size`). Imports only pydantic.
"""

from __future__ import annotations

from pydantic import Field

from coplay.config.base import Section


class ProbeConfig(Section):
    """A fixed, versioned set of positions per single-player game; the policy's chosen action at each is
    scored by its regret against the game's own Monte-Carlo lookahead (docs/evaluation.md)."""

    every: int = Field(
        1, ge=0, description="play the probe every P iterations and after the cold start (0 = never); one "
                             "decision per position, on the rollout workers")
    positions: int = Field(128, ge=1, description="positions per game (the probe's build parameter)")
    cache_dir: str | None = Field(
        None, description="where built probes are kept (None: ~/.cache/coplay/probes); rebuilt when absent "
                          "or when their version, parameters or checksum do not match")
    kl_prompts: int = Field(
        4, ge=0, description="per learner step and adapter, the prompts on which KL(prev ‖ new) of the "
                             "served policy is measured: the probe's act prompts, else the step's own "
                             "first samples (0 = weight change only); two forwards of the policy per "
                             "prompt and published adapter")
