"""The Ray face of coplay: RolloutWorker, LearnerGroup, SkillBankActor, ArtifactStore.

Only this package and `coplay/loop.py` import ray. Each actor is a thin shell over a pure part
(engines + runners, the learner, the skill bank, the artifact ledger) so those stay testable without Ray.
"""
