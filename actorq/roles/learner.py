"""Learner role: Acme's TF learner in full precision, publishing fp32 weights for the quantizer.

Publishing runs on a background thread with a one-slot mailbox (newest wins), so encoding and inserting a 34 MB
message never stalls learning. Messages are signed with the run's key (the quantizer and evaluator verify them).
Their version is the learner step plus an offset that keeps versions increasing across a ``--resume`` from a
checkpoint older than the last published weights (``RUN_DIR/learner/published_version.json``, fsynced): the
quantizer derives the policy's version from it, so the resumed learner's must be newer.

A checkpoint that cannot be written (a full disk) is warned about once per outage, counted (``write_failures``)
and tried again at the next period; the learner keeps learning.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import tensorflow as tf

from actorq.config import ExperimentConfig
from actorq.config.shards import weights_address
from actorq.envs import make_environment
from actorq.learners import configure_tensorflow, make_learner
from actorq.quantize.codec import encode_message
from actorq.quantize.signing import LEARNER_STREAM, WeightsKey
from actorq.replay import LEARNER_WEIGHTS_TABLE, ReverbWeightPublisher, wait_for_server
from actorq.replay.retry import REPLAY_ERRORS, ReplayOutage, replay_call
from actorq.replay.tables import environment_spec_for
from actorq.roles.base import RoleBase
from actorq.roles.version_record import VersionRecord
from actorq.roles.watchdog import StallWatchdog
from actorq.status import LearnerStatus

log = logging.getLogger(__name__)


class _BackgroundPublisher:
    """Encodes and publishes the newest variables on a thread; older pending ones are dropped."""

    def __init__(
        self, publisher: ReverbWeightPublisher, key: WeightsKey | None, record: VersionRecord, offset: int
    ):
        self._publisher = publisher
        self._key = key
        self._record = record
        self._offset = offset
        self._pending = None
        self._cv = threading.Condition()
        self._closed = False
        self.last_ms = 0.0
        self.last_bytes = 0
        self.published = 0
        self.error: BaseException | None = (
            None  # what ended the thread (not a replay error), raised by submit
        )
        self._thread = threading.Thread(target=self._loop, name="weight-publisher", daemon=True)
        self._thread.start()

    def submit(self, variables, step: int) -> None:
        if self.error is not None:
            raise RuntimeError("the learner's weight publisher thread failed") from self.error
        with self._cv:
            self._pending = (variables, step)
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._cv.wait()
                if self._pending is None:
                    return
                variables, step = self._pending
                self._pending = None
            started = time.perf_counter()
            try:
                # Its step plus the offset: monotonic, also across a resume.
                buf = encode_message(
                    variables,
                    version=step + self._offset,
                    learner_step=step,
                    precision="fp32",
                    comm_bits=32,
                    key=self._key,
                    stream=LEARNER_STREAM,
                )
                with replay_call():
                    self._publisher.publish(buf)
                self._record.write(step + self._offset, learner_step=step)
                self.last_bytes = int(buf.nbytes)
                self.published += 1
            except REPLAY_ERRORS:
                log.exception("publishing learner weights failed; will retry with the next weights")
            except Exception as exc:  # thread boundary: logged, then raised in the learner's loop by submit()
                log.exception("the weight publisher failed")
                self.error = exc
                return
            self.last_ms = (time.perf_counter() - started) * 1e3

    def close(self, flush: bool = True) -> None:
        with self._cv:
            if not flush:
                self._pending = None
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout=30)


class LearnerRole(RoleBase):
    """One Acme learner step per ``step()``; publishes every ``publish_period`` steps; checkpoints periodically."""

    name = "learner"

    def __init__(
        self,
        config: ExperimentConfig,
        run_dir: str | Path,
        address: str,
        connect_timeout_s: float = 60,
        *,
        weights_key: WeightsKey | None,
    ):
        """``weights_key``: the run's key; None (``--insecure-weights`` only) publishes unsigned weights."""
        super().__init__(config, run_dir)
        if weights_key is None:
            log.warning("learner PUBLISHES UNSIGNED WEIGHTS (--insecure-weights)")
        self.gpus = configure_tensorflow(config.learner.intra_op_threads, config.learner.inter_op_threads)
        log.info("learner devices: %s", self.gpus or "CPU only")
        client = wait_for_server(weights_address(address), timeout_s=connect_timeout_s)
        env = make_environment(config.env, seed=config.seed)
        spec = environment_spec_for(env)
        env.close()
        # Acme adds "checkpoints/<subdirectory>" itself: RUN_DIR/checkpoints/learner.
        ckpt = self.run_dir if config.learner.checkpoint_period_s > 0 else None
        self.learner = make_learner(config, spec, address, checkpoint_dir=ckpt)
        record = VersionRecord(
            self.dir / "published_version.json", weights_key.run_id_hex if weights_key else "", self.disk
        )
        offset = max(0, record.read() + 1 - self.learner.steps)
        if offset:
            log.info("learner message versions continue above v%d (step + %d)", record.read(), offset)
        self._publisher = _BackgroundPublisher(
            ReverbWeightPublisher(client, LEARNER_WEIGHTS_TABLE), weights_key, record, offset
        )
        self._start_step = self.learner.steps
        if self._start_step:
            log.info("resumed learner at step %d", self._start_step)
        # Actors need weights before they can act: publish the initial (or restored) policy right away.
        self._publisher.submit(self.learner.get_variables(), self.learner.steps)
        self._rate_t, self._rate_steps = time.monotonic(), self.learner.steps
        self._step_time = 0.0
        self._rate = 0.0
        # A step blocks while sampling: on the rate limiter when actors fall behind, or while replay restarts
        # (Reverb's dataset reconnects by itself). Report such stalls while they last.
        self._watchdog = StallWatchdog("learner sample", config.replay.rate_limiter_timeout_s)
        # Ride out a replay restart: the dataset blocks until replay is back, so a failed step is just retried.
        # The update itself was applied; only that batch's priority update is lost. Past connect_timeout_s of
        # failures the learner exits non-zero and the run stops (resume from the checkpoint).
        self._outage = ReplayOutage("learner", budget_s=connect_timeout_s)

    def step(self) -> None:
        started = time.perf_counter()
        with self._watchdog.watch():
            # Reverb client calls (DQN priority updates) and the dataset fail while replay restarts.
            answered, _ = self._outage.attempt(self.learner.step)
        if not answered:
            return
        self._step_time += time.perf_counter() - started
        steps = self.learner.steps
        if steps % self.config.learner.publish_period == 0:
            self._publisher.submit(self.learner.get_variables(), steps)
        self._save()
        if self.config.learner.max_steps and steps >= self.config.learner.max_steps:
            raise _Done

    @property
    def replay_errors(self) -> int:
        """Failed replay calls so far."""
        return self._outage.errors

    def write_metrics(self) -> None:
        now, steps = time.monotonic(), self.learner.steps
        rate = self._rate = (steps - self._rate_steps) / max(now - self._rate_t, 1e-9)
        self._rate_t, self._rate_steps = now, steps
        row = {
            "step": steps,
            "elapsed": time.time() - self.started,
            "steps_per_s": rate,
            "step_time_s": self._step_time,
            "publish_ms": self._publisher.last_ms,
            "published": self._publisher.published,
            "message_bytes": self._publisher.last_bytes,
            "max_step_s": self._watchdog.take_longest(),
            "stalls": self._watchdog.stalls,
            "replay_errors": self.replay_errors,
        }
        row.update(self.learner.losses)
        self.metrics.write(row)

    def status_record(self) -> LearnerStatus:
        return LearnerStatus(
            **self.status_fields(),
            step=int(self.learner.steps),
            steps_per_s=self._rate,
            published=self._publisher.published,
        )

    def run(self, stop: threading.Event) -> None:
        try:
            super().run(stop)
        except _Done:
            log.info("learner reached max_steps=%d", self.config.learner.max_steps)
        finally:
            self._watchdog.close()
            self._publisher.close(flush=False)

    def close(self) -> None:
        """Save the learner's state, then close the metrics: at the loop's end, and also from the role's host when
        the loop is still blocked after a stop's grace (sampling from a replay server that stopped first, as when
        every role notices at once that its launcher is gone), when the loop never gets back here by itself. A step
        blocked while sampling has not begun its update, so the variables are those of the last finished step."""
        try:
            self._save(force=True)
        finally:
            super().close()

    def _save(self, force: bool = False) -> None:
        """Checkpoint when due (or now with ``force``); a failed write is warned about once per outage and counted,
        never raised (the next period tries again)."""
        try:
            saved = self.learner.save(force=force)
        except (OSError, tf.errors.OpError) as exc:
            self.disk.failed(exc, "learner checkpoint")
            return
        if saved:
            self.disk.succeeded()
            log.info("learner checkpoint at step %d", self.learner.steps)


class _Done(Exception):  # noqa: N818  (a control-flow signal, not an error)
    """Raised by step() when the learner's own step budget is spent."""
