"""Super Mario Bros. (NES) as a coplay text game: `env.MarioEnv` (gymnasium id `coplay/SuperMarioBros-v0`),
RAM decoding (`ram`), the observation text (`text`), features (`features`) and bots (`bots`).

Modules load lazily through `coplay_envs.registry`; this package never imports `coplay`.
"""
