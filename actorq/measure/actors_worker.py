"""The actor benchmarks' machinery: an in-process Reverb server, a pool of actor worker processes, the config a
block runs (:func:`bench_config`) and the policy it publishes to them (:func:`reference_state`,
:meth:`WorkerPool.publish_policy`); used by ``actorq bench actors``, ``ablation`` and ``learner --actors``.

Workers are ``python -m actorq.measure.actors_worker --address HOST:PORT`` subprocesses owned by pid. They import
the actor stack once, then take JSON commands on stdin: ``prepare`` (build a fresh :class:`ActorRole` from a config
file, wait for its first weights, warm up), ``go`` (step it for N seconds and report), ``exit``. Protocol lines go to
the original stdout prefixed ``@@``; everything libraries print goes to stderr (the worker's log file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from actorq import algorithms
from actorq.config import ExperimentConfig, replace, save_config
from actorq.measure.common import START_TIMEOUT_S, close_workdir
from actorq.measure.protocol import BenchWorker, open_protocol, reply, serve
from actorq.timers import BREAKDOWN_COMPONENTS
from actorq.usage import child_environment
from actorq.weights_key import ensure_run_key, load_key_file

log = logging.getLogger(__name__)

WARMUP_S = 1.0


@dataclass(frozen=True)
class Variant:
    """What a bench block runs: actor precision, wire bits, pull period and environments per actor."""

    precision: str
    comm_bits: int
    update_period: int
    envs: int = 1

    @property
    def name(self) -> str:
        return f"{self.precision}/c{self.comm_bits}" + (f"/n{self.envs}" if self.envs > 1 else "")


BENCH_MAX_SIZE = 200_000
"""Experience table capacity in the bench: FIFO eviction never blocks inserts; this only bounds memory."""


def reference_state(config: ExperimentConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """The torch twin's initial weights for the config's task and policy (keys are the wire's torch names)."""
    import torch

    from actorq.envs import environment_spec
    from actorq.roles.torso import run_torso

    spec = environment_spec(config.env)
    torso = run_torso(config, spec)
    torch.manual_seed(seed)
    make = algorithms.get(config.algorithm).torch_policy.load()
    layers, bounds = tuple(config.network.policy_layers), (spec.action_low, spec.action_high)
    extra = {"torso": torso} if torso.is_conv else {}
    model = make(spec.obs_dim, spec.num_actions, layers, *bounds, **extra)
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def bench_config(config: ExperimentConfig, variant: Variant, actors: int) -> ExperimentConfig:
    """The experiment's config for one bench block: the variant's precision, bits and period, no rate limiter."""
    return replace(
        config,
        **{
            "actor.precision": variant.precision,
            "quantizer.comm_bits": variant.comm_bits,
            "actor.update_period": variant.update_period,
            "actor.num_actors": actors,
            "actor.envs_per_actor": variant.envs,
            "replay.samples_per_insert": 0.0,
            "replay.max_size": BENCH_MAX_SIZE,
            "replay.min_size": min(config.replay.min_size, BENCH_MAX_SIZE),
            "learner.checkpoint_period_s": 0.0,
        },
    )


class WorkerPool:
    """A Reverb server (this process) plus ``n`` actor worker processes; use as a context manager.

    Args:
        server_config: Config whose tables the server gets (the bench's: no rate limiter).
        n: Number of worker processes.
    """

    def __init__(self, server_config: ExperimentConfig, n: int):
        self.config = server_config
        self.n = n
        self.workdir = Path(tempfile.mkdtemp(prefix="actorq-bench-"))
        # Signed messages, as in training: the actors' update cost includes verifying them.
        self.key_file = ensure_run_key(self.workdir)
        self.key = load_key_file(self.key_file)
        self.workers: list[BenchWorker] = []
        self.server = None
        self._publisher = None
        self._blocks = 0

    def __enter__(self) -> WorkerPool:
        from actorq.envs import make_environment
        from actorq.replay import POLICY_TABLE, ReverbWeightPublisher, make_server
        from actorq.replay.tables import environment_spec_for

        env = make_environment(self.config.env)
        self.server = make_server(self.config, environment_spec_for(env), port=None)
        env.close()
        self._publisher = ReverbWeightPublisher(self.server.localhost_client(), POLICY_TABLE)
        address = f"localhost:{self.server.port}"
        try:
            for i in range(self.n):
                argv = ["actorq.measure.actors_worker", "--address", address]
                log_path = self.workdir / f"worker_{i}.log"
                self.workers.append(BenchWorker(f"bench worker {i}", argv, log_path, child_environment()))
            self._expect_all("hello", START_TIMEOUT_S)
        except BaseException:
            self.__exit__(*sys.exc_info())  # keeps the worker logs for the error message
            raise
        return self

    def publish_policy(self, state: dict[str, np.ndarray], config: ExperimentConfig) -> np.ndarray:
        """Encode ``state`` as the config's actors receive it (precision, wire bits, compression, signed with
        :attr:`key`) and put it in the policy table, replacing the previous message; returns the message."""
        from actorq.quantize.codec import encode_message

        message = encode_message(
            state,
            version=1,
            learner_step=0,
            precision=config.actor.precision,
            comm_bits=config.comm_bits,
            compress=config.quantizer.compress,
            per_channel=config.quantizer.per_channel,
            key=self.key,
        )
        self._publisher.publish(message)
        return message

    def _send(self, command: dict[str, Any]) -> None:
        for worker in self.workers:
            worker.send(command)

    def _expect_all(self, tag: str, timeout_s: float) -> list[str]:
        deadline = time.monotonic() + timeout_s
        return [w.expect(tag, max(0.0, deadline - time.monotonic())) for w in self.workers]

    def run_block(self, config: ExperimentConfig, seconds: float, fresh: bool) -> list[dict[str, Any]]:
        """Every worker builds an ActorRole from ``config``, then all step for ``seconds`` at once."""
        self.start_block(config, seconds, fresh)
        return self.finish_block(seconds)

    def start_block(self, config: ExperimentConfig, seconds: float, fresh: bool) -> None:
        """Build every worker's ActorRole from ``config`` and, once all are ready, start ``seconds`` of stepping.

        Returns while they step (``actorq bench learner`` runs a learner meanwhile); :meth:`finish_block` collects.
        """
        self._blocks += 1
        path = self.workdir / f"block_{self._blocks}.yaml"
        save_config(config, path)
        for i, worker in enumerate(self.workers):
            run_dir = self.workdir / f"block_{self._blocks}"
            cmd = {"cmd": "prepare", "config": str(path), "index": i, "run_dir": str(run_dir)}
            worker.send({**cmd, "key_file": str(self.key_file)})
        self._expect_all("ready", START_TIMEOUT_S)
        self._send({"cmd": "go", "seconds": seconds, "fresh": fresh})

    def finish_block(self, seconds: float) -> list[dict[str, Any]]:
        """Each worker's result of the block :meth:`start_block` started (one record per actor)."""
        results = [json.loads(r) for r in self._expect_all("result", seconds + 300)]
        for i, r in enumerate(results):
            r["actor"] = i
        shutil.rmtree(self.workdir / f"block_{self._blocks}", ignore_errors=True)
        return results

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:  # all asked first, so they exit in parallel
            worker.request_exit()
        for worker in self.workers:
            worker.wait(timeout_s=20)
        if self.server is not None:
            self.server.stop()
        close_workdir(self.workdir, ok=bool(exc) and exc[0] is None, what="actors bench worker")


def measure(role, seconds: float, fresh: bool) -> dict[str, Any]:
    """Step ``role`` (an ActorRole) for ``seconds``; per-component seconds and counts over that window."""
    timers = role.timers
    totals0, counts0 = dict(timers.totals), dict(timers.counts)
    steps0, received0, rejected0 = role.steps, role.actor.weights.received, role.actor.weights.rejected
    pulls_seen = timers.counts.get("pull", 0)
    cpu0 = time.process_time()
    start = time.perf_counter()
    end = start + seconds
    while True:
        role.step()
        if fresh and timers.counts.get("pull", 0) != pulls_seen:
            pulls_seen = timers.counts.get("pull", 0)
            # The next pull is a new broadcast: downloaded (the only-new subscriber would skip an unchanged
            # message), decoded and applied again.
            role.actor.weights.version = -1
            role.actor.subscriber.refetch()
        if time.perf_counter() >= end:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    steps = role.steps - steps0
    return {
        "steps": steps,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
        "cpu_s": cpu,
        "envs": getattr(role, "num_envs", 1),
        "components": {c: timers.totals.get(c, 0.0) - totals0.get(c, 0.0) for c in BREAKDOWN_COMPONENTS},
        "pulls": timers.counts.get("pull", 0) - counts0.get("pull", 0),
        "applied": role.actor.weights.received - received0,
        "rejected": role.actor.weights.rejected - rejected0,
        "kernel": role.actor.policy.kernel_name,
        "kernel_us": role.actor.policy.selection.time_us,
        "pid": os.getpid(),
    }


def _close(role) -> None:
    with contextlib.suppress(Exception):
        role.actor.close()
        for env in role.envs:
            env.close()
        role.close()


def worker_main(address: str) -> NoReturn:
    """Serve prepare/go/exit commands on stdin (see the module docstring)."""
    proto = open_protocol()
    from actorq.config import load_config
    from actorq.roles.actor import ActorRole

    proto.write(reply("hello") + "\n")
    roles: list[ActorRole] = []  # the block's role, between its prepare and its go

    def handle(cmd: dict[str, Any]) -> str:
        if cmd["cmd"] == "prepare":
            while roles:
                _close(roles.pop())
            roles.append(
                ActorRole(
                    load_config(cmd["config"]),
                    cmd["run_dir"],
                    address,
                    actor_id=cmd["index"],
                    weights_key=load_key_file(cmd["key_file"]),
                )
            )
            if not roles[0].actor.wait_for_weights(timeout_s=120):
                raise RuntimeError("no weights in the policy table")
            warm = time.perf_counter() + WARMUP_S
            while time.perf_counter() < warm:
                roles[0].step()
            return reply("ready")
        if cmd["cmd"] == "go":
            role = roles.pop()
            try:
                return reply("result", measure(role, float(cmd["seconds"]), bool(cmd["fresh"])))
            finally:
                _close(role)
        raise ValueError(f"unknown command {cmd['cmd']!r}")

    def close() -> None:
        while roles:
            _close(roles.pop())

    serve(proto, handle, "actors bench worker", close)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="actorq bench worker (started by actorq bench actors/ablation)"
    )
    parser.add_argument("--address", required=True)
    worker_main(parser.parse_args().address)
