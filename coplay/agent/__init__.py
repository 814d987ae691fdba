"""The decision agent (docs/agents.md): prompts, retrieval, intention and action parsing.

One prompt builder serves training, evaluation and play. No ray, no vllm; engines are reached only through
the `coplay.engines.base.Engine` interface.
"""
