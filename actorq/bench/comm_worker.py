"""The comm bench's worker processes: the publisher (replay server and quantizer, on the server's host) and the
actors (on the other host), and :func:`start_worker`, which starts one, on a namespace host where given.

Started by ``actorq bench comm`` (never by hand) as ``python -m actorq.bench.comm_worker publisher`` or ``...
actor --address HOST:PORT``, owned by pid. Commands are JSON lines on stdin; protocol lines go to the original
stdout prefixed ``@@``, everything libraries print goes to stderr (the worker's log file).

The publisher:

- ``serve``: start a Reverb server with the experiment's tables on a free port (every interface of its host); the
  reply names the port.
- ``prepare``: a :class:`~actorq.roles.quantizer.QuantizerRole` for the block's config (its comm bits) and run
  directory, and one publish, so that the actors start with weights.
- ``go``: from the wall-clock ``start`` until ``end``, one publish every ``period_s``. A publish is what the
  learner and the quantizer do with a new version: the learner's fp32 message (the policy's weights under their
  TensorFlow names, signed for the learner stream) is encoded, then handed to the quantizer role's
  ``quantize_and_publish`` (verify, decode, map to torch, encode at the wire's bits, sign, insert into the policy
  table). The learner-table hop in between is skipped: in a run it stays on the server's host, not on the link.
  Reports each publish's version and times.

An actor:

- ``prepare``: a fresh :class:`~actorq.roles.actor.ActorRole` on the block's config, connected to the server over
  the link, with its first weights installed, warmed up.
- ``go``: step it from ``start`` until ``end``, recording each version it installs (timed after the step that
  installed it: fetched, verified, decoded and applied); reports the timeline, its steps and its pull timers.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any, NoReturn

from actorq.measure.common import wait_until
from actorq.measure.protocol import BenchWorker, open_protocol, reply, serve
from actorq.usage import child_environment

log = logging.getLogger(__name__)

WARMUP_S = 1.0
FIRST_WEIGHTS_TIMEOUT_S = 600.0
"""An actor's first weights cross the link before its block: 34 MB at 5 Mbit/s takes a minute."""


def worker_environment() -> dict[str, str]:
    """A worker's environment: :func:`~actorq.usage.child_environment` without proxy settings (gRPC honours
    ``*_proxy``, and the server's address is on the hosts' own network, never behind a proxy)."""
    env = {k: v for k, v in child_environment().items() if "proxy" not in k.lower()}
    env["no_proxy"] = "*"
    return env


def start_worker(
    label: str, argv: list[str], workdir: Path, prefix: list[str] | tuple[str, ...] = ()
) -> BenchWorker:
    """Bench side: start a worker (``argv`` after the module), with ``prefix`` (e.g. ``ip netns exec NS``) to run
    it on a namespace host; it answers ``@@hello`` once its imports are done."""
    log_path = workdir / f"{label.replace(' ', '_')}.log"
    return BenchWorker(
        f"comm bench {label}", ["actorq.bench.comm_worker", *argv], log_path, worker_environment(), prefix
    )


# -- the publisher --------------------------------------------------------------------------------------------
def learner_variables(config, seed: int = 0) -> dict[str, Any]:
    """The policy's initial weights as the learner publishes them: under their TensorFlow names, in TF's layout
    (the inverse of :func:`actorq.networks.mapping.tf_to_torch_state`)."""
    from actorq.measure.actors_worker import reference_state
    from actorq.networks.mapping import torch_to_tf_state
    from actorq.roles.torso import run_torso

    state = reference_state(config, seed)
    torso = run_torso(config)
    return torch_to_tf_state(config.algorithm, state, tuple(config.network.policy_layers), torso=torso)


class Publisher:
    """The server's host: a Reverb server, and per block a quantizer role publishing at the learner's rate."""

    def __init__(self, config):
        from actorq.envs import make_environment
        from actorq.replay import make_server
        from actorq.replay.tables import environment_spec_for

        env = make_environment(config.env)
        self.server = make_server(config, environment_spec_for(env), port=None)
        env.close()
        self.role = None
        self.key = None
        self.variables: dict[str, Any] = {}
        self.learner_version = 0

    def prepare(self, config, run_dir: str, key_file: str) -> dict[str, Any]:
        from actorq.roles.quantizer import QuantizerRole
        from actorq.weights_key import load_key_file

        self.close_role()
        self.key = load_key_file(key_file)
        self.role = QuantizerRole(config, run_dir, f"localhost:{self.server.port}", weights_key=self.key)
        self.variables = learner_variables(config)
        first = self.publish(time.time())
        return {"version": first["version"], "message_bytes": first["bytes"]}

    def publish(self, due: float) -> dict[str, Any]:
        """One new version through the learner's encoding and the quantizer role; its version and times."""
        from actorq.quantize.codec import encode_message
        from actorq.quantize.signing import LEARNER_STREAM

        t0 = time.time()
        self.learner_version += 1
        buf = encode_message(
            self.variables,
            version=self.learner_version,
            learner_step=self.learner_version,
            precision="fp32",
            comm_bits=32,
            key=self.key,
            stream=LEARNER_STREAM,
        )
        t_learner = time.time()
        self.role.quantize_and_publish(buf)
        t_done = time.time()
        times = self.role.times
        return {
            "version": self.role.version,
            "learner_version": self.learner_version,
            "t_learner": t_learner,
            "t_insert": t_done - times["publish_ms"] / 1e3,
            "t_done": t_done,
            "late_s": t0 - due,
            "bytes": self.role.message_bytes,
            "quantize_ms": times["convert_ms"] + times["quantize_ms"],
            "insert_ms": times["publish_ms"],
        }

    def go(self, start: float, end: float, period_s: float) -> dict[str, Any]:
        publishes = []
        due = start
        while due < end:
            wait_until(due)
            publishes.append(self.publish(due))
            due += period_s
        self.close_role()
        return {
            "publishes": publishes,
            "message_bytes": publishes[0]["bytes"] if publishes else 0,
            "pid": os.getpid(),
        }

    def close_role(self) -> None:
        if self.role is not None:
            self.role.close()
            self.role = None

    def close(self) -> None:
        self.close_role()
        self.server.stop()


