"""Diplomacy (7 powers, standard map) as a PettingZoo Parallel env, adjudicated by the `diplomacy` package.

Modules: `orders` (action grammar and legality), `board` (static map facts), `text` (observation text),
`features` (features from a view), `env` (`DiplomacyEnv`, `RULES`), `bots` (`ExpertBot`, `RandomBot`),
`evaluate` (expert seat against random seat, with 95% t-intervals).
The PettingZoo entry points live in `coplay_envs.diplomacy_v0`. Never imports `coplay`.
"""
