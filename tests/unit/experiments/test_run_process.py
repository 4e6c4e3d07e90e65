"""The experiment's run process: an interrupt stops the run in progress even when the run misses SIGINT."""

from __future__ import annotations

import signal
import sys
import threading
import time

from actorq.experiments import orchestration
from actorq.experiments.orchestration import RunProcess

# A run still starting up, whose SIGINT is lost: walker:stand's seed-1 run (2026-11-26) got the forwarded SIGINT
# in its first second, never reacted, was SIGKILLed after the grace time and left its six roles running.
DEAF_TO_SIGINT = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"


def test_an_interrupt_stops_a_run_that_misses_sigint(tmp_path, monkeypatch):
    monkeypatch.setattr(orchestration, "RUN_STOP_GRACE_S", 20.0)
    log = tmp_path / "run.log"
    with RunProcess() as runner:
        result: dict[str, int] = {}
        worker = threading.Thread(
            target=lambda: result.update(code=runner.run([sys.executable, "-c", DEAF_TO_SIGINT], log))
        )
        worker.start()
        deadline = time.monotonic() + 30
        while not (log.exists() and "up" in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runner.child is not None, "the run did not start"
        start = time.monotonic()
        runner._forward(signal.SIGINT, None)  # what the handler does on Ctrl-C
        worker.join(timeout=60)
        assert not worker.is_alive()
    # Stopped by SIGTERM at once, not SIGKILLed after the grace time (which orphans a launcher's roles).
    assert result["code"] == -signal.SIGTERM
    assert time.monotonic() - start < orchestration.RUN_STOP_GRACE_S
    assert runner.interrupted
