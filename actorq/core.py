"""Small interfaces shared by every layer, named as in Acme (``acme/core.py``).

The distributed loop they serve::

    # actor process                              # learner process
    actor.observe_first(timestep)                while True:
    while not timestep.last():                       learner.step()          # samples replay, updates
        action = actor.select_action(obs)            publisher.publish(learner.get_variables(), step)
        timestep = env.step(action)
        actor.observe(action, timestep)          # quantizer process
        actor.update()   # pulls weights          message = quantize(subscriber.latest())
                                                 publisher.publish(message)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import dm_env
import numpy as np


@runtime_checkable
class Actor(Protocol):
    """Acts in an environment and feeds experience to replay."""

    def select_action(self, observation: np.ndarray) -> np.ndarray:
        """Returns the action for one (unbatched) observation, exploration included."""

    def observe_first(self, timestep: dm_env.TimeStep) -> None:
        """Records the first timestep of an episode."""

    def observe(self, action: np.ndarray, next_timestep: dm_env.TimeStep) -> None:
        """Records the transition that ``action`` caused."""

    def update(self, wait: bool = False) -> None:
        """Pulls new weights when due (or now, if ``wait``)."""


@runtime_checkable
class VariableSource(Protocol):
    """Something whose variables can be read (the learner)."""

    def get_variables(self) -> Mapping[str, np.ndarray]:
        """Returns the current variables by name, as numpy arrays."""


@runtime_checkable
class Learner(VariableSource, Protocol):
    """Takes optimisation steps from replayed experience."""

    def step(self) -> None:
        """One optimisation step."""


@runtime_checkable
class Adder(Protocol):
    """Writes experience into replay (Acme's adder interface)."""

    def add_first(self, timestep: dm_env.TimeStep) -> None: ...

    def add(self, action: np.ndarray, next_timestep: dm_env.TimeStep, extras: Any = ()) -> None: ...

    def reset(self) -> None: ...


@runtime_checkable
class WeightPublisher(Protocol):
    """Publishes encoded weight messages (bytes as a uint8 array)."""

    def publish(self, message: np.ndarray) -> None: ...


@runtime_checkable
class WeightSubscriber(Protocol):
    """Fetches the latest encoded weight message, or None when there is none yet."""

    def latest(self, timeout_s: float | None = None) -> np.ndarray | None: ...
