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
# A user who wants rendering sets MUJOCO_GL (egl/osmesa/glfw) and that wins; so does enable_rendering().
_RENDERING_DISABLED_HERE = not os.environ.get("DISPLAY") and not os.environ.get("MUJOCO_GL")
if _RENDERING_DISABLED_HERE:
    os.environ["MUJOCO_GL"] = "disable"

HEADLESS_GL = "egl"
"""The MuJoCo GL backend :func:`enable_rendering` picks without a display: EGL (Mesa's software EGL works on a
headless machine without a GPU; ``osmesa`` needs libosmesa)."""
FRAME_SIZE = (240, 320)
"""Height and width of a dm_control frame (camera 0); gymnasium tasks render at their own size."""


class RenderingError(UsageError):
    """This process cannot render the task's frames (no GL backend, or a library missing): exit 2."""


def enable_rendering(env: EnvConfig) -> str:
    """Choose a MuJoCo GL backend for rendering ``env``'s frames (``--video``) before dm_control loads; returns it.

    ``MUJOCO_GL`` set by the user wins; without a display, :data:`HEADLESS_GL`.

    Raises:
        RenderingError: A dm_control task, and dm_control was already loaded with rendering disabled here.
    """
    import sys

    if _RENDERING_DISABLED_HERE and os.environ.get("MUJOCO_GL") == "disable":
        if "dm_control._render" not in sys.modules:
            os.environ["MUJOCO_GL"] = HEADLESS_GL
        elif env.suite == "dmc":
            raise RenderingError(
                "dm_control was loaded with rendering disabled: set MUJOCO_GL=egl (or osmesa) to record video"
            )
        else:  # gymnasium's MuJoCo tasks read it when they make their renderer
            os.environ["MUJOCO_GL"] = HEADLESS_GL
    if not os.environ.get(
        "DISPLAY"
    ):  # pygame (gymnasium's classic-control renderer): no window, no sound card
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    return os.environ.get("MUJOCO_GL", "glfw")


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

    def render_frame(self) -> np.ndarray:
        """The current state as an ``[H, W, 3]`` uint8 RGB frame (the environment made with ``render=True``)."""
        raise NotImplementedError

    @property
    def frames_per_second(self) -> float:
        """Real-time frame rate of :meth:`render_frame`'s frames, one per step."""
        raise NotImplementedError


class FlatDmcEnvironment(_FlatFloat32Environment):
    """A dm_control task with its observation dict concatenated into one float32 vector (sorted key order)."""

    def __init__(self, env: dm_env.Environment, max_episode_steps: int = 0):
        self._env = env
        self._physics = getattr(env, "physics", None)
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

    def render_frame(self) -> np.ndarray:
        if self._physics is None:
            raise RenderingError("this dm_control environment has no physics to render")
        return np.asarray(self._physics.render(*FRAME_SIZE, camera_id=0), np.uint8)

    @property
    def frames_per_second(self) -> float:
        step = getattr(self._env, "control_timestep", None)
        return 1.0 / float(step()) if callable(step) else 30.0


class GymnasiumEnvironment(_FlatFloat32Environment):
    """A gymnasium environment behind the dm_env interface (terminated -> discount 0, truncated -> discount 1)."""

    def __init__(self, task: str, seed: int, max_episode_steps: int = 0, render: bool = False):
        import gymnasium

        kwargs: dict = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
        if render:
            kwargs["render_mode"] = "rgb_array"
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

    def render_frame(self) -> np.ndarray:
        try:
            frame = self._env.render()
        except Exception as exc:  # noqa: BLE001  (gymnasium raises DependencyNotInstalled and others)
            raise RenderingError(
                f"{self._env.spec.id if self._env.spec else 'the task'} cannot render: {exc}"
            ) from exc
        if frame is None:
            raise RenderingError("the environment was made without render=True")
        return np.asarray(frame, np.uint8)

    @property
    def frames_per_second(self) -> float:
        return float(self._env.metadata.get("render_fps") or 30)


def make_environment(env: EnvConfig, seed: int = 0, render: bool = False) -> dm_env.Environment:
    """Build the task as a dm_env with flat float32 observations (``render``: its ``render_frame()`` works; call
    :func:`enable_rendering` first).

    Raises:
        UnknownTaskError: the task is not in the suite (the message lists valid tasks).
    """
    validate_task(env)
    if env.suite == "gym":
        return GymnasiumEnvironment(env.task, seed, env.max_episode_steps, render=render)
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
    if isinstance(act_spec, specs.DiscreteArray):
        return EnvironmentSpec(
            int(obs_spec.shape[0]), True, int(act_spec.num_values), None, None, act_spec, obs_spec
        )
    return EnvironmentSpec(
        int(obs_spec.shape[0]),
        False,
        int(np.prod(act_spec.shape)),
        np.asarray(act_spec.minimum, np.float32).reshape(-1),
        np.asarray(act_spec.maximum, np.float32).reshape(-1),
        act_spec,
        obs_spec,
    )
