"""The replay bench's worker process (one writer or the learner-style sampler) and :func:`start_worker`, which
starts one for the bench.

Started by ``actorq bench replay`` (never by hand) as ``python -m actorq.bench.replay_worker --address HOST:PORT``,
owned by pid. Commands are JSON lines on stdin; protocol lines go to the original stdout prefixed ``@@``, everything
libraries print goes to stderr (the worker's log file):

- ``prepare`` with ``role`` ``writer``: build the task's environment, record real timesteps with uniformly random
  actions, and the actor's experience path (:func:`actorq.replay.experience.make_adders`: the n-step adder over one
  ``StructuredWriter``). With ``role`` ``sampler``: the learner's dataset
  (:func:`actorq.replay.experience.make_dataset_iterator`, the config's batch size, prefetch and parallelism),
  after taking one batch from it.
- ``prepare`` with ``role`` ``server`` (``actorq bench replay --shards``): serve the config's tables, its
  samples-per-insert limiter included, on a free port (answered with ``ready``); the bench reads this process's CPU
  time. A ``writer``'s ``address`` and a ``shard_sampler``'s ``addresses`` (one or more shards, read through
  :func:`actorq.replay.shards.make_sharded_dataset`) name the servers of the next blocks.
- ``fill`` (writer): write ``items`` transitions and flush them (fills the table for the sampler).
- ``go``: wait until the wall-clock ``start``, then write (or sample) as fast as possible until ``end``; a writer
  then flushes, so everything it counts has been confirmed by the server. Reports counts, seconds and CPU seconds.
- ``exit``.

Writers replay the recorded observations as episodes of ``episode_steps`` steps (the last one truncated), so the
items are real transitions of the table's signature while no env or policy time is spent: the insert rate is what
the writer and server can do, not what an actor's env steps allow.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any, NoReturn

from actorq.measure.common import random_action, wait_until
from actorq.measure.protocol import BenchWorker, open_protocol, reply, serve
from actorq.usage import child_environment

log = logging.getLogger(__name__)

SETTLE_S = 0.3
"""Before a block, the table's counts must stay unchanged this long (the sampler's prefetch has refilled)."""
SETTLE_TIMEOUT_S = 10.0
"""How long a block waits for the table's counts to settle."""

RECORDED_STEPS = 256
"""Real env steps recorded by each writer; episodes cycle through their observations, rewards and actions."""
CLOCK_CHECK_STEPS = 32
"""Env steps between two looks at the clock in a writer's loop (a clock read per step would be measurable)."""


def start_worker(index: int, address: str, workdir: Path) -> BenchWorker:
    """Bench side: start worker ``index`` (it answers ``@@hello`` once its imports are done)."""
    argv = ["actorq.bench.replay_worker", "--address", address]
    log_path = workdir / f"replay_worker_{index}.log"
    return BenchWorker(f"replay bench worker {index}", argv, log_path, child_environment())


# -- the worker process -------------------------------------------------------------------------------------
class Writer:
    """An actor's experience path fed with recorded real timesteps, as fast as it goes."""

    def __init__(self, config, address: str, episode_steps: int, seed: int):
        import dm_env
        import numpy as np

        from actorq.envs import make_environment
        from actorq.replay.client import wait_for_server
        from actorq.replay.experience import make_adders

        env = make_environment(config.env, seed=seed)
        spec = env.action_spec()
        rng = np.random.default_rng(seed)
        steps = []  # (action, observation, reward) of real env steps
        timestep = env.reset()
        while len(steps) < RECORDED_STEPS:
            action = random_action(spec, rng)
            timestep = env.step(action)
            # Copied: an env may reuse its observation buffer between steps.
            steps.append(
                (action, np.array(timestep.observation, copy=True), np.float32(timestep.reward or 0.0))
            )
            if timestep.last():
                timestep = env.reset()
        env.close()
        one = np.float32(1.0)
        # One episode of real observations: FIRST, MID steps, then a truncation (discount 1) at episode_steps.
        self.first = dm_env.restart(steps[0][1])
        self.steps = []
        for i in range(1, episode_steps + 1):
            action, obs, reward = steps[i % len(steps)]
            kind = dm_env.StepType.LAST if i == episode_steps else dm_env.StepType.MID
            self.steps.append((action, dm_env.TimeStep(kind, reward, one, obs)))
        self.adder = make_adders(wait_for_server(address), config, 1)[0]
        self.position = 0  # steps of the current episode done; 0: the next call starts one
        self.env_steps = 0

    def write(self, n_steps: int) -> None:
        """``n_steps`` env steps through the adder (episodes continue across calls)."""
        adder, steps = self.adder, self.steps
        for _ in range(n_steps):
            if self.position == 0:
                adder.add_first(self.first)
            action, timestep = steps[self.position]
            adder.add(action, timestep)
            self.position = (self.position + 1) % len(steps)
        self.env_steps += n_steps

    def fill(self, items: int) -> dict[str, Any]:
        # Step by step: behind a samples-per-insert limiter (the shard blocks), a fill may overshoot min_size only
        # by what the limiter lets through before the first sample.
        while self.adder.writer.written < items:
            self.write(1)
        self.adder.writer.flush()
        return {"items": self.adder.writer.written}

    def go(self, start: float, end: float) -> dict[str, Any]:
        wait_until(start)
        items0, steps0 = self.adder.writer.written, self.env_steps
        cpu0, t0 = time.process_time(), time.time()
        while time.time() < end:
            self.write(CLOCK_CHECK_STEPS)
        t_end = time.time()
        self.adder.writer.flush()  # everything counted below is confirmed by the server
        t1, cpu1 = time.time(), time.process_time()
        return {
            "items": self.adder.writer.written - items0,
            "env_steps": self.env_steps - steps0,
            "seconds": t1 - t0,
            "flush_s": t1 - t_end,
            "cpu_s": cpu1 - cpu0,
            "late_start_s": t0 - start,
        }


