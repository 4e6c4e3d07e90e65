"""A test-only user environment, to show that a task outside ActorQ and Gymnasium is one module on the path.

``env.task: tests.user_env:Corridor`` (its class) or ``tests.user_env:Corridor-v0`` (the id it registers on
import, Gymnasium's ``module:id`` form). Nothing inside ``actorq`` knows it: every role's process imports this module
(``PYTHONPATH`` holds the repository root, as a user's package would be installed or on the path).

The agent walks a corridor of ``length`` cells from cell 0 to the last one (reward 1 there, -0.01 a step) and
has ``max_steps`` steps. Its observation is a ``Dict`` (the position as a Box, the visited cells as MultiBinary),
so it also shows how a Dict observation is flattened: keys in sorted order, ``position`` (1 value) then ``visited``
(``length`` values).
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

ENV_ID = "Corridor-v0"

OVERRIDES = {"env.task": "tests.user_env:Corridor", "env.make_kwargs": {"length": 5, "max_steps": 25}}
"""Config overrides that make a DQN test config train :class:`Corridor` by its import path (with make_kwargs)."""


class Corridor(gymnasium.Env):
    """Walk right to the end of the corridor: actions 0 (left) and 1 (right)."""

    def __init__(self, length: int = 6, max_steps: int = 30):
        self.length, self.max_steps = int(length), int(max_steps)
        self.observation_space = spaces.Dict(
            {
                "visited": spaces.MultiBinary(self.length),
                "position": spaces.Box(0.0, 1.0, (1,), np.float32),
            }
        )
        self.action_space = spaces.Discrete(2)
        self._pos, self._steps = 0, 0
        self._visited = np.zeros(self.length, np.int8)

    def _obs(self) -> dict:
        return {
            "visited": self._visited.copy(),
            "position": np.array([self._pos / (self.length - 1)], np.float32),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._pos = int(self.np_random.integers(0, 2))  # the seeded RNG decides where an episode starts
        self._steps = 0
        self._visited[:] = 0
        self._visited[self._pos] = 1
        return self._obs(), {}

    def step(self, action):
        self._steps += 1
        self._pos = int(np.clip(self._pos + (1 if int(action) == 1 else -1), 0, self.length - 1))
        self._visited[self._pos] = 1
        terminated = self._pos == self.length - 1
        reward = 1.0 if terminated else -0.01
        return self._obs(), reward, terminated, self._steps >= self.max_steps, {}


gymnasium.register(ENV_ID, entry_point=Corridor, max_episode_steps=50)


class Frames(gymnasium.Env):
    """Tiny uint8 frames and bounded continuous actions (D4PG, DDPG): ``[2, 6, 6]`` frames in which a lit cell
    drifts by the action; reward: minus the distance from the centre. Truncated after ``max_steps``."""

    def __init__(self, max_steps: int = 40):
        self.max_steps = int(max_steps)
        self.observation_space = spaces.Box(0, 255, (2, 6, 6), np.uint8)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._xy = np.zeros(2)
        self._steps = 0

    def _obs(self) -> np.ndarray:
        frame = np.zeros((2, 6, 6), np.uint8)
        x, y = np.clip(np.round(self._xy).astype(int), 0, 5)
        frame[0, y, x] = 255
        frame[1] = self._steps * 255 // self.max_steps
        return frame

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._xy = self.np_random.uniform(0, 5, 2)
        self._steps = 0
        return self._obs(), {}

    def step(self, action):
        self._steps += 1
        self._xy = np.clip(self._xy + np.asarray(action, np.float64), 0, 5)
        reward = -float(np.abs(self._xy - 2.5).sum())
        return self._obs(), reward, False, self._steps >= self.max_steps, {}


PLUGIN_ID = "PluginCorridor-v0"
"""The id :func:`register_plugin_ids` registers (as an installed plugin's ``actorq.envs`` entry point would)."""


def register_plugin_ids() -> None:
    """An ``actorq.envs`` entry point: registers :data:`PLUGIN_ID` (a corridor of 8 cells)."""
    gymnasium.register(PLUGIN_ID, entry_point=Corridor, kwargs={"length": 8})
