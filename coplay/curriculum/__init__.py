"""Skill-guided self-play curricula (docs/curriculum.md): a proposer writes tasks (a start position, a goal,
a step bound, and a hidden contract), a gate keeps the valid ones, the solver trains on them.

    task.py     the `Task` record, the JSON schema the proposer answers in, parsing that answer
    gate.py     validity: schema, the env accepts the position, the contract parses, a reference reaches it
    rewards.py  the proposer's gated mid-difficulty reward and the solver's reward
    routing.py  which skill (or the exploration stream) the next proposer prompt is about

Pure modules: no ray, torch or engines.
"""
