"""TensorBoard scalars of a role's metrics through ``tf.summary``, TensorFlow's own maintained writer.

Every role process has TensorFlow loaded (the learner's own; Reverb's in replay, the quantizer, the evaluator and the
actor, whose code in :mod:`actorq.actors` never uses it), so one writer serves all of them. It reports a failed write
(a full disk) on the caller's thread, where :class:`~actorq.metrics.MetricsWriter` counts it and reopens later;
the ``tensorboard`` package's asynchronous writer (torch's ``SummaryWriter`` uses it) blocks its caller forever once
its thread died on a full disk. ``tensorboard --logdir RUN_DIR`` shows each role as a run (``learner/tb``,
``actor_0/tb``, ...) and each metrics column as a tag, stepped by the row's ``step``. The writer is made at the
first row, not before: the learner sets TensorFlow's thread pools in its constructor, before any TensorFlow op runs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FLUSH_S = 10.0
"""Events reach the file at least this often (and at close)."""


class SummaryScalars:
    """A :class:`~actorq.metrics.ScalarSink` writing ``tf.summary`` scalars into ``directory`` (made lazily)."""

    def __init__(self, directory: Path):
        self._directory = directory
        self._writer: Any = None
        self._lock = threading.Lock()

    def write(self, values: Mapping[str, float], step: int) -> None:
        import tensorflow as tf

        with self._lock:
            if self._writer is None:
                self._writer = tf.summary.create_file_writer(
                    str(self._directory), flush_millis=int(FLUSH_S * 1000)
                )
            with self._writer.as_default():
                for tag, value in values.items():
                    tf.summary.scalar(tag, value, step=step)

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                writer, self._writer = self._writer, None
                writer.close()


def writer(directory: Path) -> SummaryScalars:
    """The :class:`~actorq.metrics.MetricsWriter` ``tensorboard`` factory every role uses."""
    return SummaryScalars(directory)
