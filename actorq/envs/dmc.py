"""dm_control suite tasks (``env.suite: dmc``, ``env.task: domain:task``) with one flat float32 observation."""

from __future__ import annotations

import dm_env
import numpy as np
from dm_env import specs

from actorq.envs.base import ONE, TaskEnvironment
from actorq.envs.errors import UnknownTaskError


def dmc_tasks() -> list[str]:
    """Every task of the installed dm_control suite as ``domain:task``."""
    from dm_control import suite

    return sorted(f"{d}:{t}" for d, t in suite.ALL_TASKS)


def check_dmc_task(task: str) -> None:
    """Raise UnknownTaskError (naming the domain's tasks, or all) unless ``task`` is in dm_control's suite."""
    valid = dmc_tasks()
    if task not in valid:
        hint = [t for t in valid if t.split(":")[0] == task.split(":")[0]]
        raise UnknownTaskError(
            f"unknown dm_control task {task!r} (format domain:task); "
            f"{'tasks of that domain: ' + ', '.join(hint) if hint else 'valid tasks: ' + ', '.join(valid)}"
        )


class FlatDmcEnvironment(TaskEnvironment):
    """A dm_control task with its observation dict concatenated into one float32 vector (the dict's key order)."""

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
            ts = dm_env.TimeStep(dm_env.StepType.LAST, ts.reward, ONE, ts.observation)
        return ts

    def observation_spec(self):
        return specs.Array((self._obs_dim,), np.float32, name="observation")

    def action_spec(self):
        spec = self._env.action_spec()
        return specs.BoundedArray(spec.shape, np.float32, spec.minimum, spec.maximum, name="action")

    @property
    def step_limit(self) -> int | None:
        # dm_control keeps its own time limit private: only ours is known without stepping an episode.
        return self._max_steps or None


def make_dmc(task: str, seed: int, max_episode_steps: int) -> FlatDmcEnvironment:
    """The dm_control task ``domain:task`` seeded with ``seed``."""
    from dm_control import suite

    check_dmc_task(task)
    domain, name = task.split(":")
    return FlatDmcEnvironment(suite.load(domain, name, task_kwargs={"random": seed}), max_episode_steps)
