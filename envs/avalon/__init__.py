"""Avalon (5 seats, hidden roles): `rules` (pure state machine), `text` (views and observations),
`features` (from views), `env` (the PettingZoo AEC env and `RULES`), `bots` (`ExpertBot`, `RandomBot`).
Never imports `coplay`."""
