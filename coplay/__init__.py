"""coplay: co-evolving a decision agent and a skill-bank agent for long-horizon games (COS-PLAY) on Ray,
vLLM and DeepSpeed.

`import coplay` must stay fast: nothing heavy (torch, ray, vllm, deepspeed) is imported here or at module
level of the config, records and run-folder modules.
"""

__version__ = "0.1.0"
