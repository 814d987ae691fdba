"""The driver's side of the co-evolution loop (`coplay/loop.py` composes these; no ray here).

    schedule.py    which adapter and bank versions each iteration uses; `VersionLedger`, `BankSchedule`
    plans.py       which episodes an iteration plays, with whom (seeds, GRPO groups)
    lineups.py     multi-seat games: one line-up per group, the learner's seat schedule, the opponent pool
    league.py      OpenSkill ratings of every pool member, `league.json`, PFSP opponent draws
    spread.py      how an iteration's episodes are spread over the rollout workers (no worker idles)
    serving.py     which frozen `act` versions the workers serve (bounded by `engine.max_loras`)
    batch.py       rewards and advantages of a learner step's batch; `train_on` (one learner step)
    records.py     what the loop carries between phases: `IterationData`, `CollectStats`
    state.py       `LoopState`, the cold start or `--resume` of a run, the checkpoint of the loop state
    preflight.py   the run folder checked before Ray starts; stopped, finished and extended runs
    interrupt.py   Ctrl-C and SIGTERM: a bounded shutdown, then a forced stop with the driver's stacks
    cold_start.py  step 0: fresh adapters, seed banks from expert trajectories, SFT on teacher data
    evaluation.py  the evaluation protocol on the run's rollout workers
    probe.py       the per-decision probe on the run's rollout workers, the bots beside it
    metrics.py     the per-iteration metrics record and where it goes (jsonl, TensorBoard, W&B, console)
    progress.py    progress bars and phase lines on the console; third-party logs kept at WARNING
    demo.py        `coplay demo` (`make demo`)
"""
