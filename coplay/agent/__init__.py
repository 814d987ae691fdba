"""The decision agent (DESIGN.md §4): prompts, retrieval, intention and action parsing.

One prompt builder serves training, evaluation and play. No ray, no vllm; engines are reached only through
the `coplay.engines.base.Engine` interface.
"""
