"""Weight messages through Reverb: publish the newest encoded message, fetch the newest one.

Messages are the codec's uint8 arrays (``actorq.quantize.codec``): plain bytes, never pickles. Each table holds one
item, so a publish replaces the previous message and a fetch always sees the newest.
"""

from __future__ import annotations

import logging

import numpy as np
import reverb

log = logging.getLogger(__name__)


class ReverbWeightPublisher:
    """Inserts encoded weight messages into a one-slot table (never blocks: the table has no insert limit)."""

    def __init__(self, client: reverb.Client, table: str):
        self._client = client
        self._table = table
        self.published = 0

    def publish(self, message: np.ndarray) -> None:
        """Insert ``message`` (a uint8 array), replacing the previous one."""
        if message.dtype != np.uint8 or message.ndim != 1:
            raise TypeError("weight messages are 1-D uint8 arrays from actorq.quantize.codec.encode_message")
        self._client.insert([message], priorities={self._table: 1.0})
        self.published += 1


class ReverbWeightSubscriber:
    """Fetches the newest encoded message from a one-slot table.

    ``latest`` returns None when the table is still empty (or the server does not answer within the timeout), so
    an actor keeps acting on its last good weights instead of blocking.
    """

    def __init__(self, client: reverb.Client, table: str, timeout_s: float = 5.0):
        self._client = client
        self._table = table
        self._timeout_s = timeout_s

    def latest(self, timeout_s: float | None = None) -> np.ndarray | None:
        timeout = max(1, int(round(timeout_s if timeout_s is not None else self._timeout_s)))
        # Sampling an empty table blocks forever (a restarted server starts empty): ask first, with a deadline.
        info = self._client.server_info(timeout=timeout)
        if info[self._table].current_size == 0:
            return None
        sample = next(self._client.sample(self._table, num_samples=1))
        return np.asarray(sample[0].data[0], dtype=np.uint8)
