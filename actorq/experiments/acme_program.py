"""Acme's distributed D4PG as the ActorQ baseline: the launchpad program and one monitored run of it.

``make_program`` builds ``acme.agents.tf.d4pg.DistributedD4PG`` with this config's networks, replay, batch,
learning rates and actors, replacing only what is needed to measure it like ActorQ: an evaluator node writing
``RUN_DIR/evaluator/metrics.csv`` (and actor/learner counts to ``RUN_DIR/counter``), a learner logger writing
``RUN_DIR/learner/metrics.csv``, optimizers built inside the learner node, no checkpoints or CSVs in ``~/acme``.
``run_acme`` launches it (LOCAL_MULTI_PROCESSING), stops it on the config's limits, samples the CPU time of its
processes and writes ``summary.json``. See :mod:`actorq.experiments.acme_baseline` for the comparison.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from actorq.algorithms.d4pg import ALGORITHM as D4PG
from actorq.config import ExperimentConfig, save_config
from actorq.errors import ExitCode
from actorq.launchers.energy import process_key
from actorq.metrics import MetricsWriter, evaluation_row, read_metrics
from actorq.target import DEFAULT_WINDOW, first_crossing

LABEL = "acme-fp32"


# -- Acme program pieces (module level: launchpad pickles them into its node processes) ----------------------
def environment_factory(config: ExperimentConfig, evaluation: bool):
    from actorq.envs import make_environment

    return make_environment(config.env, seed=config.seed * 1000 + (999 if evaluation else os.getpid() % 997))


def network_factory(config: ExperimentConfig, action_spec):
    from actorq.algorithms.d4pg.tf_networks import make_networks

    d4pg = D4PG.settings(config)
    return make_networks(
        action_spec, config.network.policy_layers, d4pg.critic_layers, d4pg.vmin, d4pg.vmax, d4pg.num_atoms
    )


class RunDirLogger:
    """An Acme logger writing rows (step, elapsed, steps_per_s, ...) to ``RUN_DIR/<role>/metrics.csv``."""

    def __init__(self, run_dir: str, role: str, steps_key: str, period_s: float):
        self._writer = MetricsWriter(Path(run_dir) / role, tensorboard=False)
        self._key, self._period = steps_key, period_s
        self._t0 = self._last_t = time.time()
        self._last_steps = 0.0

    def write(self, data: dict[str, Any]) -> None:
        now = time.time()
        if now - self._last_t < self._period:
            return
        steps = float(data.get(self._key, 0))
        rate = (steps - self._last_steps) / (now - self._last_t)
        self._writer.write({"step": steps, "elapsed": now - self._t0, "steps_per_s": rate})
        self._last_t, self._last_steps = now, steps

    def close(self) -> None:
        self._writer.close()


class PeriodicEvaluator:
    """Greedy episodes with the learner's newest policy every ``period_s``; counts every ``log_period_s``."""

    def __init__(self, environment, actor, counter, run_dir: str, config: ExperimentConfig):
        self._env, self._actor, self._counter, self._config = environment, actor, counter, config
        self._evals = MetricsWriter(Path(run_dir) / "evaluator", tensorboard=False)
        self._counts = MetricsWriter(Path(run_dir) / "counter", tensorboard=False)
        self._t0 = self.next_eval = time.time()

    def _episode(self) -> float:
        timestep, total = self._env.reset(), 0.0
        while not timestep.last():
            timestep = self._env.step(self._actor.select_action(timestep.observation))
            total += float(timestep.reward or 0.0)
        return total

    def tick(self) -> None:
        """Write the current counts; run an evaluation when one is due."""
        counts = self._counter.get_counts()
        actor_steps, learner_steps = counts.get("actor_steps", 0), counts.get("learner_steps", 0)
        self._counts.write(
            {"step": actor_steps, "elapsed": time.time() - self._t0, "learner_steps": learner_steps}
        )
        if time.time() < self.next_eval:
            return
        self.next_eval = time.time() + self._config.evaluator.period_s
        self._actor.update(wait=True)
        started = time.time()
        returns = [self._episode() for _ in range(self._config.evaluator.episodes)]
        self._evals.write(
            evaluation_row(learner_steps, time.time() - self._t0, actor_steps, returns, time.time() - started)
        )

    def run(self) -> None:
        while True:
            self.tick()
            time.sleep(min(self._config.log_period_s, max(0.1, self.next_eval - time.time())))


