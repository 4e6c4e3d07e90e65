"""What every ActorQ environment shares: float32 rewards and discounts, and the episode step limit it knows."""

from __future__ import annotations

import dm_env
import numpy as np
from dm_env import specs

ZERO = np.float32(0.0)
ONE = np.float32(1.0)


class TaskEnvironment(dm_env.Environment):
    """A task behind the ``dm_env`` interface with float32 reward and discount specs (Acme's adder writes what it is
    given, and the replay table's signature is float32); subclasses give the observation and action specs."""

    _env: object

    def reward_spec(self):
        return specs.Array((), np.float32, name="reward")

    def discount_spec(self):
        return specs.BoundedArray((), np.float32, 0.0, 1.0, name="discount")

    def close(self) -> None:
        self._env.close()

    @property
    def step_limit(self) -> int | None:
        """Steps an episode lasts at most (the truncation limit), None without one."""
        raise NotImplementedError
