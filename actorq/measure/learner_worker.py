"""The learner bench's worker process (one variant's real LearnerRole, driven by JSON lines on stdin) and
:func:`start_worker`, which starts one for the bench.

Started by ``actorq bench learner`` (never by hand) with its environment already set (``TF_ENABLE_ONEDNN_OPTS``
must be in place before TensorFlow loads). Commands: ``prepare`` (build the role, take the first step: tracing and
maybe XLA compiling), ``go`` (step for N seconds, then time the step's parts), ``exit``. Protocol lines go to the
original stdout prefixed ``@@``; everything libraries print goes to stderr (the worker's log file).
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from actorq.config import ExperimentConfig
from actorq.measure.common import random_action
from actorq.measure.protocol import BenchWorker, open_protocol, reply, serve
from actorq.usage import child_environment

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 30.0
"""A learner worker's exit includes closing TensorFlow and its Reverb dataset."""


def start_worker(index: int, name: str, config_path: Path, address: str, workdir: Path) -> BenchWorker:
    """Bench side: start variant ``name``'s worker on ``config_path``, in the learner environment it asks for."""
    from actorq.config import load_config
    from actorq.roles.process_setup import learner_environment

    log_path = workdir / f"worker_{index}.log"
    # As the local placement starts the learner role: the child environment, then the learner's own settings.
    env = child_environment()
    env.update(learner_environment(load_config(config_path)))
    argv = ["actorq.measure.learner_worker", "--config", str(config_path), "--address", address]
    argv += ["--run-dir", str(workdir / f"run_{log_path.stem}")]
    return BenchWorker(f"learner bench worker {name}", argv, log_path, env)


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return 1e3 * sorted(times)[len(times) // 2]


def measure(role, seconds: float, breakdown_steps: int) -> dict[str, Any]:
    """Step the role for ``seconds`` (steps/s), then time sampling, update, target copy and publishing alone."""
    import numpy as np
    import tensorflow as tf

    from actorq.quantize.codec import encode_message

    learner, cfg = role.learner, role.config.learner
    steps0 = learner.steps
    started = time.perf_counter()
    end = started + seconds
    while time.perf_counter() < end:
        role.step()
    elapsed = time.perf_counter() - started
    steps = learner.steps - steps0

    dataset_ms = _median_ms(learner.sample, breakdown_steps)
    batch = learner.sample()

    def update() -> None:
        fetches = learner.update(batch)
        # The update's outputs are ready only when fetched (TF runs ops asynchronously on a GPU).
        tf.nest.map_structure(lambda t: np.asarray(t), fetches)

    update()  # traced (and compiled) once outside the timing
    update_ms = _median_ms(update, breakdown_steps)
    learner.copy_targets()
    target_ms = _median_ms(learner.copy_targets, breakdown_steps)

    def publish() -> None:
        variables = learner.get_variables()
        encode_message(variables, version=1, learner_step=1, precision="fp32", comm_bits=32)

    publish_ms = _median_ms(publish, max(1, breakdown_steps // 3))
    return {
        "steps": steps,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
        "samples_per_s": steps * cfg.batch_size / elapsed,
        "batch_size": cfg.batch_size,
        "settings": {
            k: getattr(cfg, k)
            for k in (
                "onednn",
                "jit_compile",
                "jit_optimizer",
                "einsum_dense",
                "intra_op_threads",
                "inter_op_threads",
                "prefetch_size",
                "sample_parallelism",
            )
        },
        "onednn_env": os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""),
        "tf_threads": [
            tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads(),
        ],
        "breakdown_ms": {
            "dataset_ms": dataset_ms,
            "update_ms": update_ms,
            "target_copy_ms": target_ms,
            "target_per_step_ms": target_ms / max(cfg.target_update_period, 1),
            "publish_ms": publish_ms,
            "publish_per_step_ms": publish_ms / cfg.publish_period,
        },
        "pid": os.getpid(),
    }


def worker_main(config_path: str, address: str, run_dir: str) -> NoReturn:
    """Serve prepare/go/exit commands on stdin (see the module docstring)."""
    proto = open_protocol()
    from actorq.config import load_config
    from actorq.roles.process_setup import apply_learner_environment

    config = load_config(config_path)
    apply_learner_environment(config)  # already in the environment the parent gave us; checks it is in time
    from actorq.roles.learner import LearnerRole
    from actorq.weights_key import ensure_run_key, load_key_file

    # Signed publishing, as in a real run (its cost is part of the publishing time measured).
    weights_key = load_key_file(ensure_run_key(run_dir))
    roles: list[LearnerRole] = []

    def handle(cmd: dict[str, Any]) -> str:
        if cmd["cmd"] == "prepare":
            roles.append(LearnerRole(config, run_dir, address, weights_key=weights_key))
            started = time.perf_counter()
            roles[-1].step()
            return reply("ready", {"first_step_s": time.perf_counter() - started})
        if cmd["cmd"] == "go":
            return reply("result", measure(roles[-1], float(cmd["seconds"]), int(cmd["breakdown_steps"])))
        raise ValueError(f"unknown command {cmd['cmd']!r}")

    def close() -> None:
        for role in roles:
            role.close()
            threading.Thread(target=role._publisher.close, args=(False,), daemon=True).start()  # noqa: SLF001

    serve(proto, handle, "learner bench worker", close)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="actorq learner bench worker (started by actorq bench learner)"
    )
    parser.add_argument("--config", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    worker_main(args.config, args.address, args.run_dir)


START_TIMEOUT_S = 900.0
"""TensorFlow import, tracing and (with XLA) compiling the 3x2048 update on a loaded 2-core machine."""


def prefill(client: Any, config: ExperimentConfig, transitions: int, seed: int = 0) -> int:
    """Write ``transitions`` real n-step transitions (uniformly random actions) into the experience table."""
    from actorq.envs import make_environment
    from actorq.replay.experience import make_adder

    rng = np.random.default_rng(seed)
    env = make_environment(config.env, seed=seed)
    spec = env.action_spec()
    adder = make_adder(client, config)
    written = 0
    timestep = env.reset()
    adder.add_first(timestep)
    while written < transitions:
        action = random_action(spec, rng)
        timestep = env.step(action)
        adder.add(action, timestep)
        written += 1
        if timestep.last():
            timestep = env.reset()
            adder.add_first(timestep)
    adder.reset()
    env.close()
    return written