def make_program(config: ExperimentConfig, run_dir: str):
    """The Acme DistributedD4PG program with our evaluator, loggers and optimizers built inside the nodes."""
    import dataclasses
    import functools

    import sonnet as snt
    from acme.agents.tf.d4pg import agent as d4pg_agent
    from acme.agents.tf.d4pg.agent_distributed import DistributedD4PG
    from acme.utils import counting, loggers

    from actorq.learners.acme_adapter import check_surface, distributed_d4pg_parts

    check_surface()

    n = config.actor.num_actors
    sigma = float(np.mean([D4PG.settings(config).sigma_max * (i + 1) / n for i in range(n)]))

    class Baseline(DistributedD4PG):
        def counter(self):  # no CheckpointingRunner: nothing written to ~/acme
            return counting.Counter()

        def learner(self, replay, counter):
            parts = distributed_d4pg_parts(self)
            online = parts.network_factory(parts.environment_spec.actions)
            target = copy.deepcopy(online)
            online.init(parts.environment_spec)
            target.init(parts.environment_spec)
            builder = d4pg_agent.D4PGBuilder(
                dataclasses.replace(
                    parts.builder_config,
                    policy_optimizer=snt.optimizers.Adam(D4PG.settings(config).policy_lr),
                    critic_optimizer=snt.optimizers.Adam(D4PG.settings(config).critic_lr),
                )
            )
            logger = RunDirLogger(run_dir, "learner", "learner_steps", config.log_period_s)
            return builder.make_learner(
                networks=(online, target),
                dataset=parts.builder.make_dataset_iterator(replay),
                counter=counting.Counter(counter, "learner"),
                logger=logger,
                checkpoint=False,
            )

        def evaluator(self, variable_source, counter, logger=None):
            parts = distributed_d4pg_parts(self)
            networks = parts.network_factory(parts.environment_spec.actions)
            networks.init(parts.environment_spec)
            actor = parts.builder.make_actor(
                policy_network=networks.make_policy(parts.environment_spec), variable_source=variable_source
            )
            return PeriodicEvaluator(parts.environment_factory(True), actor, counter, run_dir, config)

    del loggers  # Acme's actor loggers print only (save_data=False in DistributedD4PG.actor)
    spi = config.replay.samples_per_insert
    return Baseline(
        environment_factory=functools.partial(environment_factory, config),
        network_factory=functools.partial(network_factory, config),
        num_actors=n,
        batch_size=config.learner.batch_size,
        prefetch_size=4,
        min_replay_size=config.replay.min_size,
        max_replay_size=config.replay.max_size,
        samples_per_insert=spi if spi > 0 else None,
        n_step=config.replay.n_step,
        sigma=sigma,
        discount=config.replay.discount,
        target_update_period=config.learner.target_update_period,
        max_actor_steps=None,  # we stop it, like ActorQ's launcher, from the counts the evaluator writes
        log_every=config.log_period_s,
    ).build(name="acme_d4pg")


def policy_bytes(config: ExperimentConfig) -> int:
    """fp32 bytes of the policy variables an Acme actor fetches per update."""
    from actorq.envs import environment_spec
    from actorq.networks.mapping import torch_state_shapes

    spec = environment_spec(config.env)
    shapes = torch_state_shapes("d4pg", spec.obs_dim, spec.num_actions, tuple(config.network.policy_layers))
    return int(4 * sum(int(np.prod(s)) for s in shapes.values()))


# -- one Acme run (in its own process: launchpad owns signal handling there) --------------------------------
class CpuSampler:
    """CPU seconds of this process's descendants (sampled every ``period_s``) into ``RUN_DIR/energy``."""

    def __init__(self, run_dir: Path, period_s: float = 5.0):
        import psutil

        self._me = psutil.Process()
        self._writer = MetricsWriter(run_dir / "energy", tensorboard=False)
        self._last: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._period = period_s
        self.started = time.time()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> float:
        import psutil

        for proc in self._me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                key = process_key(proc)  # not create_time(): it moves with the clock
                self._last[key] = max(self._last.get(key, 0.0), times.user + times.system)
        total = sum(self._last.values())
        self._writer.write(
            {"step": len(self._last), "elapsed": time.time() - self.started, "cpu_seconds": total}
        )
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            with contextlib.suppress(Exception):
                self.sample()

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self._period + 5)
        self._writer.close()


def _stop_descendants(grace_s: float = 8.0) -> None:
    """SIGTERM every process this one started (and theirs), wait, SIGKILL what is left: all by pid."""
    import psutil

    tree = psutil.Process().children(recursive=True)
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)


