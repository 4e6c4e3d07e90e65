"""Environments as ``dm_env`` with flat float32 observations: dm_control suite tasks and gymnasium ids.

``make_environment(env_config, seed)`` is the one constructor every role uses, so learner, actors and evaluator see
the same observation layout. ``environment_spec(env_config)`` gives the sizes networks are built from.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import dm_env
import numpy as np
from dm_env import specs

from actorq.config import GYM_TASKS, EnvConfig
from actorq.errors import UsageError

log = logging.getLogger(__name__)

# Training never renders: without a display, tell dm_control not to probe GLFW (it warns on every import).
# A user who wants rendering sets MUJOCO_GL (egl/osmesa/glfw) and that wins.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "disable")


_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)


class UnknownTaskError(UsageError):
    """The task is not one ActorQ knows; the message lists the valid ones."""


@dataclass(frozen=True)
class EnvironmentSpec:
    """What a network needs to know about a task."""

    obs_dim: int
    """Length of the flat observation vector."""
    discrete: bool
    """True for discrete actions (DQN)."""
    num_actions: int
    """Number of discrete actions (discrete) or action dimensions (continuous)."""
    action_low: np.ndarray | None
    """Continuous action lower bounds (None when discrete)."""
    action_high: np.ndarray | None
    """Continuous action upper bounds (None when discrete)."""
    action_spec: specs.Array
    """The dm_env action spec."""
    observation_spec: specs.Array
    """The flat observation spec."""
    obs_shape: tuple[int, ...] = ()
    """The observation's shape as the environment gives it (``(obs_dim,)`` for flat observations)."""
    obs_dtype: np.dtype = np.dtype(np.float32)
    """The observation's dtype (``uint8`` for pixels)."""


def dmc_tasks() -> list[str]:
    """All dm_control suite tasks as ``domain:task``."""
    from dm_control import suite

    return sorted(f"{d}:{t}" for d, t in suite.ALL_TASKS)


def validate_task(env: EnvConfig) -> None:
    """Raise UnknownTaskError (listing the valid names) unless the task exists in its suite."""
    if env.suite == "gym":
        if env.task not in GYM_TASKS:
            raise UnknownTaskError(
                f"unknown gym task {env.task!r}; ActorQ supports: {', '.join(sorted(GYM_TASKS))}"
            )
        return
    if env.suite == "dmc":
        valid = dmc_tasks()
        if env.task not in valid:
            hint = [t for t in valid if t.split(":")[0] == env.task.split(":")[0]]
            raise UnknownTaskError(
                f"unknown dm_control task {env.task!r} (format domain:task); "
                f"{'tasks of that domain: ' + ', '.join(hint) if hint else 'valid tasks: ' + ', '.join(valid)}"
            )
        return
    raise UnknownTaskError(f"unknown suite {env.suite!r}; choose dmc or gym")


class _FlatFloat32Environment(dm_env.Environment):
    """Shared specs: a flat float32 observation of ``self._obs_dim`` and float32 reward/discount (Acme's adder
    writes what it is given, and the replay table's signature is float32)."""

    _obs_dim: int
    _env: object

    def observation_spec(self):
        return specs.Array((self._obs_dim,), np.float32, name="observation")

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


