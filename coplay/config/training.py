"""Checks a config must pass to *train* (not to evaluate or play): `require_trainable(cfg)` raises a one-line
`ConfigError` naming the key, the value and what is allowed. `coplay train`, `launch/train.py`, the loop
itself and the standalone learner call it before anything starts. Imports only the config tree; which games
have seats is `coplay_envs`' fact, imported only when a `rollout.grouping=state` config is checked.
"""

from __future__ import annotations

from coplay.config.loading import ConfigError
from coplay.config.tree import CoplayConfig


def require_trainable(cfg: CoplayConfig) -> None:
    """Refuse a config whose training would be wrong or wasteful.

    More rollout workers than episodes per iteration: the surplus would never roll out (groups are split
    across workers when there are fewer groups than workers, `coplay.driver.spread`, so only this case idles).

    `sampling.top_p < 1`: the engines report each token's log-prob under the top-p-truncated distribution it
    was drawn from, while the learner's log-probs are over the full distribution at the same temperature, so
    every GRPO ratio would be biased (by the truncated mass) from the first step on. Evaluation and play may
    use top_p < 1; training may not.

    `ablation.variant=sft_final_bank`: `ablation.bank_from` must hold a bank of every game of the run (checked
    here, before Ray starts, rather than when the cold start reaches for it).

    `curriculum.enabled` with only multi-seat games: tasks are written for single-player games, so the
    proposer would be served and trained on nothing.

    `rollout.grouping=state` with a multi-seat game (`require_state_grouping`).
    """
    episodes = episodes_per_iteration(cfg)
    if cfg.rollout.workers > episodes:
        trunks = (f" + rollout.state_groups.trunks={cfg.rollout.state_groups.trunks}"
                  if cfg.rollout.grouping == "state" else "")
        raise ConfigError(
            f"rollout.workers={cfg.rollout.workers}: an iteration plays {episodes} episodes "
            f"({len(cfg.games)} game(s) x (rollout.start_states={cfg.rollout.start_states} x "
            f"rollout.group_size={cfg.rollout.group_size}{trunks})), so {cfg.rollout.workers - episodes} "
            f"workers would idle; raise rollout.start_states or rollout.group_size, or use fewer workers")
    require_state_grouping(cfg)
    try:  # before Ray starts: a variant whose bank cannot be found never begins
        cfg.ablation.final_bank_files(cfg.games)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    top_p = cfg.sampling.top_p
    if top_p < 1.0:
        raise ConfigError(
            f"sampling.top_p={top_p}: training needs 1.0 (the engine's behaviour log-probs would be of the "
            f"top-p-truncated distribution, the learner's of the full one, biasing every GRPO ratio); "
            f"set sampling.top_p=1.0 (evaluation and play may use top_p < 1)")
    single = [g for g in cfg.games if g not in ("avalon", "diplomacy")]
    if cfg.curriculum.enabled and not single:
        raise ConfigError(
            f"curriculum.enabled=true with games={cfg.games}: curriculum tasks are written for the "
            f"single-player games (2048, candy_crush, tetris, mario); add one, or set "
            f"curriculum.enabled=false")


def episodes_per_iteration(cfg: CoplayConfig) -> int:
    """Episodes (single-player; multi-seat: games) one iteration plays: per game start_states x group_size,
    plus, with state grouping, the trunks."""
    trunks = cfg.rollout.state_groups.trunks if cfg.rollout.grouping == "state" else 0
    return len(cfg.games) * (cfg.rollout.start_states * cfg.rollout.group_size + trunks)


def require_state_grouping(cfg: CoplayConfig) -> None:
    """`rollout.grouping=state` replays recorded states (`reset(options={"state": ...})`) and gives the seat's
    one decision a continuation return: defined for the single-player games only (in a multi-seat game the
    other seats' answers, hidden roles and press would have to be replayed too)."""
    if cfg.rollout.grouping != "state":
        return
    import coplay_envs

    multi = [g for g in cfg.games if coplay_envs.seats(g)]
    if multi:
        single = [g for g in coplay_envs.GAME_KEYS if not coplay_envs.seats(g)]
        raise ConfigError(
            f"rollout.grouping=state with games={cfg.games}: {multi} have several seats; state groups are "
            f"for the single-player games {single}; set rollout.grouping=episode or drop {multi}")
