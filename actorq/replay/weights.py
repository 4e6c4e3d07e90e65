"""Weight messages through Reverb: publish the newest encoded message, fetch the newest one.

Messages are the codec's uint8 arrays (``actorq.quantize.codec``): plain bytes, never pickles. Each table holds one
item, so a publish replaces the previous message and a fetch always sees the newest.

Anyone who reaches the replay port can put anything into these tables. A fetched item that is not one 1-D uint8
column of a size the receiver can take (any other dtype, rank or number of columns, or more bytes than
``max_bytes``) is a :class:`~actorq.quantize.message.MalformedMessageError`, raised before anything reads it: the
caller counts it as a rejected message, like one whose signature does not verify.
"""

from __future__ import annotations

import logging
import queue
import threading

import numpy as np
import reverb

from actorq.core import WeightsUnavailableError
from actorq.quantize.codec import MAX_MESSAGE_BYTES
from actorq.quantize.message import MalformedMessageError
from actorq.replay.retry import REPLAY_ERRORS, first_line, replay_call

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

    ``latest`` returns None when the table is still empty, and raises ``WeightsUnavailableError`` (chained to
    Reverb's error, or to a TimeoutError when a sample does not complete) when the server does not answer within
    the timeout (replay restarting, link down), so callers decide: an actor keeps acting on its last good weights,
    the quantizer and evaluator retry. One caller at a time.

    With ``only_new``, ``latest`` also returns None while the table has had no insert since the message it returned
    last: a poller then pays one small ``server_info`` call instead of downloading the same message again (the
    quantizer polls the learner's fp32 weights, 34 MB for a 3x2048 policy, every ``poll_interval_s``: measured on a
    2-core Zen 4, re-downloading them took a fifth of the machine's CPU). The insert count is read before the
    sample, so a message is never skipped: an insert between the two only makes the next call fetch the newest
    message once more. After an error the next call fetches again (a restarted server counts inserts anew).
    """

    def __init__(
        self,
        client: reverb.Client,
        table: str,
        timeout_s: float = 5.0,
        *,
        only_new: bool = False,
        max_bytes: int = MAX_MESSAGE_BYTES,
    ):
        self._client = client
        self._table = table
        self._timeout_s = timeout_s
        self._only_new = only_new
        self._max_bytes = max_bytes
        # The table's insert count when the last message was fetched (only_new).
        self._returned_inserts: int | None = None
        self._requests: queue.SimpleQueue | None = None
        self._outstanding: threading.Event | None = None
        self._result: np.ndarray | BaseException | None = None

    def latest(self, timeout_s: float | None = None) -> np.ndarray | None:
        """The newest message (a 1-D uint8 array), or None (an empty table; with ``only_new``, nothing new).

        Raises:
            WeightsUnavailableError: Replay did not answer within the timeout.
            MalformedMessageError: The table holds something that is not a message (see the module docstring).
        """
        timeout = max(1, int(round(timeout_s if timeout_s is not None else self._timeout_s)))
        try:
            with replay_call():
                return self._latest(timeout)
        except (*REPLAY_ERRORS, TimeoutError) as exc:
            self._returned_inserts = None
            raise WeightsUnavailableError(
                f"table {self._table!r}: {type(exc).__name__}: {first_line(exc)}"
            ) from exc

    def refetch(self) -> None:
        """Make the next ``latest`` download the newest message even when nothing was inserted since (``actorq bench
        actors --fresh`` replays one broadcast as a new one each pull)."""
        self._returned_inserts = None

    def _latest(self, timeout: int) -> np.ndarray | None:
        # Sampling an empty table blocks forever (a restarted server starts empty): ask first, with a deadline.
        info = self._client.server_info(timeout=timeout)[self._table]
        if info.current_size == 0:
            return None
        if self._only_new:
            inserts = int(info.rate_limiter_info.insert_stats.completed)
            if inserts == self._returned_inserts:
                return None
        else:
            inserts = None
        data = self._sample(timeout)
        self._returned_inserts = inserts  # junk too: it is rejected once, not at every poll
        return self._message(data)

    def _message(self, data: object) -> np.ndarray:
        """The one uint8 column of a sampled item, or MalformedMessageError."""
        if not isinstance(data, (list, tuple)) or len(data) != 1 or not isinstance(data[0], np.ndarray):
            count = len(data) if isinstance(data, (list, tuple)) else type(data).__name__
            raise MalformedMessageError(
                f"table {self._table!r} holds an item of {count} columns, not a message"
            )
        column = data[0]
        if column.dtype != np.uint8 or column.ndim != 1:
            raise MalformedMessageError(
                f"table {self._table!r} holds a {column.dtype}{list(column.shape)} item, not a 1-D uint8 message"
            )
        if column.size > self._max_bytes:
            raise MalformedMessageError(
                f"table {self._table!r} holds a {column.size}-byte item, larger than the {self._max_bytes} a "
                "message for this receiver can take"
            )
        return column

    def _sample(self, timeout: float) -> object:
        """Sample on a helper thread and wait at most ``timeout``: Reverb's sample has no deadline of its own, and
        a server that goes away between ``server_info`` and the sample would otherwise block the caller for as
        long as it is away. A sample still blocked at the deadline stays outstanding (one at most); a later call
        waits for it instead of starting another."""
        if self._requests is None:
            self._requests = queue.SimpleQueue()
            threading.Thread(target=self._sample_forever, name=f"sample-{self._table}", daemon=True).start()
        if self._outstanding is None:
            self._outstanding = threading.Event()
            self._requests.put(self._outstanding)
        if not self._outstanding.wait(timeout):
            raise TimeoutError(f"sampling table {self._table!r} did not complete within {timeout}s")
        self._outstanding = None
        result, self._result = self._result, None
        if isinstance(result, BaseException):
            raise result
        return result

    def _sample_forever(self) -> None:
        while True:
            done = self._requests.get()
            try:
                sample = next(self._client.sample(self._table, num_samples=1))
                self._result = list(sample[0].data)
            except Exception as exc:  # noqa: BLE001  (thread boundary: handed to the caller, who raises it)
                self._result = exc
            done.set()
