"""The one replay retry policy (actorq/replay/retry.py): which errors it retries, its backoff, its budget; and no
broad ``except Exception`` outside the process and thread boundaries that log what they caught."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import reverb
import tensorflow as tf

from actorq.actors.kernels.verify import KernelVerificationError
from actorq.core import WeightsUnavailableError
from actorq.replay.retry import (
    BACKOFF_MAX_S,
    ReplayOutage,
    ReplayUnreachableError,
    backoff_s,
)

ROOT = Path(__file__).resolve().parents[3]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _outage(budget_s: float | None) -> tuple[ReplayOutage, _Clock]:
    clock = _Clock()
    return ReplayOutage("test", budget_s, sleep=clock.sleep, clock=clock), clock


GONE = reverb.errors.DeadlineExceededError("ServerInfo call did not complete within provided timeout of 1s")


def _raise(exc: BaseException):
    def call():
        raise exc

    return call


REVERB_CLIENT = str(Path(reverb.__file__).resolve().parent / "client.py")


class FromReverb:
    """A plain ``RuntimeError`` raised the way Reverb's pybind layer raises it: from a frame in the reverb package."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self) -> None:
        exec(compile(f"raise RuntimeError({self.message!r})", REVERB_CLIENT, "exec"), {})

    def __repr__(self) -> str:
        return f"reverb:{self.message[:28]}"


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_s(n) for n in range(1, 8)] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff_s(100) == BACKOFF_MAX_S


@pytest.mark.parametrize(
    "exc",
    [
        reverb.errors.DeadlineExceededError("server_info timed out"),
        tf.errors.UnavailableError(None, None, "Socket closed"),
        tf.errors.DeadlineExceededError(None, None, "Deadline Exceeded"),
        WeightsUnavailableError("table 'policy': TimeoutError"),
        # Reverb's pybind layer: a plain RuntimeError with only a message when the connection fails (both seen
        # while replay was killed)
        FromReverb("Connection reset by peer"),
        FromReverb("Error when confirming that all items written to table."),
    ],
    ids=lambda e: repr(e) if isinstance(e, FromReverb) else f"{type(e).__name__}:{str(e)[:24]}",
)
def test_replay_errors_are_retried_with_backoff(exc) -> None:
    outage, clock = _outage(budget_s=60)
    call = exc if isinstance(exc, FromReverb) else _raise(exc)
    for _ in range(3):
        assert outage.attempt(call) == (False, None)
    assert clock.sleeps == [0.25, 0.5, 1.0]
    assert outage.errors == 3 and outage.failures == 3


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("bad call"),
        tf.errors.InvalidArgumentError(None, None, "shape"),
        KeyError("x"),
        RuntimeError(
            "Priority table nope was not found"
        ),  # what Reverb raises for a bad request to a live server
        KernelVerificationError("int8 kernel disagrees with fp32"),  # ActorQ's own RuntimeErrors are bugs too
        KernelVerificationError("connection reset"),  # a subclass is never read as a connection failure
        RuntimeError("Connection reset by peer"),  # not raised by Reverb: ours, a bug
        FromReverb("Priority table nope was not found"),  # Reverb's answer to a bad request: a bug
        FromReverb("Invalid argument: signature mismatch"),
    ],
    ids=lambda e: repr(e) if isinstance(e, FromReverb) else f"{type(e).__name__}:{str(e)[:24]}",
)
def test_other_errors_propagate_at_once(exc) -> None:
    outage, clock = _outage(budget_s=60)
    call, kind = (exc, RuntimeError) if isinstance(exc, FromReverb) else (_raise(exc), type(exc))
    with pytest.raises(kind) as raised:
        outage.attempt(call)
    assert type(raised.value) is kind
    assert clock.sleeps == [] and outage.errors == 0


def test_success_ends_the_outage_and_resets_the_backoff() -> None:
    outage, clock = _outage(budget_s=60)
    outage.attempt(_raise(GONE))
    outage.attempt(_raise(GONE))
    assert outage.attempt(lambda: 7) == (True, 7)
    outage.attempt(_raise(GONE))
    assert clock.sleeps == [0.25, 0.5, 0.25]
    assert outage.errors == 3 and outage.failures == 1


def test_gives_up_after_the_budget_naming_the_last_error() -> None:
    outage, clock = _outage(budget_s=3.0)
    with pytest.raises(
        ReplayUnreachableError, match=r"test: replay unreachable for \d+s.*UnavailableError: Gone"
    ) as err:
        for _ in range(10):
            outage.attempt(_raise(tf.errors.UnavailableError(None, None, "Gone\nlong grpc debug string")))
    assert isinstance(err.value.__cause__, tf.errors.UnavailableError)
    assert sum(clock.sleeps) > 3.0 and clock.now < 3.0 + BACKOFF_MAX_S + 1


def test_no_budget_never_gives_up_and_no_wait_does_not_sleep() -> None:
    outage, clock = _outage(budget_s=None)
    for _ in range(50):
        outage.attempt(_raise(GONE))
    assert clock.now > 200 and outage.errors == 50
    outage.attempt(_raise(GONE), wait=False)
    assert len(clock.sleeps) == 50


