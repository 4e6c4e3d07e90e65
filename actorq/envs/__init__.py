"""Environments as ``dm_env``: every dm_control suite task and every Gymnasium task (registered ids, plugins' ids, a
user's own environment class), their observations passed on as their spaces decide.

``make_environment(env_config, seed, evaluation)`` is the one constructor every role uses, so learner, actors and
evaluator see the same observations. ``environment_spec(env_config)`` gives what networks are built from.
``check_task(config)`` is the check a launching process makes before any role starts: it builds the task once,
reads its spaces and refuses one the config's algorithm does not take (:class:`UnsupportedSpaceError`, exit 2).

Observations (:mod:`actorq.envs.spaces`): ``uint8``/``bool`` Box observations (frames) keep their shape as
``uint8``; every other observation is a flat ``float32`` vector (Dict/Tuple flattened in Gymnasium's order);
dm_control's observation dict is concatenated in its key order. Tasks (:mod:`actorq.envs.gym_tasks`): any
registered Gymnasium id, ``module:Class`` for a user's environment, ALE games with the standard Atari preprocessing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass

import dm_env
import numpy as np
from dm_env import specs

from actorq import algorithms
from actorq.config import EnvConfig, ExperimentConfig
from actorq.envs.dmc import dmc_tasks, make_dmc
from actorq.envs.errors import UnknownTaskError, UnsupportedSpaceError
from actorq.envs.gym_tasks import gym_ids

log = logging.getLogger(__name__)

# Training never renders: without a display, tell dm_control not to probe GLFW (it warns on every import).
# A user who wants rendering sets MUJOCO_GL (egl/osmesa/glfw) and that wins.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "disable")

__all__ = [
    "EnvironmentSpec",
    "UnknownTaskError",
    "UnsupportedSpaceError",
    "algorithms_taking",
    "check_task",
    "dmc_tasks",
    "environment_spec",
    "gym_ids",
    "make_environment",
]


@dataclass(frozen=True)
class EnvironmentSpec:
    """What a network needs to know about a task."""

    obs_dim: int
    """Number of values in one observation (the product of ``obs_shape``; an MLP's input width)."""
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
    """The dm_env observation spec."""
    obs_shape: tuple[int, ...]
    """Shape of one observation as the environment passes it on: ``(obs_dim,)`` for vectors, the frame's own shape
    for ``uint8`` images (e.g. ``(4, 84, 84)`` for ALE games, ``(10, 10, 4)`` for MinAtar Breakout)."""
    obs_dtype: np.dtype
    """``float32`` (vectors) or ``uint8`` (frames: they stay uint8 through actors and replay; networks cast)."""
    action_space: str
    """The task's action space as its suite prints it (for messages)."""


def algorithms_taking(kind: str) -> list[str]:
    """The registered algorithms that learn ``kind`` (``discrete`` or ``continuous``) actions."""
    return [n for n in algorithms.names() if algorithms.get(n).discrete == (kind == "discrete")]


def make_environment(env: EnvConfig, seed: int = 0, evaluation: bool = False) -> dm_env.Environment:
    """Build the task as a ``dm_env``.

    ``evaluation``: the evaluator's environment: training-only processing left out (ALE reward clipping and life-loss
    discounts, training-only wrappers), so its returns are the task's own.

    Raises:
        UnknownTaskError: The task cannot be made (the message says why and what would work).
        UnsupportedSpaceError: A space no algorithm takes.
    """
    if env.suite == "dmc":
        if env.make_kwargs or env.wrappers:
            raise UnknownTaskError("env.make_kwargs and env.wrappers are Gymnasium's (env.suite: gym)")
        return make_dmc(env.task, seed, env.max_episode_steps)
    if env.suite != "gym":
        raise UnknownTaskError(f"unknown suite {env.suite!r}; choose dmc or gym")
    from actorq.envs.gym_env import GymnasiumEnvironment
    from actorq.envs.gym_tasks import make_gym, resolve
    from actorq.envs.spaces import action_kind, observation_layout

    task = resolve(env.task)
    gym_env = make_gym(task, env.make_kwargs, env.wrappers, env.max_episode_steps, evaluation)
    try:
        layout = observation_layout(gym_env.observation_space)
        kind = action_kind(gym_env.action_space, algorithms_taking)
    except UnsupportedSpaceError as exc:
        gym_env.close()
        raise UnsupportedSpaceError(f"env.task={env.task!r}: {exc}") from None
    return GymnasiumEnvironment(gym_env, seed, layout, kind == "discrete", task.ale and not evaluation)


_SPECS: dict[str, EnvironmentSpec] = {}
"""Specs already read in this process, by the env section's JSON (a task is built once per process for its spec)."""


def environment_spec(env: EnvConfig) -> EnvironmentSpec:
    """Sizes, dtype and bounds of the task's observation and action (builds and closes one instance per process)."""
    key = json.dumps(dataclasses.asdict(env), sort_keys=True, default=str)
    if key in _SPECS:
        return _SPECS[key]
    environment = make_environment(env, seed=0)
    try:
        obs_spec = environment.observation_spec()
        act_spec = environment.action_spec()
        space = str(environment.gym_env.action_space) if env.suite == "gym" else repr(act_spec)
    finally:
        environment.close()
    shape = tuple(int(d) for d in obs_spec.shape)
    common = dict(
        obs_dim=int(np.prod(shape)),
        action_spec=act_spec,
        observation_spec=obs_spec,
        obs_shape=shape,
        obs_dtype=np.dtype(obs_spec.dtype),
        action_space=space,
    )
    if isinstance(act_spec, specs.DiscreteArray):
        spec = EnvironmentSpec(
            discrete=True, num_actions=int(act_spec.num_values), action_low=None, action_high=None, **common
        )
    else:
        spec = EnvironmentSpec(
            discrete=False,
            num_actions=int(np.prod(act_spec.shape)),
            action_low=np.asarray(act_spec.minimum, np.float32).reshape(-1),
            action_high=np.asarray(act_spec.maximum, np.float32).reshape(-1),
            **common,
        )
    _SPECS[key] = spec
    return spec


def check_task(config: ExperimentConfig) -> EnvironmentSpec:
    """The launching process's check of a run's task, before any role starts: the task is made once (its module
    imported, its wrappers applied) and its spaces read, and the config's algorithm must take its actions.

    Raises:
        UnknownTaskError: The task cannot be made (a missing module named, an unknown id with the nearest ones, a
            constructor's own error).
        UnsupportedSpaceError: A space no algorithm takes, or the config's algorithm does not (naming the space and
            the algorithms that take it).
    """
    try:
        spec = environment_spec(config.env)
    except UnknownTaskError:
        raise
    except (
        Exception
    ) as exc:  # the task's own constructor failed: a user error, reported before any role starts
        raise UnknownTaskError(
            f"env.task={config.env.task!r}: making the environment failed: {type(exc).__name__}: {exc}"
        ) from None
    algorithm = algorithms.get(config.algorithm)
    if algorithm.discrete != spec.discrete:
        kind = "discrete" if spec.discrete else "continuous"
        noun = "Discrete" if spec.discrete else "Box"
        raise UnsupportedSpaceError(
            f"env.task={config.env.task!r} has action space {spec.action_space} and algorithm {config.algorithm} "
            f"learns {'discrete' if algorithm.discrete else 'continuous'} actions; the algorithms taking {noun} "
            f"actions ({kind}): {', '.join(algorithms_taking(kind)) or 'none registered'}"
        )
    return spec
