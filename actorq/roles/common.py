"""What every role process shares: its run-directory layout, stop signal, logging setup and periodic metrics."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

from actorq.config import ExperimentConfig
from actorq.metrics import MetricsWriter

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3


def role_dir(run_dir: str | Path, role: str, index: int | None = None) -> Path:
    """``RUN_DIR/<role>`` or ``RUN_DIR/<role>_<index>`` (created)."""
    path = Path(run_dir) / (role if index is None else f"{role}_{index}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def setup_logging(level: str = "INFO") -> None:
    """One-line log format with the role's pid, to stderr."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname).1s [%(process)d %(name)s] %(message)s",
        datefmt="%H:%M:%S",
    )
    # Acme/absl and TF are chatty at INFO; keep our own messages readable.
    for noisy in ("absl", "tensorflow", "h5py", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` so the role finishes its step, flushes metrics and exits 0."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, _frame):
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def quiet_tensorflow() -> None:
    """Silence TF's C++ start-up chatter before it is imported (roles import reverb, which imports TF)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class Periodic:
    """True once every ``period_s`` seconds (first call returns True after one period)."""

    def __init__(self, period_s: float):
        self.period_s = period_s
        self._next = time.monotonic() + period_s

    def due(self) -> bool:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.period_s
            return True
        return False


class RoleBase:
    """A role: ``step()`` does one unit of work, ``run(stop)`` loops until ``stop`` is set."""

    name = "role"

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, index: int | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.dir = role_dir(run_dir, self.name, index)
        self.metrics = MetricsWriter(self.dir)
        self._log_timer = Periodic(config.log_period_s)
        self.started = time.time()

    def step(self) -> None:
        raise NotImplementedError

    def write_metrics(self) -> None:
        """Write one metrics row (roles override)."""

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.step()
                if self._log_timer.due():
                    self.write_metrics()
        finally:
            self.write_metrics()
            self.close()

    def close(self) -> None:
        self.metrics.close()
