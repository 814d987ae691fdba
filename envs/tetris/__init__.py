"""Tetris (``coplay/Tetris-v0``): 10 x 20, 7-bag, 4-piece preview, one placement per step.

Modules: `pieces` (shapes and rotation tables), `rules` (pure board logic and the state dict), `text`
(observation render and parse-back), `features` (the skill vocabulary), `env` (`TetrisEnv`, `RULES`),
`bots` (`ExpertBot`, `RandomBot`). Never imports `coplay`.
"""
