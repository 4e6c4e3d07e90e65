"""Load a Stable-Baselines3 ``model.zip`` without executing anything pickled in it.

SB3's own ``load`` unpickles (cloudpickle) several fields of the zip's ``data`` JSON: the policy class, the
spaces, schedules. A zip a user was handed can therefore run arbitrary code when loaded that way. Here only plain
JSON is read:

- weights: ``policy.pth`` with ``torch.load(weights_only=True)``;
- spaces: the readable attributes SB3 writes beside each pickled space (``dtype``, ``shape``/``_shape``,
  ``low``/``high`` as printed arrays, ``n``);
- architecture: the hidden sizes come from the weight shapes themselves; the activation from the readable
  ``policy_kwargs.activation_fn`` repr, else the zoo's ``config.yml``, else the algorithm's default;
- algorithm: the readable ``policy_class.__module__`` and the hyperparameter fields (or a caller's hint).

A fresh SB3 model of that algorithm and shape is then built and the weights are loaded into it strictly, so every
study (PTQ, weight plots, deployment) sees an ordinary ``BaseAlgorithm``. Supports A2C, PPO, DQN, QR-DQN (with
``sb3-contrib``), DDPG, TD3 and SAC with ``MlpPolicy`` on Box/Discrete spaces, and A2C, PPO and DQN with
``CnnPolicy`` (NatureCNN on image observations, e.g. Atari; ``normalize_images`` read as trained); anything else
is refused with the field that made it so.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from actorq.studies.sb3_zip_read import ZipLoadError, parse_space, plain_fields, read_zip

logger = logging.getLogger(__name__)

SUPPORTED_ALGOS = ("a2c", "ppo", "dqn", "qrdqn", "ddpg", "td3", "sac")
_SB3_CLASSES: dict[str, type[BaseAlgorithm]] = {
    "a2c": A2C, "ppo": PPO, "dqn": DQN, "ddpg": DDPG, "td3": TD3, "sac": SAC,
}  # fmt: skip
ACTIVATIONS: dict[str, type[nn.Module]] = {
    c.__name__: c
    for c in (
        nn.ReLU,
        nn.Tanh,
        nn.ELU,
        nn.LeakyReLU,
        nn.SiLU,
        nn.GELU,
        nn.Sigmoid,
        nn.Softplus,
        nn.SELU,
        nn.Mish,
    )
}
DEFAULT_ACTIVATION = {"a2c": "Tanh", "ppo": "Tanh"}  # every other algorithm's MlpPolicy defaults to ReLU
# Policy classes whose MlpPolicy is what this loader rebuilds (their ``__init__`` qualname in the data JSON).
MLP_POLICY_CLASSES = {"ActorCriticPolicy", "DQNPolicy", "QRDQNPolicy", "TD3Policy", "SACPolicy", "MlpPolicy"}
# Image policies (NatureCNN features, e.g. Atari) of A2C/PPO and DQN: rebuilt as ``CnnPolicy``.
CNN_POLICY_CLASSES = {"ActorCriticCnnPolicy", "CnnPolicy"}
# policy_kwargs that only shape training (optimizer, init): safe to drop for a policy that is only evaluated.
TRAINING_ONLY_KWARGS = {
    "optimizer_class",
    "optimizer_kwargs",
    "ortho_init",
    "log_std_init",
    "normalize_images",
}


@dataclass
class LoadedZip:
    """A model rebuilt from a zip, with what was read to rebuild it."""

    model: BaseAlgorithm
    algo: str
    data: dict[str, Any]
    sb3_version: str
    policy_kwargs: dict[str, Any]


def detect_algo(data: dict[str, Any], state: dict[str, torch.Tensor]) -> str:
    """Algorithm name from the readable ``policy_class.__module__`` and hyperparameter fields."""
    module = str(plain_fields(data.get("policy_class")).get("__module__", ""))
    if module.startswith("sb3_contrib.qrdqn") or any(k.startswith("quantile_net.") for k in state):
        return "qrdqn"
    if module.startswith("sb3_contrib"):
        raise ZipLoadError(f"policy_class is from {module}: only QR-DQN of sb3-contrib is supported")
    if module == "stable_baselines3.dqn.policies" or any(k.startswith("q_net.") for k in state):
        return "dqn"
    if module == "stable_baselines3.sac.policies" or "actor.latent_pi.0.weight" in state:
        return "sac"
    if module == "stable_baselines3.td3.policies" or any(k.startswith("actor.mu.") for k in state):
        # DDPG is TD3 with one critic update per actor update and no target smoothing noise clip.
        return "ddpg" if data.get("policy_delay") == 1 and data.get("target_noise_clip") == 0.0 else "td3"
    if any(k.startswith("mlp_extractor.") for k in state) or {"action_net.weight", "value_net.weight"} <= set(
        state
    ):
        return "ppo" if "clip_range" in data or "n_epochs" in data else "a2c"
    raise ZipLoadError(f"cannot tell the algorithm from policy_class {module or '(unreadable)'}; pass --algo")


def _check_policy_class(data: dict[str, Any]) -> str:
    """``"MlpPolicy"`` or ``"CnnPolicy"`` from the readable ``policy_class.__init__``; anything else is refused."""
    init = str(plain_fields(data.get("policy_class")).get("__init__", ""))
    m = re.search(r"<function (\w+)\.__init__", init)
    if m and m.group(1) in CNN_POLICY_CLASSES:
        return "CnnPolicy"
    if m and m.group(1) not in MLP_POLICY_CLASSES:
        raise ZipLoadError(
            f"policy_class is {m.group(1)}: only MlpPolicy and CnnPolicy models are supported "
            f"({sorted(MLP_POLICY_CLASSES | CNN_POLICY_CLASSES)})"
        )
    return "MlpPolicy"


def activation_from_text(text: str, field: str) -> type[nn.Module]:
    """``"<class 'torch.nn.modules.activation.ReLU'>"`` / ``"nn.ReLU"`` -> ``nn.ReLU`` (allow-listed names)."""
    m = re.fullmatch(
        r"(?:<class ')?(?:torch\.nn\.modules\.activation\.|(?:th\.|torch\.)?nn\.)(\w+)(?:'>)?", text
    )
    if not m or m.group(1) not in ACTIVATIONS:
        raise ZipLoadError(f"field {field} = {text!r} is not one of the activations {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[m.group(1)]


def _layer_sizes(state: dict[str, torch.Tensor], prefix: str) -> list[int]:
    """Output widths of the Linear layers ``prefix.<i>.weight``, in index order."""
    idx = sorted(
        int(m.group(1))
        for k in state
        if (m := re.fullmatch(re.escape(prefix) + r"\.(\d+)\.weight", k)) and state[k].ndim == 2
    )
    return [int(state[f"{prefix}.{i}.weight"].shape[0]) for i in idx]


def infer_architecture(algo: str, state: dict[str, torch.Tensor], n_actions: int | None) -> dict[str, Any]:
    """``net_arch`` (and ``n_critics`` / ``n_quantiles``) from the weight shapes of ``policy.pth``."""
    if algo in ("ppo", "a2c"):
        if _layer_sizes(state, "mlp_extractor.shared_net"):
            raise ZipLoadError(
                "policy_kwargs.net_arch has shared layers (SB3 < 1.8 net_arch=[n, dict(...)]), "
                "which this Stable-Baselines3 version cannot build"
            )
        return {
            "net_arch": dict(
                pi=_layer_sizes(state, "mlp_extractor.policy_net"),
                vf=_layer_sizes(state, "mlp_extractor.value_net"),
            )
        }
    prefix = {"td3": "actor.mu", "ddpg": "actor.mu", "sac": "actor.latent_pi", "dqn": "q_net.q_net"}.get(
        algo, "quantile_net.quantile_net"
    )
    if algo not in ("ppo", "a2c") and not _layer_sizes(state, prefix):
        raise ZipLoadError(f"policy.pth has no {prefix}.<i>.weight layers: not an {algo.upper()} MlpPolicy")
    critics = sorted({m.group(1) for k in state if (m := re.match(r"critic\.qf(\d+)\.", k))})
    if algo in ("td3", "ddpg"):
        return {
            "net_arch": dict(
                pi=_layer_sizes(state, "actor.mu")[:-1], qf=_layer_sizes(state, "critic.qf0")[:-1]
            ),
            "n_critics": len(critics),
        }
    if algo == "sac":
        return {
            "net_arch": dict(
                pi=_layer_sizes(state, "actor.latent_pi"), qf=_layer_sizes(state, "critic.qf0")[:-1]
            ),
            "n_critics": len(critics),
        }
    if algo == "dqn":
        return {"net_arch": _layer_sizes(state, "q_net.q_net")[:-1]}
    if algo == "qrdqn":
        sizes = _layer_sizes(state, "quantile_net.quantile_net")
        return {"net_arch": sizes[:-1], "n_quantiles": sizes[-1] // (n_actions or 1)}
    raise ZipLoadError(f"unknown algorithm {algo!r}; choose from {list(SUPPORTED_ALGOS)}")


def policy_kwargs_from(
    data: dict[str, Any], algo: str, config_kwargs: dict[str, Any] | None
) -> dict[str, Any]:
    """Constructor ``policy_kwargs`` from the zip's readable fields, the zoo config, then the defaults.

    Args:
        data: The zip's data JSON.
        algo: Algorithm name.
        config_kwargs: ``policy_kwargs`` parsed from the zoo's ``config.yml`` (or None).
    """
    raw = data.get("policy_kwargs") or {}
    fields = plain_fields(raw)
    pickled_only = isinstance(raw, dict) and ":serialized:" in raw and not fields
    if pickled_only and config_kwargs is None:
        raise ZipLoadError(
            "field policy_kwargs is only stored in pickled form and there is no config.yml to rebuild it from"
        )
    source = {**(config_kwargs or {}), **fields} if not pickled_only else dict(config_kwargs or {})
    out: dict[str, Any] = {}
    for key, val in source.items():
        if key in TRAINING_ONLY_KWARGS or key in ("net_arch", "n_critics", "n_quantiles"):
            continue  # training-only, or read from the weight shapes
        if key == "activation_fn":
            out[key] = (
                val if isinstance(val, type) else activation_from_text(str(val), f"policy_kwargs.{key}")
            )
        elif key == "features_extractor_class":
            if "FlattenExtractor" not in str(getattr(val, "__name__", val)):
                raise ZipLoadError(
                    f"policy_kwargs.{key} = {val!r}: only the default FlattenExtractor is supported"
                )
        elif isinstance(val, str) and val.startswith("<"):
            raise ZipLoadError(f"field policy_kwargs.{key} is only stored in pickled form ({val[:60]})")
        else:
            out[key] = val
    out.setdefault("activation_fn", ACTIVATIONS[DEFAULT_ACTIVATION.get(algo, "ReLU")])
    return out


def algo_class(algo: str) -> type[BaseAlgorithm]:
    """The SB3 (or sb3-contrib) class of ``algo``; QR-DQN needs the ``sb3-contrib`` package."""
    if algo == "qrdqn":
        try:
            from sb3_contrib import QRDQN
        except ImportError:
            raise ZipLoadError(
                "this is a QR-DQN model: loading it needs the 'sb3-contrib' package, which is not installed "
                "(pip install sb3-contrib matching stable-baselines3)"
            ) from None
        return QRDQN
    if algo not in _SB3_CLASSES:
        raise ZipLoadError(f"unknown algorithm {algo!r}; choose from {list(SUPPORTED_ALGOS)}")
    return _SB3_CLASSES[algo]


def build_model(
    algo: str,
    obs_space: spaces.Space,
    act_space: spaces.Space,
    policy_kwargs: dict[str, Any],
    state: dict[str, torch.Tensor],
    policy: str = "MlpPolicy",
) -> BaseAlgorithm:
    """A fresh CPU ``policy`` model of ``algo`` for these spaces with ``state`` loaded strictly (eval mode)."""
    cls = algo_class(algo)
    extra: dict[str, Any] = {}
    if algo in ("dqn", "qrdqn", "ddpg", "td3", "sac"):
        extra["buffer_size"] = 1  # only evaluated: no replay buffer of a million rows
    if algo == "sac":  # SAC's "auto" target entropy reads model.env, which a loaded model has not got
        extra["target_entropy"] = -float(np.prod(act_space.shape))
    model = cls(policy, env=None, device="cpu", policy_kwargs=policy_kwargs, _init_setup_model=False, **extra)
    model.observation_space, model.action_space, model.n_envs = obs_space, act_space, 1
    model._setup_model()
    result = model.policy.load_state_dict(state, strict=False)
    own = model.policy.state_dict()
    bad = [k for k in state if k in own and own[k].shape != state[k].shape]
    if result.missing_keys or result.unexpected_keys or bad:
        raise ZipLoadError(
            f"policy.pth does not fit an {algo.upper()} {policy} with {policy_kwargs}: missing "
            f"{result.missing_keys[:6]}, unexpected {result.unexpected_keys[:6]}, shape mismatch {bad[:6]}"
        )
    model.policy.set_training_mode(False)
    return model


def _cnn_kwargs(
    algo: str, data: dict[str, Any], state: dict[str, torch.Tensor], obs_space: spaces.Space
) -> dict[str, Any]:
    """NatureCNN settings of an image policy: features width from the weights, image scaling as trained."""
    if algo not in ("a2c", "ppo", "dqn"):
        raise ZipLoadError(f"CnnPolicy is supported for A2C, PPO and DQN, not {algo.upper()}")
    if not isinstance(obs_space, spaces.Box) or len(obs_space.shape) != 3:
        raise ZipLoadError(f"a CnnPolicy needs an image observation_space [C, H, W], the zip has {obs_space}")
    key = next((k for k in state if k.endswith("features_extractor.linear.0.weight")), None)
    if key is None or not any(k.endswith("features_extractor.cnn.0.weight") for k in state):
        raise ZipLoadError("policy.pth has no NatureCNN features_extractor.cnn/linear layers")
    # normalize_images changes what the network computes (pixels / 255): read it, default as SB3 does.
    normalize = plain_fields(data.get("policy_kwargs")).get("normalize_images", True)
    if not isinstance(normalize, bool):
        raise ZipLoadError(f"field policy_kwargs.normalize_images = {normalize!r} is not a boolean")
    return {
        "features_extractor_kwargs": {"features_dim": int(state[key].shape[0])},
        "normalize_images": normalize,
    }


def load_zip(
    path: str | Path, algo: str | None = None, config_kwargs: dict[str, Any] | None = None
) -> LoadedZip:
    """Rebuild the SB3 model stored in ``path`` without unpickling anything.

    Args:
        path: The ``.zip``.
        algo: Algorithm name (detected from the zip when None).
        config_kwargs: ``policy_kwargs`` from the zoo's ``config.yml`` for fields the zip only has pickled.

    Raises:
        ZipLoadError: naming the field or member that prevents a safe load.
    """
    path = Path(path)
    data, state, version = read_zip(path)
    policy = _check_policy_class(data)
    algo = (algo or detect_algo(data, state)).lower()
    algo_class(algo)  # an unknown algorithm or a missing sb3-contrib is reported before anything else
    obs_space = parse_space(data, "observation_space")
    act_space = parse_space(data, "action_space")
    n_actions = int(act_space.n) if isinstance(act_space, spaces.Discrete) else None
    pk = policy_kwargs_from(data, algo, config_kwargs)
    pk.update(infer_architecture(algo, state, n_actions))
    if policy == "CnnPolicy":
        pk.update(_cnn_kwargs(algo, data, state, obs_space))
    elif isinstance(obs_space, spaces.Box) and len(obs_space.shape) != 1:
        raise ZipLoadError(f"observation_space has shape {obs_space.shape}: MlpPolicy needs a flat vector")
    if algo in ("ddpg", "td3", "sac") and not isinstance(act_space, spaces.Box):
        raise ZipLoadError(f"{algo.upper()} needs a Box action_space, the zip has {act_space}")
    model = build_model(algo, obs_space, act_space, pk, state, policy)
    logger.info("loaded %s (SB3 %s) as %s %s without unpickling", path, version, algo, pk)
    return LoadedZip(model=model, algo=algo, data=data, sb3_version=version, policy_kwargs=pk)
