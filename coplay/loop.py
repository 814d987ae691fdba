"""The co-evolution loop (DESIGN.md §6), top to bottom: cold start, then per iteration k
sync -> rollouts k  ||  bank update over k-1  ||  GRPO step k-1 (staleness >= 1) -> collect -> (s = 0: GRPO step k)
-> metrics, evaluation, checkpoint. Rollouts of k use the adapters of learner step max(0, k-1-s) and the bank
built from iterations <= k-2; learner step j trains on the samples of iteration j, so every episode lands in
training exactly once. Dead rollout workers and bank updates are re-run (`System.gather`, `bank_result`);
`resume` continues a run folder from its last checkpoint (`coplay.resume`). Only this module and `coplay/actors/` import ray.
"""

from __future__ import annotations

import time
from pathlib import Path

import ray

from coplay.actors.system import System, checkpoint, evaluate
from coplay.config import CoplayConfig
from coplay.iteration import iteration_plans, nonzero_advantages, training_batch
from coplay.metrics_log import MetricsLog
from coplay.resume import fresh_state, resumable_checkpoint, resume_state, trained_episodes
from coplay.runs import RunDir
from coplay.schedule import VersionLedger, bank_version_for, policy_step_for
from coplay.security import ray_init_kwargs
from coplay.summaries import iteration_record, reward_parts


def train(cfg: CoplayConfig, resume: str | Path | None = None) -> Path:
    """Run the loop; returns the run folder. `resume`: an existing run folder to continue from its last
    checkpoint (`coplay.resume` says exactly what is restored)."""
    run = RunDir.open(resume) if resume else RunDir.create(cfg.run.out_dir, cfg.run.name, cfg.to_yaml())
    if resume:
        resumable_checkpoint(run)
    log = MetricsLog(run, cfg.logging, cfg.model_dump(mode="json"))
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(**ray_init_kwargs(cfg.cluster))
    system = None
    try:
        system = System(cfg, run)
        at_start = evaluate if cfg.loop.eval_at_start else None
        state = resume_state(system, cfg, log) if resume else fresh_state(system, cfg, log, at_start)
        ledger, banks, data, s = state.ledger, state.banks, state.data, cfg.loop.staleness
        for k in range(state.next_iteration, cfg.loop.iterations + 1):
            t0 = time.perf_counter()
            versions, bank_versions = ledger.at(policy_step_for(k, s)), banks[bank_version_for(k)]
            frozen = sorted({v["act"] for v in ledger.steps.values()} - {versions["act"]})
            system.sync(versions, frozen, bank_versions)
            t_sync = time.perf_counter()
            rollouts = system.launch(k, iteration_plans(cfg, k, versions, frozen, bank_version_for(k)))
            bank_job = system.bank_update(k - 1, data[k - 1][3], versions, banks[max(banks)]) if k > 1 else None
            train_metrics = train_step(system, cfg, ledger, data, k - 1) if s >= 1 and k > 1 else {}
            trajectories, shards, stats = system.collect(rollouts)
            t_collected = time.perf_counter()
            bank = system.bank_result(bank_job)
            stats.update(sync_s=t_sync - t0, bank_wait_s=time.perf_counter() - t_collected, bank_s=bank.get("seconds", 0.0))
            banks[k - 1] = {**banks[max(banks)], **bank["versions"]} if k > 1 else banks[0]
            data[k] = (trajectories, bank["samples"], bank_versions, shards)
            data.pop(k - 2, None)
            if s == 0:
                train_metrics = train_step(system, cfg, ledger, data, k)
            record = iteration_record(k, trajectories, stats, bank, train_metrics, versions, bank_versions,
                                      time.perf_counter() - t0)
            record["faults"] = system.take_faults()
            if train_metrics:  # which episodes the learner step trained on (exactly-once audits)
                record["train"].update({key: train_metrics[key] for key in ("trained_iteration", "trained_episodes")})
            if cfg.loop.eval_every and k % cfg.loop.eval_every == 0:
                record["eval"] = evaluate(system, k, ledger.at(ledger.latest_step), banks[max(banks)])
            save = k % cfg.loop.checkpoint_every == 0 or (k == cfg.loop.iterations and s == 0)
            record["checkpoint"] = str(run.checkpoint_dir(k)) if save else None
            log.log(k, record)  # first: metrics always cover what a checkpoint holds
            if save:
                checkpoint(system, k, ledger.steps, banks, data[k])
        if s >= 1 and ledger.latest_step < cfg.loop.iterations:  # the last iteration's samples still train
            final = train_step(system, cfg, ledger, data, cfg.loop.iterations)
            final["checkpoint"] = str(run.checkpoint_dir(cfg.loop.iterations))
            log.log(cfg.loop.iterations + 1, {"final_train": final, "reward_parts": final["reward_parts"]})
            checkpoint(system, cfg.loop.iterations, ledger.steps, banks, data[cfg.loop.iterations])
        newest = ledger.at(ledger.latest_step)  # every worker ends on the newest versions, acknowledged
        system.sync(newest, [], banks[max(banks)])
        log.log(cfg.loop.iterations + 1, {"final_versions": newest, "final_bank_versions": banks[max(banks)],
                                          "acknowledgements": system.acknowledgements(newest, banks[max(banks)])})
    finally:
        log.close()
        if system is not None:
            system.shutdown()
        if started_ray:
            ray.shutdown()
    return run.root


def train_step(system: System, cfg: CoplayConfig, ledger: VersionLedger, data: dict, j: int) -> dict:
    """Learner step j on the samples of iteration j (rewards with the banks those episodes played with)."""
    trajectories, bank_samples, bank_versions, _ = data[j]
    samples, advantages = training_batch(cfg, trajectories, system.banks_for(bank_versions), bank_samples)
    metrics = system.train(samples, advantages)
    metrics["nonzero_advantages"] = nonzero_advantages(samples, advantages)
    metrics["reward_parts"] = reward_parts(samples)
    metrics["trained_iteration"], metrics["trained_episodes"] = j, trained_episodes(trajectories)
    ledger.record(j, metrics["published"])
    return metrics
