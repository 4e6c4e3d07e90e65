"""TensorBoard scalars of a role's metrics, through a maintained writer that fits the role's framework.

Every role but the actor writes with ``tf.summary`` (its process has TensorFlow: the learner's own, and Reverb's
in replay, the quantizer and the evaluator); the actor, whose code never uses TensorFlow, with torch's
``torch.utils.tensorboard.SummaryWriter``. Both write the same event files: ``tensorboard --logdir RUN_DIR`` shows
each role as a run (``learner/tb``, ``actor_0/tb``, ...) and each metrics column as a tag, stepped by the row's
``step``. The writer is made at the first row, not before: the learner sets TensorFlow's thread pools in its
constructor, before any TensorFlow op runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

FLUSH_S = 10.0
"""Events reach the file at least this often (and at close)."""


class _Lazy:
    """Makes the writer at the first :meth:`write` (``make(directory)``), then forwards to it."""

    def __init__(
        self, directory: Path, make: Callable[[Path], Any], emit: Callable[[Any, str, float, int], None]
    ):
        self._directory = directory
        self._make = make
        self._emit = emit
        self._writer: Any = None
        self._lock = threading.Lock()

    def write(self, values: Mapping[str, float], step: int) -> None:
        with self._lock:
            if self._writer is None:
                self._writer = self._make(self._directory)
            for tag, value in values.items():
                self._emit(self._writer, tag, value, step)

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.flush()
                self._writer.close()
                self._writer = None


def _tf_writer(directory: Path) -> Any:
    import tensorflow as tf

    return tf.summary.create_file_writer(str(directory), flush_millis=int(FLUSH_S * 1000))


def _tf_emit(writer: Any, tag: str, value: float, step: int) -> None:
    import tensorflow as tf

    with writer.as_default():
        tf.summary.scalar(tag, value, step=step)


def _torch_writer(directory: Path) -> Any:
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(directory), flush_secs=int(FLUSH_S))


def _torch_emit(writer: Any, tag: str, value: float, step: int) -> None:
    writer.add_scalar(tag, value, global_step=step)


WRITERS = {"tf": (_tf_writer, _tf_emit), "torch": (_torch_writer, _torch_emit)}
"""The writers by framework: ``tf`` (``tf.summary``) and ``torch`` (``torch.utils.tensorboard``)."""


def writer_for(framework: str) -> Callable[[Path], _Lazy]:
    """The :class:`~actorq.metrics.MetricsWriter` ``tensorboard`` factory of a role of ``framework``."""
    make, emit = WRITERS[framework]
    return lambda directory: _Lazy(directory, make, emit)
