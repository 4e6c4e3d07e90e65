"""Environment construction for the study toolkit (stable-baselines3 VecEnvs) and deterministic evaluation.

Classic control and MuJoCo tasks come straight from gymnasium; Atari games come from ale-py (whose wheel
bundles the ROMs) with the standard DQN-paper preprocessing: ``NoFrameskip`` env, SB3's ``AtariWrapper``
(no-op reset, 4-frame max-and-skip, episodic life, fire reset, 84x84 grayscale, reward clipping for training)
and a 4-frame stack. Every env is wrapped in ``Monitor`` *before* the Atari wrappers, so reported episode
returns are real game scores over all lives, unclipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecFrameStack, VecNormalize

logger = logging.getLogger(__name__)

FRAME_STACK = 4
_ALE_REGISTERED = False


def register_ale() -> None:
    """Register the ALE environments with gymnasium (idempotent)."""
    global _ALE_REGISTERED
    if not _ALE_REGISTERED:
        import ale_py

        gym.register_envs(ale_py)
        _ALE_REGISTERED = True


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is an ALE game (``PongNoFrameskip-v4``, ``ALE/Pong-v5``, ...)."""
    if env_id.startswith("ALE/") or "NoFrameskip" in env_id:
        return True
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        register_ale()
        try:
            spec = gym.spec(env_id)
        except gym.error.Error:
            return False
    return "ale_py" in str(spec.entry_point)


def check_env_id(env_id: str) -> None:
    """Fail early, before any training, on an id gymnasium (with the ALE games registered) does not know.

    Raises:
        ValueError: ``env_id`` is not registered; the message names the id and gymnasium's reason.
    """
    try:
        gym.spec(env_id)
        return
    except gym.error.Error:
        register_ale()
    try:
        gym.spec(env_id)
    except gym.error.Error as exc:
        raise ValueError(
            f"unknown gymnasium environment {env_id!r} ({exc}); give a registered id, e.g. CartPole-v1, "
            "Hopper-v4, PongNoFrameskip-v4"
        ) from None


@dataclass(frozen=True, eq=False)
class EnvSpec:
    """A gymnasium env plus the observation pipeline a loaded (zoo) policy was trained with."""

    env_id: str
    """Gymnasium id that is built."""
    source_id: str | None = None
    """Id the policy was trained on when it differs (a gym v3 MuJoCo id run on v4), else None."""
    wrapper: Callable[[gym.Env], gym.Env] | None = None
    """Applied to every env copy after ``Monitor`` (e.g. sb3-contrib's TimeFeatureWrapper)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gym.make`` (the zoo's ``env_kwargs``)."""
    obs_norm: Any = None
    """Frozen VecNormalize statistics (``mean``, ``var``, ``clip_obs``, ``epsilon``) or None."""

    def __str__(self) -> str:
        return self.env_id


def env_label(env: str | EnvSpec) -> str:
    """The gymnasium id of a plain id or an :class:`EnvSpec`."""
    return env if isinstance(env, str) else env.env_id


def _make_spec_env(spec: EnvSpec, n_envs: int, seed: int, env_kwargs: dict[str, Any]) -> VecEnv:
    venv = make_vec_env(
        spec.env_id, n_envs=n_envs, seed=seed, env_kwargs={**spec.env_kwargs, **env_kwargs},
        vec_env_cls=DummyVecEnv, wrapper_class=spec.wrapper,
    )  # fmt: skip
    if spec.obs_norm is None:
        return venv
    n = spec.obs_norm
    if tuple(np.shape(n.mean)) != venv.observation_space.shape:
        venv.close()
        raise ValueError(
            f"vecnormalize statistics have shape {np.shape(n.mean)}, {spec.env_id} observations "
            f"{venv.observation_space.shape}"
        )
    # Evaluation mode: statistics frozen, rewards left as the env reports them.
    norm = VecNormalize(
        venv, training=False, norm_obs=True, norm_reward=False, clip_obs=n.clip_obs, epsilon=n.epsilon
    )
    norm.obs_rms.mean, norm.obs_rms.var = np.array(n.mean), np.array(n.var)
    return norm


