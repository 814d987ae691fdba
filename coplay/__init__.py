"""coplay: co-evolving a decision agent and a skill-bank agent for long-horizon games (COS-PLAY) on Ray,
vLLM and DeepSpeed.

    config/     the one typed config tree (YAML + dotted overrides)
    types.py    records that cross process boundaries + the msgpack shard codec
    runs.py     the run folder;  files.py  atomic writes and sha256;  security.py  Ray on loopback, no pickle
    models/     base model + tokenizer loading, LoRA specs, the tiny test model
    engines/    token-in/token-out inference (vllm, hf) and adapter hot swap
    agent/      the decision agent: prompts, retrieval, parsing, OpenAI-compatible seats
    skills/     the skill bank (pure Python)
    rollout/    episode runners
    learn/      rewards, advantages, GRPO, SFT, the learner, checkpoints
    artifacts/  adapter bundles and bank versions: manifests, the ledger, serving and republishing
    driver/     the loop's driver side: schedule, plans, batches, state and resume, cold start, metrics
    actors/     the Ray face: RolloutWorker, LearnerGroup, SkillBankActor, ArtifactStore, System
    eval/       evaluation protocol, players, play, compare, stats, the benchmark suite runner
    report/     the HTML run report and the bank report
    loop.py     the co-evolution loop, one screen;  cli.py  the `coplay` command (cli_eval.py: eval, play)

`import coplay` must stay fast: nothing heavy (torch, ray, vllm, deepspeed) is imported here or at module
level of the config, records and run-folder modules.
"""

__version__ = "0.1.0"
