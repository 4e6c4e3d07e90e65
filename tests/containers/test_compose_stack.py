"""The compose stack for real: build the worker image, run all six services on CPU, break two of them, tear down.

Marker ``docker``: runs wherever a Docker daemon and a compose tool are reachable (``make test`` then, and
``.ci/run``, which starts a daemon for it), and skips with the reason elsewhere. The learner runs from the worker
image on CPU (docker/compose.cpu.yaml) with the tiny DQN config in docker/smoke/. Everything is judged from what an
operator sees: container states, compose logs and the metrics files in the mounted run directory.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

import pytest

from actorq.metrics import read_metrics
from tests.containers import engine
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2700)]

ACTORS = (0, 1)
CONFIG = "configs/dqn_cartpole_tiny.yaml"


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """Skip without a daemon; otherwise make the base image and build the worker image from its Dockerfile."""
    reason = engine.unusable_reason()
    if reason:
        pytest.skip(reason)
    base = engine.ensure_base_image()
    seconds = engine.build_worker_image()
    return {"base": base, "worker_build_s": f"{seconds:.0f}"}


def _rows(run_dir: Path, role: str) -> list[dict]:
    path = run_dir / role / "metrics.csv"
    return read_metrics(path) if path.exists() else []


def _last(run_dir: Path, role: str, key: str) -> float:
    values = [r[key] for r in _rows(run_dir, role) if r.get(key) is not None]
    return float(values[-1]) if values else -1.0


def _healthy(stack: engine.Stack, service: str) -> bool:
    state = stack.state(service)
    return state["Running"] and state.get("Health", {}).get("Status") == "healthy"


def _restored_sizes(log: str) -> list[dict[str, int]]:
    """The table sizes of every 'replay serving on port ... with ...' line, in order (one per replay start)."""
    starts = re.findall(r"replay serving on port \d+ with (.*)", log)
    return [{k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)} for line in starts]


def test_compose_stack_trains_restarts_and_leaves_nothing(images, tmp_path):
    run_dir, key_file = tmp_path / "run", tmp_path / "secrets" / "weights.key"
    run_dir.mkdir()
    key_file.parent.mkdir(mode=0o700)
    key = secrets.token_hex(32)
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    # The roles run as the image's unprivileged user: it owns the run directory and can read (only) the key.
    for path in (run_dir, key_file):
        os.chown(path, engine.IMAGE_UID, engine.IMAGE_UID)
    env = {
        **os.environ,
        "ACTORQ_RUN_DIR": str(run_dir),
        "ACTORQ_CONFIGS": str(engine.DOCKER / "smoke"),
        "CONFIG": CONFIG,
        "ACTORQ_WEIGHTS_KEY": str(key_file),
    }
    stack = engine.Stack(project=f"actorqtest{secrets.token_hex(4)}", env=env)
    logs = ""
    try:
        stack("up", "-d", "--no-build", timeout=600)
        wait_until(lambda: _healthy(stack, "replay"), 180, "replay to report healthy")

        # The learner publishes, the quantizer signs, every actor installs weights and writes experience.
        wait_until(lambda: _last(run_dir, "quantizer", "version") >= 1, 300, "the first quantized weights")
        for i in ACTORS:
            wait_until(
                lambda i=i: (
                    _last(run_dir, f"actor_{i}", "weights_version") >= 1
                    and _last(run_dir, f"actor_{i}", "step") > 0
                ),
                300,
                f"actor {i} to apply weights and act",
            )
        wait_until(lambda: _last(run_dir, "replay", "inserts") > 0, 120, "experience in replay")
        wait_until(lambda: _last(run_dir, "learner", "step") > 0, 120, "learner steps")

        # An actor container dies (its init process SIGKILLed, as by the OOM killer): it restarts, and the new
        # process is actor 1 again (its log line), applies weights and continues actor_1's step count.
        before = stack.state("actor-1")
        steps_before = _last(run_dir, "actor_1", "step")
        os.kill(before["Pid"], 9)
        wait_until(
            lambda: (s := stack.state("actor-1"))["RestartCount"] > before["RestartCount"] and s["Running"],
            120,
            "actor-1 to be restarted by its restart policy",
        )
        wait_until(
            lambda: stack.logs("actor-1").count("actor 1: weights v") >= 2,
            300,
            "the restarted actor 1 to apply weights again",
        )
        wait_until(lambda: _last(run_dir, "actor_1", "step") > steps_before, 180, "actor 1 to carry on")

        # Replay is stopped (SIGTERM: final checkpoint) and started again: it restores its tables.
        stack("stop", "replay", timeout=120)
        assert not stack.state("replay")["Running"]
        # Its last act is the final checkpoint. (The exit status is not checked: Reverb's server.stop() can wait
        # on connected clients past the role's stop deadline, and the role then exits 1 after the checkpoint.)
        after_stop = stack.logs("replay").split("received SIGTERM: stopping", 1)
        assert len(after_stop) == 2 and "replay checkpoint /run-dir/checkpoints/replay/" in after_stop[1], (
            "replay wrote no checkpoint on stop"
        )
        inserts_before = _last(run_dir, "replay", "inserts")
        stack("start", "replay", timeout=120)
        wait_until(lambda: len(_restored_sizes(stack.logs("replay"))) >= 2, 180, "replay to start again")
        restored = _restored_sizes(stack.logs("replay"))[-1]
        assert restored and min(restored.values()) > 0, f"replay restored empty tables: {restored}"
        wait_until(lambda: _healthy(stack, "replay"), 180, "the restarted replay to report healthy")
        started = time.time()

        def inserts_since_restart() -> bool:
            # The restarted server counts its own inserts: a later row above the first one means new experience.
            counts = [r.get("inserts") or 0 for r in _rows(run_dir, "replay") if r["time"] > started]
            return len(counts) >= 2 and counts[-1] > counts[0]

        wait_until(inserts_since_restart, 240, "actors to write experience into the restarted replay")
        assert inserts_before > 0

        # The key is a Docker secret: in no container's config or environment, image layer or log.
        inspected = [engine.docker("inspect", stack.container(s)).stdout for s in _services(stack)]
        history = engine.docker("history", "--no-trunc", engine.WORKER_IMAGE).stdout
        image = engine.docker("image", "inspect", engine.WORKER_IMAGE).stdout
        for what, text in [("docker inspect", "\n".join(inspected)), ("image history", history + image)]:
            assert key not in text, f"the weights key appears in {what}"
        for service in _services(stack):
            if service != "replay":  # every keyed role reads it from the secret mount, nowhere else
                probe = engine.docker(
                    "exec", stack.container(service), "sh", "-c", "env; cat /run/secrets/weights_key"
                ).stdout
                assert probe.count(key) == 1, f"{service}: key not (only) at /run/secrets/weights_key"
    finally:
        logs = stack.logs()
        print(f"--- compose logs (tail) ---\n{logs[-30000:]}")  # shown by pytest when the test fails
        stack("down", "-v", "--remove-orphans", "--timeout", "30", timeout=300, check=False)

    assert key not in logs, "the weights key appears in the logs"
    assert stack.leftovers() == {"containers": [], "networks": [], "volumes": []}
    # What the run left in the mounted directory: every role's metrics, and no key.
    for role in ("replay", "learner", "quantizer", "evaluator", *(f"actor_{i}" for i in ACTORS)):
        assert _rows(run_dir, role), f"no metrics from {role}"
    assert max(r.get("step") or 0 for r in _rows(run_dir, "learner")) > 0
    for path in run_dir.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert key.encode() not in path.read_bytes(), f"the weights key is in {path}"


def _services(stack: engine.Stack) -> list[str]:
    return stack("config", "--services").stdout.split()
