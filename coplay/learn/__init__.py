"""Learning: rewards, GRPO advantages and loss, the multi-adapter learner (plain torch or DeepSpeed ZeRO),
adapter publishing, exact checkpoints, cold-start SFT (docs/rewards.md), and how far each learner step moved
the served policy (`update_size.py`, docs/evaluation.md).

The only package that imports deepspeed (lazily). Never imports ray: the Ray learner group in
`coplay/actors/` wraps `learner.Learner`. Heavy imports stay inside functions so importing this is cheap.
"""