def make_env(
    env_id: str | EnvSpec,
    n_envs: int = 1,
    seed: int = 0,
    max_episode_steps: int | None = None,
    training: bool = False,
) -> VecEnv:
    """Build a seeded ``DummyVecEnv`` (one process: the studies run on few cores).

    Args:
        env_id: Gymnasium id, or an :class:`EnvSpec` (wrappers and observation normalization of a zoo policy).
        n_envs: Parallel copies (env ``i`` is seeded with ``seed + i``).
        seed: Base seed.
        max_episode_steps: Optional time limit override (useful to bound Atari evaluation).
        training: For Atari, clip rewards only while training; evaluation reports raw game scores.

    Returns:
        The vectorized env (frame-stacked for Atari).
    """
    env_kwargs: dict[str, Any] = {}
    if max_episode_steps is not None:
        env_kwargs["max_episode_steps"] = max_episode_steps
    if isinstance(env_id, EnvSpec):
        return _make_spec_env(env_id, n_envs, seed, env_kwargs)
    if is_atari(env_id):
        register_ale()
        if env_id.startswith("ALE/"):
            # v5 games skip 4 frames themselves; AtariWrapper does the skipping, so turn it off here.
            env_kwargs["frameskip"] = 1
        venv = make_atari_env(
            env_id,
            n_envs=n_envs,
            seed=seed,
            env_kwargs=env_kwargs,
            wrapper_kwargs={"clip_reward": training, "terminal_on_life_loss": training},
            vec_env_cls=DummyVecEnv,
        )
        return VecFrameStack(venv, n_stack=FRAME_STACK)
    return make_vec_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs, vec_env_cls=DummyVecEnv)


def eval_seed(seed_index: int, base: int = 1000) -> int:
    """Environment seed of evaluation seed number ``seed_index`` (kept far from training seeds)."""
    return base * (seed_index + 1)


def evaluate(
    model: BaseAlgorithm,
    env_id: str | EnvSpec,
    episodes: int,
    seed: int,
    n_envs: int = 4,
    max_episode_steps: int | None = None,
) -> np.ndarray:
    """Episode returns of the deterministic policy (``predict(deterministic=True)``).

    The env copies are seeded once; their reset randomness does not depend on the actions taken, so a
    quantized policy and its fp32 original start from exactly the same initial states.

    Args:
        model: Trained SB3 model (possibly with quantized weights).
        env_id: Gymnasium id or :class:`EnvSpec`.
        episodes: Number of episodes in total.
        seed: Environment seed.
        n_envs: Env copies stepped in lockstep (batched inference).
        max_episode_steps: Optional time limit override.

    Returns:
        float64 array of ``episodes`` returns.
    """
    n_envs = max(1, min(n_envs, episodes))
    venv = make_env(env_id, n_envs=n_envs, seed=seed, max_episode_steps=max_episode_steps)
    try:
        rewards, _ = evaluate_policy(
            model, venv, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True, warn=False
        )
    finally:
        venv.close()
    return np.asarray(rewards, np.float64)


def record_observations(
    model: BaseAlgorithm,
    env_id: str | EnvSpec,
    steps: int,
    seed: int,
    max_episode_steps: int | None = None,
    deterministic: bool = True,
) -> np.ndarray:
    """Observations visited by the policy (deterministic, or sampling as in training), for range calibration.

    Returns:
        Array ``(steps, *obs_shape)`` in the env's (frame-stacked) layout.
    """
    venv = make_env(env_id, n_envs=1, seed=seed, max_episode_steps=max_episode_steps)
    obs = venv.reset()
    out = []
    try:
        for _ in range(steps):
            out.append(np.array(obs[0]))
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, _, _, _ = venv.step(action)
    finally:
        venv.close()
    return np.stack(out)
