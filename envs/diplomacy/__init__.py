"""Diplomacy (7 powers, standard map) as a PettingZoo Parallel env, adjudicated by the `diplomacy` package.

Modules: `orders` (action grammar and legality), `board` (static map facts), `text` (observation text),
`features` (features from a view), `env` (`DiplomacyEnv`, `RULES`), `start` (seeded start positions: a few
years of bot play from the standard opening), `bots` (`ExpertBot`, `RandomBot`), `negotiation` (the expert's
messages, derived from its intended orders), `evaluate` (expert seat against random seat, with 95%
t-intervals).
The PettingZoo entry points live in `coplay_envs.diplomacy_v0`. Never imports `coplay`.
"""
