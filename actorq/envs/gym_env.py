"""A Gymnasium environment behind the ``dm_env`` interface, its observations passed on as its spaces decide
(:mod:`actorq.envs.spaces`): terminated -> discount 0, truncated -> discount 1, float32 rewards."""

from __future__ import annotations

from typing import Any

import dm_env
import numpy as np
from dm_env import specs

from actorq.envs.base import ONE, ZERO, TaskEnvironment
from actorq.envs.spaces import ObservationLayout


class GymnasiumEnvironment(TaskEnvironment):
    """One Gymnasium environment as a ``dm_env``.

    Args:
        env: The Gymnasium environment (wrapped as the task needs).
        seed: Seeds the first reset; later resets continue its random stream.
        layout: How its observations are passed on.
        discrete: Discrete actions (an int, offset by the space's ``start``), else a Box's float32 array.
        life_loss_discount: A lost life (``info["lives"]`` went down; ALE games while training) gives discount 0
            without ending the episode (Acme's ``zero_discount_on_life_loss``).
    """

    def __init__(
        self, env: Any, seed: int, layout: ObservationLayout, discrete: bool, life_loss_discount: bool
    ):
        self._env = env
        self._seed: int | None = seed
        self._layout = layout
        self._discrete = discrete
        space = env.action_space
        self._start = int(getattr(space, "start", 0)) if discrete else 0
        self._action_shape = None if discrete else tuple(space.shape)
        self._life_loss = life_loss_discount
        self._lives: int | None = None
        self._reset_next = True

    def reset(self) -> dm_env.TimeStep:
        obs, info = self._env.reset(seed=self._seed)
        self._seed = None  # seed once; later resets continue the seeded RNG stream
        self._reset_next = False
        self._lives = _lives(info)
        return dm_env.restart(self._layout.convert(obs))

    def step(self, action) -> dm_env.TimeStep:
        if self._reset_next:
            return self.reset()
        if self._discrete:
            act: Any = int(np.asarray(action).reshape(-1)[0]) + self._start
        else:
            act = np.asarray(action, np.float32).reshape(self._action_shape)
        obs, reward, terminated, truncated, info = self._env.step(act)
        obs = self._layout.convert(obs)
        reward = np.float32(reward)
        # Explicit float32 discounts: Acme's adder writes what it is given, and the table signature is float32.
        if terminated:
            self._reset_next = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, ZERO, obs)
        if truncated:
            self._reset_next = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, ONE, obs)
        lives, lost = _lives(info), False
        if self._life_loss and lives is not None and self._lives is not None:
            lost = lives < self._lives
        self._lives = lives
        return dm_env.TimeStep(dm_env.StepType.MID, reward, ZERO if lost else ONE, obs)

    def observation_spec(self):
        return specs.Array(self._layout.shape, self._layout.dtype, name="observation")

    def action_spec(self):
        space = self._env.action_space
        if self._discrete:
            return specs.DiscreteArray(int(space.n), dtype=np.int32, name="action")
        return specs.BoundedArray(space.shape, np.float32, space.low, space.high, name="action")

    @property
    def step_limit(self) -> int | None:
        try:  # the outermost TimeLimit: ours, or gymnasium.make's
            limit = self._env.get_wrapper_attr("_max_episode_steps")
        except AttributeError:
            limit = self._env.spec.max_episode_steps if self._env.spec is not None else None
        return int(limit) if limit else None

    @property
    def gym_env(self) -> Any:
        """The Gymnasium environment (wrapped) this adapts."""
        return self._env


def _lives(info: Any) -> int | None:
    lives = info.get("lives") if isinstance(info, dict) else None
    return None if lives is None else int(lives)
