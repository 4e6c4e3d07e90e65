"""Replay role: a Reverb server holding experience, learner weights and quantized policy messages.

With ``replay.shards`` > 1 a run has one replay role per shard (:mod:`actorq.config.shards`): shard 0 is
``replay`` (weights and experience), shard k is ``replay_k`` (experience; its weight tables stay empty), each with its
own port, run directory and checkpoints (``RUN_DIR/checkpoints/<label>``), which ``--resume`` restores shard by
shard. Each checkpoint replay asks for is synced and kept until the next one is (:mod:`actorq.replay.checkpoints`);
one that fails (a full disk) is warned about once per outage and counted, and replay keeps serving."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from actorq.config import ExperimentConfig
from actorq.durable import write_atomic
from actorq.envs import make_environment
from actorq.replay import make_server
from actorq.replay.checkpoints import CheckpointError
from actorq.replay.checkpoints import checkpoint as write_checkpoint
from actorq.replay.retry import REPLAY_ERRORS, first_line, replay_call
from actorq.replay.shards import experience_counts
from actorq.replay.tables import environment_spec_for
from actorq.roles.base import RoleBase
from actorq.status import ReplayStatus

log = logging.getLogger(__name__)

SIZES_TIMEOUT_S = 5
"""Seconds the role waits for its own server's table sizes, which only its log lines report."""


class ReplayRole(RoleBase):
    """Hosts one Reverb server (shard ``shard``); checkpoints its tables every ``checkpoint_period_s`` and on stop."""

    name = "replay"

    def __init__(
        self, config: ExperimentConfig, run_dir: str | Path, port: int | None = None, shard: int = 0
    ):
        # Shard 0 keeps the one-server directory name (``replay``), so one-shard runs and their resumes are as before.
        super().__init__(config, run_dir, index=shard or None)
        self.shard = shard
        env = make_environment(config.env, seed=config.seed)
        spec = environment_spec_for(env)
        env.close()
        period = config.learner.checkpoint_period_s
        self._checkpoint_dir = self.run_dir / "checkpoints" / self.dir.name if period > 0 else None
        self.server = make_server(config, spec, port=port, checkpoint_dir=self._checkpoint_dir)
        self.port = self.server.port
        self._client = self.server.localhost_client()
        self._last_checkpoint = time.monotonic()
        # What a restart restored from the checkpoint (fault tests compare it with the last checkpoint's sizes).
        log.info("replay serving on port %d with %s", self.port, self._sizes())
        try:  # for people and tests; launchers read the port from the status record
            write_atomic(self.dir / "port", str(self.port))
        except OSError as exc:
            self.disk.failed(exc, self.dir / "port")
        self._counts = {"size": 0, "inserts": 0, "samples": 0}
        self.publish_status()  # launchers wait for this record: replay serves from here on

    def _sizes(self) -> str:
        """The tables' sizes for the log; "sizes unknown (why)" when the server does not answer within
        :data:`SIZES_TIMEOUT_S` (a busy machine): a log line never stops replay, at its start or at a checkpoint."""
        try:
            with replay_call():
                info = self._client.server_info(timeout=SIZES_TIMEOUT_S)
        except REPLAY_ERRORS as exc:
            return f"sizes unknown ({type(exc).__name__}: {first_line(exc)})"
        return " ".join(f"{name}={int(table.current_size)}" for name, table in sorted(info.items()))

    def health_port(self) -> int | None:
        return self.port

    def step(self) -> None:
        time.sleep(0.5)
        period = self.config.learner.checkpoint_period_s
        if self._checkpoint_dir is not None and time.monotonic() - self._last_checkpoint >= period:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Write a Reverb checkpoint (restored automatically when a server starts on the same directory)."""
        if self._checkpoint_dir is None:
            return
        started = time.monotonic()
        before = self._sizes()
        try:
            path = write_checkpoint(self._client, self._checkpoint_dir)
        except CheckpointError as exc:
            self._last_checkpoint = time.monotonic()  # tried again at the next period
            self.disk.failed(exc, self._checkpoint_dir)
            return
        self.disk.succeeded()
        self._last_checkpoint = time.monotonic()
        # Inserts continue during the call: the snapshot's sizes lie between these two.
        log.info(
            "replay checkpoint %s between %s and %s (%.2fs)",
            path,
            before,
            self._sizes(),
            self._last_checkpoint - started,
        )

    def write_metrics(self) -> None:
        self._counts = experience_counts(self._client)
        self.metrics.write(
            {"step": self._counts["inserts"], "elapsed": time.time() - self.started, **self._counts}
        )

    def status_record(self) -> ReplayStatus:
        return ReplayStatus(
            **self.status_fields(), step=self._counts["inserts"], port=int(self.port), **self._counts
        )

    def run(self, stop: threading.Event) -> None:
        try:
            super().run(stop)
        finally:
            try:
                self.checkpoint()
            finally:
                self.server.stop()
