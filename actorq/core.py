"""The two interfaces the actor is written against, so tests can stand in for Reverb (named as in Acme).

The distributed loop they serve (publishers take one encoded ``uint8`` message from
``actorq.quantize.codec.encode_message``; subscribers return the newest one)::

    # actor process                          # learner process
    actor.observe_first(timestep)            while True:
    while not timestep.last():                   learner.step()   # samples replay, updates
        action = actor.select_action(obs)        # every publish_period steps: fp32, signed
        timestep = env.step(action)              publisher.publish(encode_message(variables, version=step, ...))
        actor.observe(action, timestep)
        actor.update()   # pulls weights     # quantizer process
                                             fp32 = decode_message(subscriber.latest())
                                             publisher.publish(encode_message(torch_state(fp32), precision="int8", ...))
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import dm_env
import numpy as np

from actorq.errors import ActorQError


@runtime_checkable
class Adder(Protocol):
    """Writes experience into replay (Acme's adder interface)."""

    def add_first(self, timestep: dm_env.TimeStep) -> None: ...

    def add(self, action: np.ndarray, next_timestep: dm_env.TimeStep, extras: Any = ()) -> None: ...

    def reset(self) -> None: ...


class WeightsUnavailableError(ActorQError, ConnectionError):
    """A :class:`WeightSubscriber` could not reach its weights (replay restarting, link down); worth retrying."""


@runtime_checkable
class WeightSubscriber(Protocol):
    """Fetches the latest encoded weight message, or None when there is none yet.

    ``latest`` raises :class:`WeightsUnavailableError` when the source does not answer.
    """

    def latest(self, timeout_s: float | None = None) -> np.ndarray | None: ...