# -- an actor -------------------------------------------------------------------------------------------------
class Actor:
    """The actors' host: one actor role per block, stepped as fast as it goes, its installs timed."""

    def __init__(self, address: str):
        self.address = address
        self.role = None

    def prepare(self, config, run_dir: str, key_file: str, index: int) -> dict[str, Any]:
        from actorq.roles.actor import ActorRole
        from actorq.weights_key import load_key_file

        self.close()
        self.role = ActorRole(
            config, run_dir, self.address, actor_id=index, weights_key=load_key_file(key_file)
        )
        if not self.role.actor.wait_for_weights(timeout_s=FIRST_WEIGHTS_TIMEOUT_S):
            raise RuntimeError(f"no weights reached the actor from {self.address}")
        warm = time.perf_counter() + WARMUP_S
        while time.perf_counter() < warm:
            self.role.step()
        return {"version": self.role.actor.weights.version}

    def go(self, start: float, end: float) -> dict[str, Any]:
        role, weights, timers = self.role, self.role.actor.weights, self.role.timers
        wait_until(start)
        totals0, counts0 = dict(timers.totals), dict(timers.counts)
        steps0, failures0, rejected0 = role.steps, weights.pull_failures, weights.rejected
        version = weights.version
        installed = [(time.time(), version)]
        cpu0, t0 = time.process_time(), time.time()
        while (now := time.time()) < end:
            role.step()
            if weights.version != version:
                version = weights.version
                installed.append((time.time(), version))
        seconds = now - t0
        parts = ("pull", "decode", "apply")
        result = {
            "installed": installed,
            "steps": role.steps - steps0,
            "seconds": seconds,
            "cpu_s": time.process_time() - cpu0,
            "pulls": timers.counts.get("pull", 0) - counts0.get("pull", 0),
            "components_s": {c: timers.totals.get(c, 0.0) - totals0.get(c, 0.0) for c in parts},
            "pull_failures": weights.pull_failures - failures0,
            "rejected": weights.rejected - rejected0,
            "pid": os.getpid(),
        }
        self.close()
        return result

    def close(self) -> None:
        if self.role is not None:
            role, self.role = self.role, None
            role.actor.close()
            for env in role.envs:
                env.close()
            role.close()


def worker_main(kind: str, address: str | None) -> NoReturn:
    """Serve the commands of a ``kind`` worker on stdin (see the module docstring)."""
    proto = open_protocol()
    from actorq.config import load_config

    proto.write(reply("hello") + "\n")
    jobs: list[Publisher | Actor] = [] if kind == "publisher" else [Actor(address)]

    def handle(cmd: dict[str, Any]) -> str:
        if cmd["cmd"] == "serve":
            jobs[:] = [Publisher(load_config(cmd["config"]))]
            return reply("serving", {"port": jobs[0].server.port})
        if cmd["cmd"] == "prepare":
            config = load_config(cmd["config"])
            if kind == "publisher":
                return reply("ready", jobs[0].prepare(config, cmd["run_dir"], cmd["key_file"]))
            return reply("ready", jobs[0].prepare(config, cmd["run_dir"], cmd["key_file"], int(cmd["index"])))
        if cmd["cmd"] == "go":
            start, end = float(cmd["start"]), float(cmd["end"])
            if kind == "publisher":
                return reply("result", jobs[0].go(start, end, float(cmd["period_s"])))
            return reply("result", jobs[0].go(start, end))
        raise ValueError(f"unknown command {cmd['cmd']!r}")

    def close() -> None:
        for job in jobs:
            job.close()

    serve(proto, handle, f"comm bench {kind}", close)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="actorq bench comm worker (started by actorq bench comm)")
    parser.add_argument("kind", choices=("publisher", "actor"))
    parser.add_argument("--address", help="the replay server's HOST:PORT (actors)")
    args = parser.parse_args()
    worker_main(args.kind, args.address)