class ShardSampler:
    """The learner's dataset over ``addresses`` (one or more shards, each behind the config's limiter), read as fast
    as it goes. After a block's end it keeps sampling, uncounted, so the writers can flush past the limiter, until
    the bench has created ``done`` (every writer flushed) and every shard's limiter has held its worker for
    ``timeout_ms``. A dataset that ends before (a shard's limiter held a worker that long) is built again."""

    def __init__(self, config, addresses: list[str], timeout_ms: int):
        self.config, self.addresses, self.timeout_ms = config, addresses, timeout_ms
        self.batch_size = config.learner.batch_size
        self.iterator = self._new()
        self.restarts = 0

    def _new(self):
        from actorq.replay.shards import make_sharded_dataset

        return iter(
            make_sharded_dataset(self.addresses, self.config, rate_limiter_timeout_ms=self.timeout_ms)
        )

    def go(self, start: float, end: float, done: str) -> dict[str, Any]:
        wait_until(start)
        batches, restarts = 0, 0
        cpu0, t0 = time.process_time(), time.time()
        t1 = cpu1 = None
        while True:
            try:
                next(self.iterator)
            except StopIteration:  # every shard's limiter held it timeout_ms: writers stalled or done
                if time.time() >= end and Path(done).exists():
                    break
                self.iterator = self._new()
                restarts += 1
                continue
            if t1 is None:
                if time.time() < end:
                    batches += 1
                else:
                    t1, cpu1 = time.time(), time.process_time()
        if t1 is None:
            t1, cpu1 = time.time(), time.process_time()
        return {
            "batches": batches,
            "items": batches * self.batch_size,
            "seconds": min(t1, end) - t0,
            "cpu_s": cpu1 - cpu0,
            "late_start_s": t0 - start,
            "dataset_restarts": restarts,
        }


def serve_tables(config) -> Any:
    """A Reverb server with the config's tables (its limiter included) on a free port, for the shard blocks."""
    from actorq.envs import make_environment
    from actorq.replay import make_server
    from actorq.replay.tables import environment_spec_for

    env = make_environment(config.env)
    spec = environment_spec_for(env)
    env.close()
    return make_server(config, spec, port=None)


class Sampler:
    """The learner's dataset (Acme's Reverb dataset: batch, prefetch, parallel calls), read as fast as it goes."""

    def __init__(self, config, address: str):
        from actorq.replay.experience import make_dataset_iterator

        self.batch_size = config.learner.batch_size
        self.iterator = make_dataset_iterator(address, config)
        next(self.iterator)  # builds the pipeline; blocks until the table holds min_size items

    def go(self, start: float, end: float) -> dict[str, Any]:
        wait_until(start)
        batches = 0
        cpu0, t0 = time.process_time(), time.time()
        while time.time() < end:
            next(self.iterator)
            batches += 1
        t1, cpu1 = time.time(), time.process_time()
        return {
            "batches": batches,
            "items": batches * self.batch_size,
            "seconds": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            "late_start_s": t0 - start,
        }


def worker_main(address: str) -> NoReturn:
    """Serve prepare/fill/go/exit commands on stdin (see the module docstring)."""
    proto = open_protocol()
    from actorq.config import load_config

    proto.write(reply("hello") + "\n")
    jobs: list[Any] = []

    def handle(cmd: dict[str, Any]) -> str:
        if cmd["cmd"] == "prepare":
            config = load_config(cmd["config"])
            jobs.clear()  # the previous job's writer or dataset goes before the next connects
            if cmd["role"] == "writer":
                where = cmd.get("address", address)
                jobs.append(Writer(config, where, int(cmd["episode_steps"]), int(cmd["seed"])))
            elif cmd["role"] == "server":
                jobs.append(serve_tables(config))
                return reply("ready", {"port": jobs[0].port})
            elif cmd["role"] == "shard_sampler":
                jobs.append(ShardSampler(config, list(cmd["addresses"]), int(cmd["timeout_ms"])))
            else:
                jobs.append(Sampler(config, address))
            return reply("ready")
        if cmd["cmd"] == "fill":
            return reply("filled", jobs[0].fill(int(cmd["items"])))
        if cmd["cmd"] == "go" and isinstance(jobs[0], ShardSampler):
            result = jobs[0].go(float(cmd["start"]), float(cmd["end"]), str(cmd["done"]))
            return reply("result", {**result, "pid": os.getpid()})
        if cmd["cmd"] == "go":
            return reply("result", {**jobs[0].go(float(cmd["start"]), float(cmd["end"])), "pid": os.getpid()})
        raise ValueError(f"unknown command {cmd['cmd']!r}")

    serve(proto, handle, "replay bench worker")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="actorq bench replay worker (started by actorq bench replay)"
    )
    parser.add_argument("--address", required=True)
    worker_main(parser.parse_args().address)
