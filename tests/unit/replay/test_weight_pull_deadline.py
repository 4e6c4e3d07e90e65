"""A weight pull never blocks its caller past its deadline, even when the server vanishes mid-pull.

Reverb's sample has no deadline: a server that goes away (or restarts with an empty table) between the size check
and the sample would hold an actor's env loop for as long as it is away. The subscriber samples on a helper thread
instead; this fakes a client whose sample blocks until the test releases it.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from actorq.core import WeightsUnavailableError
from actorq.replay.weights import ReverbWeightSubscriber


class HangingClient:
    """server_info says the table holds an item; sample blocks until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.samples = 0

    def server_info(self, timeout: int | None = None) -> dict:
        return {"policy": SimpleNamespace(current_size=1)}

    def sample(self, table: str, num_samples: int = 1):
        self.samples += 1
        self.release.wait()
        yield [SimpleNamespace(data=[np.arange(4, dtype=np.uint8) + self.samples])]


def test_blocked_sample_times_out_and_is_collected_later_without_piling_up():
    client = HangingClient()
    subscriber = ReverbWeightSubscriber(client, "policy", timeout_s=1.0)
    for _ in range(2):
        started = time.monotonic()
        with pytest.raises(WeightsUnavailableError, match="TimeoutError") as err:
            subscriber.latest()
        assert isinstance(err.value.__cause__, TimeoutError)
        assert time.monotonic() - started < 3.0  # bounded by the deadline, not by the outage
    assert (
        client.samples == 1
    )  # the second call waited for the outstanding sample instead of starting another
    client.release.set()
    assert np.array_equal(subscriber.latest(), np.arange(4, dtype=np.uint8) + 1)
    assert np.array_equal(subscriber.latest(), np.arange(4, dtype=np.uint8) + 2) and client.samples == 2
