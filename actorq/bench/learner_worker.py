"""The learner bench's worker process (one variant's real LearnerRole, driven by JSON lines on stdin) and
:class:`WorkerProcess`, the bench's handle on one.

Started by ``actorq bench learner`` (never by hand) with its environment already set (``TF_ENABLE_ONEDNN_OPTS``
must be in place before TensorFlow loads). Commands: ``prepare`` (build the role, take the first step: tracing and
maybe XLA compiling), ``go`` (step for N seconds, then time the step's parts), ``exit``. Protocol lines go to the
original stdout prefixed ``@@``; everything libraries print goes to stderr (the worker's log file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class WorkerProcess:
    """Parent side: one variant's worker process, owned by pid, speaking JSON lines (``@@tag payload``) on stdout."""

    def __init__(self, index: int, name: str, config_path: Path, address: str, workdir: Path):
        from actorq.config import load_config
        from actorq.roles.common import learner_environment

        self.name = name
        self.log_path = workdir / f"worker_{index}.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.update(learner_environment(load_config(config_path)))
        with self.log_path.open("ab") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "actorq.bench.learner_worker", "--config", str(config_path)]
                + ["--address", address, "--run-dir", str(workdir / f"run_{self.log_path.stem}")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=logf,
                start_new_session=True,
                env=env,
                text=True,
            )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, command: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def expect(self, tag: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=1.0)
            except queue.Empty:
                line = None
            if line is not None:
                head, _, rest = line.partition(" ")
                if head == f"@@{tag}":
                    return rest
                if head == "@@error":
                    raise RuntimeError(f"learner bench worker {self.name} failed: {rest} ({self.log_path})")
                continue
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"learner bench worker {self.name} exited with {self.proc.returncode}; "
                    f"see {self.log_path}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"learner bench worker {self.name} sent no {tag} in {timeout_s:.0f}s")

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.send({"cmd": "exit"})
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.warning("learner bench worker pid %d did not exit; killing it", self.proc.pid)
            self.proc.kill()
            self.proc.wait(timeout=10)


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


def worker_main(config_path: str, address: str, run_dir: str) -> int:
    """Serve prepare/go/exit commands on stdin (see the module docstring)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed to stdout goes to the log, not into the protocol
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from actorq.config import load_config
    from actorq.roles.common import apply_learner_environment

    config = load_config(config_path)
    apply_learner_environment(config)  # already in the environment the parent gave us; checks it is in time
    from actorq.roles.learner import LearnerRole
    from actorq.roles.weights_key import ensure_run_key, load_key_file

    # Signed publishing, as in a real run (its cost is part of the publishing time measured).
    weights_key = load_key_file(ensure_run_key(run_dir))

    role = None
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
            if cmd["cmd"] == "exit":
                break
            if cmd["cmd"] == "prepare":
                role = LearnerRole(config, run_dir, address, weights_key=weights_key)
                started = time.perf_counter()
                role.step()
                proto.write("@@ready " + json.dumps({"first_step_s": time.perf_counter() - started}) + "\n")
            elif cmd["cmd"] == "go":
                result = measure(role, float(cmd["seconds"]), int(cmd["breakdown_steps"]))
                proto.write("@@result " + json.dumps(result) + "\n")
        except Exception as exc:  # reported to the parent, which stops the bench
            log.exception("learner bench worker command failed")
            proto.write(f"@@error {type(exc).__name__}: {exc}\n")
    if role is not None:
        role.close()
        threading.Thread(target=role._publisher.close, args=(False,), daemon=True).start()  # noqa: SLF001
    proto.flush()
    # Reverb/TF native threads can hold up interpreter teardown; nothing is left to flush.
    os._exit(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="actorq learner bench worker (started by actorq bench learner)"
    )
    parser.add_argument("--config", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    sys.exit(worker_main(args.config, args.address, args.run_dir))