class FlatDmcEnvironment(_FlatFloat32Environment):
    """A dm_control task with its observation dict concatenated into one float32 vector (sorted key order)."""

    def __init__(self, env: dm_env.Environment, max_episode_steps: int = 0):
        self._env = env
        self._keys = list(env.observation_spec().keys())
        self._obs_dim = int(sum(int(np.prod(s.shape)) for s in env.observation_spec().values()))
        self._max_steps = max_episode_steps
        self._steps = 0

    def _flat(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
        obs = np.concatenate([np.asarray(timestep.observation[k], np.float32).ravel() for k in self._keys])
        reward = None if timestep.reward is None else np.float32(timestep.reward)
        discount = None if timestep.discount is None else np.float32(timestep.discount)
        return timestep._replace(observation=obs, reward=reward, discount=discount)

    def reset(self) -> dm_env.TimeStep:
        self._steps = 0
        return self._flat(self._env.reset())

    def step(self, action) -> dm_env.TimeStep:
        self._steps += 1
        ts = self._flat(self._env.step(action))
        if self._max_steps and self._steps >= self._max_steps and not ts.last():
            ts = dm_env.TimeStep(dm_env.StepType.LAST, ts.reward, _ONE, ts.observation)
        return ts

    def action_spec(self):
        spec = self._env.action_spec()
        return specs.BoundedArray(spec.shape, np.float32, spec.minimum, spec.maximum, name="action")

    @property
    def step_limit(self) -> int | None:
        # dm_control keeps its own time limit private: only ours is known without stepping an episode.
        return self._max_steps or None


class GymnasiumEnvironment(_FlatFloat32Environment):
    """A gymnasium environment behind the dm_env interface (terminated -> discount 0, truncated -> discount 1)."""

    def __init__(self, task: str, seed: int, max_episode_steps: int = 0):
        import gymnasium

        kwargs = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
        self._env = gymnasium.make(task, **kwargs)
        self._seed: int | None = seed
        self._reset_next = True
        space = self._env.action_space
        self._discrete = isinstance(space, gymnasium.spaces.Discrete)
        self._obs_dim = int(np.prod(self._env.observation_space.shape))

    def reset(self) -> dm_env.TimeStep:
        obs, _ = self._env.reset(seed=self._seed)
        self._seed = None  # seed once; later resets continue the seeded RNG stream
        self._reset_next = False
        return dm_env.restart(np.asarray(obs, np.float32).ravel())

    def step(self, action) -> dm_env.TimeStep:
        if self._reset_next:
            return self.reset()
        act = int(np.asarray(action).reshape(-1)[0]) if self._discrete else np.asarray(action, np.float32)
        obs, reward, terminated, truncated, _ = self._env.step(act)
        obs = np.asarray(obs, np.float32).ravel()
        reward = np.float32(reward)
        # Explicit float32 discounts: Acme's adder writes what it is given, and the table signature is float32.
        if terminated:
            self._reset_next = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ZERO, obs)
        if truncated:
            self._reset_next = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ONE, obs)
        return dm_env.TimeStep(dm_env.StepType.MID, reward, _ONE, obs)

    def action_spec(self):
        space = self._env.action_space
        if self._discrete:
            return specs.DiscreteArray(int(space.n), dtype=np.int32, name="action")
        return specs.BoundedArray(space.shape, np.float32, space.low, space.high, name="action")

    @property
    def step_limit(self) -> int | None:
        return self._env.spec.max_episode_steps if self._env.spec is not None else None


def make_environment(env: EnvConfig, seed: int = 0) -> dm_env.Environment:
    """Build the task as a dm_env with flat float32 observations.

    Raises:
        UnknownTaskError: the task is not in the suite (the message lists valid tasks).
    """
    validate_task(env)
    if env.suite == "gym":
        return GymnasiumEnvironment(env.task, seed, env.max_episode_steps)
    from dm_control import suite

    domain, task = env.task.split(":")
    raw = suite.load(domain, task, task_kwargs={"random": seed})
    return FlatDmcEnvironment(raw, env.max_episode_steps)


def environment_spec(env: EnvConfig) -> EnvironmentSpec:
    """Sizes and bounds of the task's observation and action (builds and closes one instance)."""
    environment = make_environment(env, seed=0)
    try:
        obs_spec = environment.observation_spec()
        act_spec = environment.action_spec()
    finally:
        environment.close()
    obs = {"obs_shape": tuple(int(d) for d in obs_spec.shape), "obs_dtype": np.dtype(obs_spec.dtype)}
    obs_dim = int(np.prod(obs_spec.shape))
    if isinstance(act_spec, specs.DiscreteArray):
        return EnvironmentSpec(obs_dim, True, int(act_spec.num_values), None, None, act_spec, obs_spec, **obs)
    return EnvironmentSpec(
        obs_dim,
        False,
        int(np.prod(act_spec.shape)),
        np.asarray(act_spec.minimum, np.float32).reshape(-1),
        np.asarray(act_spec.maximum, np.float32).reshape(-1),
        act_spec,
        obs_spec,
        **obs,
    )
