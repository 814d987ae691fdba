"""Evaluation and measurement outside the loop (no ray):

    protocol.py  the evaluation protocol (COS-PLAY's): plans on `seeds.eval`, summaries with CIs, files
    runner.py    one in-process runner (engine + episode runners) shared by eval, play and benchmarks
    players.py   who plays in `coplay eval` (bots, the base model, a run's adapters, an endpoint)
    play.py      `coplay play`
    compare.py   `coplay eval --compare`: two evaluations side by side with difference intervals
    stats.py     means with t and bootstrap intervals, Wilson intervals for win rates, paired differences
    ruler.py     the bots on an evaluation's own protocol, the protocol check, paired differences to the bots
    probe.py     the per-decision probe: fixed positions, regret against the game's lookahead, its file
    probe_values.py  how the probe is built: positions from bot play, Monte-Carlo action values
    bench.py     the benchmark suite runner behind `coplay bench`
"""