# Broad catches that remain: process/thread boundaries (each logs or hands on what it caught), optional foreign
# libraries, and kernels from foreign engines that are rejected, not fatal, when they fail.
BOUNDARIES = {
    "actorq/algorithms/__init__.py",  # a plugin's entry point that fails to load: logged, named when asked for
    "actorq/actors/actor.py",  # the async weight updater thread: logged and counted, it never dies of an error
    "actorq/actors/kernels/select.py",  # a kernel engine that cannot build: recorded in the selection's errors
    "actorq/actors/kernels/verify.py",  # a kernel that cannot run the probes: recorded in its Check
    "actorq/envs/__init__.py",  # a user's environment constructor that fails: one error line naming it, exit 2
    "actorq/envs/gym_tasks.py",  # a user's module or an env plugin's entry point that fails: named (exit 2 / a note)
    "actorq/measure/actors_worker.py",  # starting the worker pool: whatever fails stops the workers started, re-raised
    "actorq/bench/netns.py",  # building namespace hosts: whatever fails (Ctrl-C too) removes what was made, re-raised
    "actorq/measure/protocol.py",  # a bench worker's command: logged and reported to the bench
    "actorq/metrics.py",  # TensorBoard's record writer, optional: any error warned once per outage, counted, reopened
    "actorq/launchers/energy.py",  # codecarbon, optional: logged, energy recorded as unavailable
    "actorq/experiments/experiment.py",  # writing one run's record: logged, a rerun writes it, the grid goes on
    "actorq/launchers/ray_placement.py",  # calls into a cluster whose actors may be dead or gone: logged
    "actorq/launchers/ray_role.py",
    "actorq/launchers/ray_starts.py",  # the start log, an actor on a node that may be gone: counts become unknown  # a Ray worker process's role: logged in its own log, Ray reports it dead
    "actorq/launchers/inprocess.py",  # a role's thread: logged, ends the run
    "actorq/launchers/supervisor.py",  # the run's supervisor: logged, ends the run
    "actorq/launchers/tracking.py",  # an experiment tracker (W&B, MLflow), optional: logged, dropped, the run goes on
    "actorq/replay/checkpoints.py",  # Reverb's checkpoint call (a full disk is an IndexError): replay carries on
    "actorq/replay/run_state.py",  # the resume record's reading thread: handed to the caller, who raises it
    "actorq/replay/weights.py",  # the sampler thread: handed to the caller, who raises it
    "actorq/roles/host.py",  # a role's loop, its last flush at a blocked stop, a role process's start: logged
    "actorq/roles/learner.py",  # the weight publisher thread: logged, raised in the learner's loop
    "actorq/studies/deploy.py",  # a deployment figure's ORT session (plain exceptions): recorded as failed
    "actorq/report/censored.py",  # lifelines' AFT fit on degenerate data (ConvergenceError, numpy's): no ratio
    "actorq/studies/sb3_zip_read.py",  # torch.load of a user's zip: re-raised as a clear error
    "actorq/studies/zoo_env.py",  # gymnasium's env registry: re-raised as a clear error
}


def test_broad_excepts_only_at_boundaries() -> None:
    found = []
    for path in sorted((ROOT / "actorq").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            caught = (
                node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            )  # also `except (A, Exception)`
            names = {n.id for n in caught if isinstance(n, ast.Name)}
            if names & {"Exception", "BaseException"} and rel not in BOUNDARIES:
                found.append(f"{rel}:{node.lineno}")
    assert found == [], "catch the narrow error (actorq.replay.retry.REPLAY_ERRORS for replay calls)"


@pytest.mark.reverb
def test_against_a_real_server_a_bad_request_propagates_and_an_outage_is_retried() -> None:
    """What Reverb 0.7.3 really raises (retry.py's docstring): a bug on a live server is a plain RuntimeError and
    must propagate; the same client once its server stopped raises ReverbError's DeadlineExceededError, retried."""
    import numpy as np

    table = reverb.Table(
        "t", reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10, reverb.rate_limiters.MinSize(1)
    )
    server = reverb.Server([table])
    client = reverb.Client(f"localhost:{server.port}")
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    writer.append({"x": np.zeros(2, np.float32)})
    writer.create_item("t", 1.0, writer.history["x"][-1:])
    outage, clock = _outage(budget_s=60)
    assert outage.attempt(lambda: writer.flush(timeout_ms=5000)) == (True, None)
    with pytest.raises(RuntimeError, match="nope"):
        outage.attempt(lambda: next(client.sample("nope", 1)))
    assert outage.errors == 0

    server.stop()
    writer.append({"x": np.zeros(2, np.float32)})
    writer.create_item("t", 1.0, writer.history["x"][-1:])
    assert outage.attempt(lambda: writer.flush(timeout_ms=500)) == (False, None)
    assert outage.attempt(lambda: client.server_info(timeout=1)) == (False, None)
    assert outage.errors == 2 and clock.sleeps == [0.25, 0.5]
