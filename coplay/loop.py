"""The co-evolution loop (docs/architecture.md), top to bottom: cold start, then per iteration k
sync -> rollouts k  ||  bank update over k-1  ||  GRPO step k-1 (staleness >= 1) -> collect
-> (s = 0, or the last iteration: GRPO step k) -> evaluation, probe, metrics, checkpoint. Rollouts of k use
the adapters of learner step max(0, k-1-s) and the bank built from iterations <= k-2
(`coplay.driver.schedule`); learner step j trains on the samples of iteration j, so every episode lands in
training exactly once. Dead rollout workers and bank updates are re-run (`System.gather`,
`System.bank_result`); `resume` continues a run folder from its last checkpoint (`coplay.driver.state`). A
`PhaseClock` lap ends each phase: every metrics line says how its wall time split between them
(`coplay.driver.phases`). Only this module and `coplay/actors/` import ray.
"""

from __future__ import annotations

import time
from pathlib import Path

import ray
from ray.exceptions import RayActorError, RayTaskError

from coplay.actors.connect import start_ray
from coplay.actors.system import System
from coplay.config import CoplayConfig, require_trainable
from coplay.driver.batch import train_last, train_on
from coplay.driver.curriculum import curriculum_samples
from coplay.driver.evaluation import evaluate
from coplay.driver.interrupt import note_run_folder
from coplay.driver.lineups import check_schedule
from coplay.driver.metrics import MetricsLog, final_train_record, iteration_record
from coplay.driver.phases import PhaseClock, iteration_phases
from coplay.driver.plans import iteration_plans
from coplay.driver.preflight import restart_in_place, resume_point, run_stopped
from coplay.driver.probe import RunProbe, probe_due, run_probe
from coplay.driver.schedule import bank_version_for, policy_step_for
from coplay.driver.serving import frozen_opponents
from coplay.driver.state import LoopState, fresh_state, resume_state, save_checkpoint
from coplay.report import write_report
from coplay.runs import RunDir