def _stop_reason(config: ExperimentConfig, run_dir: Path, started: float) -> str | None:
    evals = [
        r for r in read_metrics(run_dir / "evaluator" / "metrics.csv") if r.get("eval_return") is not None
    ]
    if (
        config.target_return is not None
        and (
            first_crossing(
                [r["eval_return"] for r in evals],
                [r.get("step") or 0 for r in evals],
                config.target_return,
                DEFAULT_WINDOW,
            )
            is not None
        )
    ):  # the rule ActorQ's runs stop by and the report counts (actorq.launchers.monitor.RunMonitor.target_evaluation)
        return "target"
    if config.max_minutes and time.time() - started >= config.max_minutes * 60:
        return "max_minutes"
    counts = read_metrics(run_dir / "counter" / "metrics.csv")
    if config.max_actor_steps and counts and (counts[-1].get("step") or 0) >= config.max_actor_steps:
        return "max_actor_steps"
    return None


def run_acme(config: ExperimentConfig, run_dir: Path) -> int:
    """Launch the Acme program, stop it on the config's limits, write ``summary.json``; 0/1/130 like ``train``."""
    import launchpad as lp
    import psutil
    from absl import flags

    from actorq.launchers.launchpad_adapter import check_surface, disable_signals

    check_surface()

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / "config.yaml")
    reason, failure = "role_failed", ""
    with CpuSampler(run_dir) as cpu:
        program = make_program(config, str(run_dir))
        manager = lp.launch(
            program, launch_type=lp.LaunchType.LOCAL_MULTI_PROCESSING, terminal="current_terminal"
        )
        nodes = psutil.Process().children()
        try:
            while True:
                if manager.stop_event().is_set():
                    reason = "interrupted"
                    break
                dead = [p.pid for p in nodes if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE]
                if dead:
                    failure = f"node process(es) {dead} ended"
                    break
                stop = _stop_reason(config, run_dir, cpu.started)
                if stop:
                    reason = stop
                    break
                time.sleep(1.0)
        except KeyboardInterrupt:
            reason = "interrupted"
        finally:
            wall = time.time() - cpu.started
            _stop_descendants()
            with contextlib.suppress(Exception):
                disable_signals(manager)  # we stopped the workers ourselves
            cpu_seconds = cpu.sample()
    evals = [
        r for r in read_metrics(run_dir / "evaluator" / "metrics.csv") if r.get("eval_return") is not None
    ]
    counts = read_metrics(run_dir / "counter" / "metrics.csv")
    summary = {
        "algorithm": "d4pg",
        "task": f"{config.env.suite}:{config.env.task}",
        "label": LABEL,
        "precision": "fp32",
        "comm_bits": 32,
        "actors": config.actor.num_actors,
        "policy_layers": list(config.network.policy_layers),
        "seed": config.seed,
        "wall_seconds": round(wall, 2),
        "actor_steps": int(counts[-1].get("step") or 0) if counts else 0,
        "learner_steps": int(counts[-1].get("learner_steps") or 0) if counts else 0,
        "best_eval_return": max((r["eval_return"] for r in evals), default=None),
        "final_eval_return": evals[-1]["eval_return"] if evals else None,
        "evaluations": len(evals),
        "message_bytes": policy_bytes(config),
        "exit": reason,
        "launcher": "acme DistributedD4PG (launchpad LOCAL_MULTI_PROCESSING)",
        "energy": {
            "started_at": cpu.started,
            "cpu_seconds": round(cpu_seconds, 3),
            "cpu_method": "psutil samples of descendants",
            "hardware_counters": Path("/sys/class/powercap/intel-rapl").exists(),
            "codecarbon": {"status": "unavailable", "reason": "not measured for the Acme baseline"},
        },
    }
    if failure:
        summary["failure"] = failure
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return {"interrupted": ExitCode.INTERRUPTED, "role_failed": ExitCode.FAILED}.get(reason, 0)


if __name__ == "__main__":
    import argparse
    import sys

    from actorq.config import load_config

    parser = argparse.ArgumentParser(
        description="one Acme DistributedD4PG run (started by actorq acme-baseline)"
    )
    parser.add_argument("config")
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    code = run_acme(load_config(args.config), Path(args.run_dir))
    sys.stdout.flush()
    os._exit(code)  # launchpad/TF threads can hold up interpreter teardown; the summary is written
