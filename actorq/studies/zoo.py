"""Train and load the stable-baselines3 policies the studies quantize.

Loading takes this toolkit's run directories, RL Baselines3 Zoo agent directories and bare SB3 zips, all read
without unpickling (:mod:`actorq.studies.sb3_zip`, :mod:`actorq.studies.zoo_env`); nothing is downloaded.

Hyperparameters follow rl-baselines3-zoo where it has a tuned set for the task family (CartPole, MuJoCo,
Atari), trimmed so that a CPU core trains a usable CartPole policy in seconds. A trained model is saved as
SB3's own ``model.zip`` plus ``meta.json`` (algorithm, env, seed, steps, timing) beside it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.utils import LinearSchedule
from torch import nn

from actorq.studies import envs, sb3_zip, zoo_env

logger = logging.getLogger(__name__)

ALGOS: dict[str, type[BaseAlgorithm]] = {
    "a2c": A2C,
    "dqn": DQN,
    "ppo": PPO,
    "ddpg": DDPG,
    "td3": TD3,
    "sac": SAC,
}
MUJOCO_PREFIXES = (
    "HalfCheetah",
    "Walker2d",
    "Hopper",
    "Ant",
    "Humanoid",
    "Swimmer",
    "Reacher",
    "InvertedPendulum",
)


def _family(env_id: str) -> str:
    if envs.is_atari(env_id):
        return "atari"
    if env_id.startswith(MUJOCO_PREFIXES):
        return "mujoco"
    return "classic"


def hyperparams(algo: str, env_id: str) -> tuple[dict[str, Any], int]:
    """SB3 constructor kwargs and number of training envs for ``algo`` on ``env_id``."""
    fam = _family(env_id)
    if algo == "ppo":
        if fam == "atari":
            return dict(
                n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4, clip_range=0.1,
                vf_coef=0.5, ent_coef=0.01,
            ), 8  # fmt: skip
        if fam == "mujoco":
            return dict(
                n_steps=512, batch_size=64, gae_lambda=0.95, gamma=0.99, n_epochs=10, learning_rate=3e-4
            ), 1
        return dict(
            n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
            learning_rate=LinearSchedule(1e-3, 0.0, 1.0), clip_range=LinearSchedule(0.2, 0.0, 1.0),
        ), 8  # fmt: skip
    if algo == "a2c":
        if fam == "atari":
            return dict(ent_coef=0.01, vf_coef=0.25), 16
        if fam == "mujoco":
            return dict(n_steps=8, learning_rate=7e-4, gae_lambda=0.9, use_rms_prop=True), 4
        # Larger rollouts and a little GAE make A2C on CartPole converge within 1e5 steps.
        return dict(n_steps=8, ent_coef=0.0, gae_lambda=0.9, learning_rate=1e-3), 8
    if algo == "dqn":
        if fam == "atari":
            return dict(
                buffer_size=10_000, learning_rate=1e-4, batch_size=32, learning_starts=10_000,
                target_update_interval=1000, train_freq=4, gradient_steps=1, exploration_fraction=0.1,
                exploration_final_eps=0.01, optimize_memory_usage=False,
            ), 1  # fmt: skip
        return dict(
            learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
            target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
            exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]),
        ), 1  # fmt: skip
    if algo in ("ddpg", "td3", "sac"):
        kw: dict[str, Any] = dict(learning_starts=10_000 if fam == "mujoco" else 1000, batch_size=256)
        if algo != "sac":
            kw["policy_kwargs"] = dict(net_arch=[400, 300])
        return kw, 1
    raise ValueError(f"unknown algorithm {algo!r}; choose from {sorted(ALGOS)}")


def make_model(algo: str, env_id: str | envs.EnvSpec, seed: int = 0, **overrides: Any) -> BaseAlgorithm:
    """A fresh, seeded SB3 model with the toolkit's hyperparameters (``overrides`` win).

    ``env_id`` may be the :class:`~actorq.studies.envs.EnvSpec` of a loaded zoo agent (its wrappers and
    observation normalization then apply to the training envs too: QAT fine-tuning of a pretrained agent).
    """
    algo = algo.lower()
    kwargs, n_envs = hyperparams(algo, str(env_id))
    kwargs.update(overrides)
    venv = envs.make_env(env_id, n_envs=n_envs, seed=seed, training=True)
    if algo in ("ddpg", "td3") and "action_noise" not in kwargs:
        n_act = venv.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n_act), 0.1 * np.ones(n_act))
    policy = "CnnPolicy" if envs.is_atari(str(env_id)) else "MlpPolicy"
    return ALGOS[algo](policy, venv, seed=seed, device="cpu", verbose=0, **kwargs)


def train(
    algo: str,
    env_id: str,
    steps: int,
    out: str | Path | None = None,
    seed: int = 0,
    eval_episodes: int = 10,
    **overrides: Any,
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """Train a policy, optionally save it to ``out/model.zip`` + ``out/meta.json``.

    Returns:
        The model and its metadata (including a quick deterministic evaluation).
    """
    model = make_model(algo, env_id, seed=seed, **overrides)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - t0
    meta: dict[str, Any] = {
        "algo": algo.lower(),
        "env_id": env_id,
        "seed": seed,
        "steps": steps,
        "train_seconds": round(train_s, 2),
        "policy_class": type(model.policy).__name__,
        "torch_version": torch.__version__,
    }
    if eval_episodes > 0:
        r = envs.evaluate(model, env_id, eval_episodes, seed=envs.eval_seed(0))
        meta.update(eval_mean=float(r.mean()), eval_std=float(r.std()), eval_episodes=eval_episodes)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save(out / "model.zip")
        (out / "meta.json").write_text(json.dumps(meta, indent=2))
        logger.info("saved %s %s policy to %s (%s)", algo, env_id, out, meta)
    return model, meta


def _guess_algo(zip_path: Path) -> str:
    """Algorithm of an SB3 zip without metadata (see :func:`actorq.studies.sb3_zip.detect_algo`)."""
    data, state, _ = sb3_zip.read_zip(Path(zip_path))
    return sb3_zip.detect_algo(data, state)


def resolve_policy(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """Zip path and toolkit metadata (``meta.json``, if any) for a run/zoo directory or a bare ``.zip``."""
    files = zoo_env.locate(path)
    meta_path = files.zip_path.parent / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return files.zip_path, meta


def load_policy(
    path: str | Path, algo: str | None = None, env_id: str | None = None
) -> tuple[BaseAlgorithm, dict]:
    """Load a toolkit run directory, a zoo agent directory or a bare SB3 ``.zip`` on CPU, unpickling nothing.

    Weights come from ``policy.pth`` (``torch.load(weights_only=True)``), spaces and architecture from the
    zip's readable JSON fields and weight shapes (:mod:`actorq.studies.sb3_zip`); a zoo directory's
    ``config.yml`` and ``vecnormalize.pkl`` are read safely (:mod:`actorq.studies.zoo_env`).

    Args:
        path: Run directory (``model.zip`` + ``meta.json``), zoo directory (one ``<env>.zip`` plus optional
            ``config.yml``/``vecnormalize.pkl``/``evaluations.npz``) or a ``.zip``.
        algo: Algorithm name (else ``meta.json``, the zoo's ``<algo>/<env>`` folder, or detected from the zip).
        env_id: Env id the policy was trained on (else ``meta.json`` or the zoo file name).

    Returns:
        The model and its metadata: ``algo``, ``env_id`` (as trained), ``env`` (the :class:`EnvSpec` to
        evaluate on: mapped id, wrapper, observation normalization), ``path``, ``evaluations``, ``sb3_version``.
    """
    files = zoo_env.locate(path)
    meta_path = files.zip_path.parent / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    cfg = zoo_env.read_config(files.config) if files.config else None
    if cfg is not None and cfg.get("policy", "MlpPolicy") != "MlpPolicy":
        raise sb3_zip.ZipLoadError(f"{files.config}: policy {cfg['policy']!r}; only MlpPolicy is supported")
    hint = algo or meta.get("algo") or files.algo_hint
    loaded = sb3_zip.load_zip(files.zip_path, hint, zoo_env.config_policy_kwargs(cfg) if cfg else None)
    requested = env_id or meta.get("env_id") or files.env_hint
    if not requested:
        raise ValueError(f"cannot tell which env {files.zip_path} was trained on: pass --env")
    model = loaded.model
    spec = zoo_env.env_spec(requested, files, cfg, model.observation_space, model.action_space)
    meta = {
        **meta,
        "algo": loaded.algo,
        "env_id": requested,
        "env": spec,
        "path": str(files.zip_path),
        "sb3_version": loaded.sb3_version,
        "num_timesteps": loaded.data.get("num_timesteps"),
        "evaluations": str(files.evaluations) if files.evaluations else None,
        "vecnormalize": str(files.vecnormalize) if files.vecnormalize else None,
    }
    return model, meta


def deployed_modules(model: BaseAlgorithm) -> dict[str, nn.Module]:
    """The networks that compute the deployed policy's actions: these are what gets quantized.

    DQN: the online Q-network. PPO/A2C: the whole actor-critic policy (shared features, both heads).
    DDPG/TD3/SAC: the actor.
    """
    pol = model.policy
    if isinstance(model, DQN):
        return {"q_net": pol.q_net}
    if hasattr(pol, "quantile_net"):  # sb3-contrib QR-DQN
        return {"quantile_net": pol.quantile_net}
    if isinstance(model, (TD3, SAC)):  # DDPG subclasses TD3
        return {"actor": pol.actor}
    return {"policy": pol}


def training_only_modules(model: BaseAlgorithm) -> dict[str, nn.Module]:
    """Networks used only while training (targets, critics): reported, not part of the deployed policy."""
    pol = model.policy
    if isinstance(model, DQN):
        return {"q_net_target": pol.q_net_target}
    if hasattr(pol, "quantile_net_target"):
        return {"quantile_net_target": pol.quantile_net_target}
    if isinstance(model, (TD3, SAC)):
        out = {"critic": pol.critic, "critic_target": pol.critic_target}
        if hasattr(pol, "actor_target"):
            out["actor_target"] = pol.actor_target
        return out
    return {}


def forward_modules(model: BaseAlgorithm, obs: np.ndarray, modules: dict[str, nn.Module]) -> None:
    """Run ``modules`` (e.g. :func:`deployed_modules` or :func:`qat_modules`) on a batch of observations, so every
    layer's activation observer sees data; the actor-critic policy runs whole (its forward computes both heads)."""
    pol = model.policy
    x = pol.obs_to_tensor(obs)[0]
    with torch.no_grad():
        for mod in modules.values():
            if mod is pol and hasattr(pol, "evaluate_actions"):
                pol(x)
            else:
                mod(x)


def qat_modules(model: BaseAlgorithm) -> dict[str, nn.Module]:
    """Networks that get fake-quant layers in QAT: the deployed ones and their target copies.

    Target copies are quantized too so that the bootstrapped targets come from the same quantized function
    the online network computes (as a whole-graph TF rewrite would have done).
    """
    mods = deployed_modules(model)
    pol = model.policy
    if isinstance(model, DQN):
        mods["q_net_target"] = pol.q_net_target
    elif hasattr(pol, "actor_target"):
        mods["actor_target"] = pol.actor_target
    return mods
