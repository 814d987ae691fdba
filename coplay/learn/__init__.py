"""Learning: rewards, GRPO advantages and loss, the multi-adapter learner (plain torch or DeepSpeed ZeRO),
adapter publishing, exact checkpoints and cold-start SFT (docs/rewards.md).

The only package that imports deepspeed (lazily). Never imports ray: the Ray learner group in
`coplay/actors/` wraps `learner.Learner`. Heavy imports stay inside functions so importing this is cheap.
"""