def train(cfg: CoplayConfig, resume: str | Path | None = None) -> Path:
    """Run the loop; returns the run folder. `resume`: an existing run folder to continue from its last
    checkpoint (`coplay.driver.state` says exactly what is restored; `coplay.driver.preflight` checks the
    folder first, before Ray starts). Ctrl-C / SIGTERM end it as `RunStopped`: Ray and the engines shut down
    and the folder stays resumable."""
    require_trainable(cfg)
    check_schedule(cfg)
    run = RunDir.open(resume) if resume else RunDir.create(cfg.run.out_dir, cfg.run.name, cfg.to_yaml())
    note_run_folder(run.root)  # a stop forced after a hung shutdown names it
    point = resume_point(run, cfg) if resume else None
    if point is not None and point.checkpoint is None:
        restart_in_place(run)
    log = MetricsLog(run, cfg.logging, cfg.model_dump(mode="json"))
    clock = PhaseClock()  # the phase timeline (coplay.driver.phases): a lap ends each phase
    started_ray, system = not ray.is_initialized(), None
    try:
        if started_ray:
            start_ray(cfg.cluster, cfg.logging.verbose)
        clock.lap("startup_ray")
        system = System(cfg, run)
        clock.lap("startup_learner")  # the engines start meanwhile; the start's line waits for them
        probe = RunProbe.load(cfg) if probe_due(cfg, 0) else None  # built once, then read from its cache
        clock.lap("evaluation")
        at_start = evaluate if cfg.eval.at_start else None
        state = (resume_state(system, cfg, log, clock) if point and point.checkpoint
                 else fresh_state(system, cfg, log, at_start, probe, clock))
        s = cfg.loop.staleness
        for k in range(state.next_iteration, cfg.loop.iterations + 1):
            t0 = time.perf_counter()
            versions, bank_versions = state.ledger.at(policy_step_for(k, s)), state.banks.for_iteration(k)
            frozen = frozen_opponents(cfg, state.ledger.act_versions(), versions["act"])
            system.sync(versions, frozen, bank_versions)
            sync_s = clock.lap("publish_sync")
            plans = iteration_plans(cfg, k, versions, frozen, bank_version_for(k), state.league,
                                    previous=state.data.get(k - 1))  # anchors of rollout.grouping=state
            rollouts = system.launch(k, plans)
            bank_job = (system.bank_update(state.data[k - 1], versions, state.banks.latest())
                        if k > 1 and cfg.ablation.updates_bank else None)  # else the bank stays frozen
            clock.lap("rollouts")
            trained = (train_on(system, cfg, state.data[k - 1], state.ledger)  # unless an extended run's
                       if s >= 1 and k > 1 and state.ledger.latest_step < k - 1 else None)  # final step did
            clock.lap("learner")  # the rollouts and the bank update run on meanwhile
            data, stats = system.collect(rollouts, bank_versions)
            state.league.play(data.trajectories)
            clock.lap("rollouts")
            bank = system.bank_result(bank_job)
            stats.sync_s, stats.bank_wait_s, stats.bank_s = sync_s, clock.lap("bank_update"), bank.seconds
            if k > 1:
                state.banks.record(k - 1, bank.versions)
            data.bank_samples = bank.samples + curriculum_samples(system, cfg, k, versions, bank_versions)
            state.keep(data)
            clock.lap("curriculum")
            if s == 0:
                trained = train_on(system, cfg, data, state.ledger)
            final = train_last(system, cfg, k, data, state.ledger)  # the last step, before it is evaluated
            clock.lap("learner")
            seconds = time.perf_counter() - t0
            due = cfg.eval.every and k % cfg.eval.every == 0
            evaluated_on = state.ledger.latest()  # after this iteration's learner step: newer than `versions`
            evaluation = (evaluate(system, k, evaluated_on, state.banks.latest(), state.league)
                          if due else None)
            probed = (run_probe(system, probe, k, state.ledger.latest(), state.banks.latest())
                      if probe is not None and probe_due(cfg, k) else None)
            clock.lap("evaluation")
            holds_final = k == cfg.loop.iterations and (s == 0 or final is not None)  # the final adapters
            save = k % cfg.loop.checkpoint_every == 0 or holds_final
            log.log(k, iteration_record(k, data, stats, bank, trained, versions, seconds,
                                        system.take_faults(), evaluation,
                                        str(run.checkpoint_dir(k)) if save else None, state.league.table(),
                                        probe=probed, phases=clock.take(), eval_versions=evaluated_on,
                                        final=final))
            if final is not None:
                log.log(k + 1, final_train_record(final, str(run.checkpoint_dir(k))))
            if save:  # after the metrics line: metrics always cover what a checkpoint holds
                save_checkpoint(system, state, k)
            clock.lap("checkpoint")  # a segment of the next line
        finish(system, cfg, state, log, clock)
    except (KeyboardInterrupt, RayTaskError, RayActorError) as exc:
        raise run_stopped(run, exc) from None
    finally:
        log.close()
        if system is not None:
            system.shutdown()
        if started_ray:
            ray.shutdown()
    return run.root


def finish(system: System, cfg: CoplayConfig, state: LoopState, log: MetricsLog, clock: PhaseClock) -> None:
    """Every worker ends on the newest versions, acknowledged, and the run's report.html is written. The
    closing line carries the phases since the last iteration's line. The last iteration's learner step ran
    before its evaluation (`train_last`); a run folder that an earlier coplay checkpointed after its last
    iteration but before that step trains it here when resumed."""
    last = cfg.loop.iterations
    final = train_last(system, cfg, last, state.data[last], state.ledger) if last in state.data else None
    if final is not None:
        clock.lap("learner")
        log.log(last + 1, final_train_record(final, str(system.run.checkpoint_dir(last))))
        save_checkpoint(system, state, last)
        clock.lap("checkpoint")
    newest, banks = state.ledger.latest(), state.banks.latest()
    system.sync(newest, [], banks)
    clock.lap("publish_sync")
    log.log(last + 1, {"final_versions": newest, "final_bank_versions": banks,
                       "acknowledgements": system.acknowledgements(newest, banks),
                       "phases": iteration_phases(clock.take(), train=final)})
    write_report(system.run)  # report.html in the run folder, as `coplay report` writes it
