"""The QAT recipe that keeps fp32 reward: fake-quantized fine-tuning of a converged fp32 policy.

:func:`actorq.studies.qat.train_qat` (the schedule of ``reports/studies/qat_convergence``) switches fake
quantization on half-way through training from scratch, while PPO's learning rate and clip range decay linearly to
0 and the activation ranges follow an EMA that moves every minibatch (rollouts run with the frozen ranges of the last
update). Those policies collapsed after the switch, at 8 bits too. :func:`finetune_qat` is the recipe used instead,
the way QAT is used in practice:

1. Start from the converged fp32 policy (trained here with the same seed, or a pretrained zoo agent).
2. Wrap every Linear/Conv of the deployed networks (and their target copies) in a fake-quant layer, and calibrate
   the activation ranges by min/max over observations the fp32 policy visits (the PTQ W+A calibration).
3. Freeze the ranges (after an optional number of EMA steps), so rollouts and updates use one grid.
4. Fine-tune for a fixed number of steps at a constant small learning rate (and a constant PPO clip range).

Every choice is a field of :class:`QatRecipe`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import ConstantSchedule

from actorq.studies import envs, obs_layers, qat, zoo
from actorq.studies import torch_fake_quant as tq

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QatRecipe:
    """How a converged fp32 policy is fine-tuned with fake quantization (see the module docstring)."""

    finetune_steps: int = 10_000
    """Environment steps of fake-quantized fine-tuning after the fp32 policy converged (a fixed budget, not a
    fraction of a from-scratch run)."""
    learning_rate: float = 2e-5
    """Constant learning rate for the whole fine-tune (the fp32 schedule is replaced: a rate that decays to 0
    leaves the quantized phase no budget to adapt). Small: PPO CartPole seed 1 fine-tuned 10k steps at 1e-4 lost
    its greedy return even without quantization (16 bits: 462; 8 bits: 174), at 2e-5 it kept 500."""
    clip_range: float = 0.1
    """Constant PPO clip range during the fine-tune (ignored by other algorithms)."""
    exploration_eps: float | None = 0.04
    """DQN's constant epsilon during the fine-tune (its schedule would restart at 1.0 on a fresh model); None keeps
    the model's own schedule."""
    calib_steps: int = 500
    """Observations recorded with the fp32 policy whose min/max give the activation ranges at the switch."""
    calib_deterministic: bool = False
    """Record the calibration observations with the deterministic policy (True) or sampling actions as the
    training rollouts do (False): states a sampling policy visits reach further than a greedy CartPole policy's,
    and a range calibrated on the greedy states clips them (A2C CartPole at 8 bits: training episodes of ~35-60
    steps under ranges frozen from greedy states, while the greedy policy kept 500)."""
    calib_seed: int = 7
    """Environment seed of those calibration episodes (the study's PTQ calibration uses the same)."""
    range_freeze_steps: int = 0
    """Fine-tune steps during which the ranges still follow an EMA of the training batches before they freeze;
    0 freezes them at calibration, so every rollout and every update quantize activations on the same grid."""
    ema_decay: float = 0.99
    """EMA decay of the activation ranges while they are not frozen."""
    per_channel_linear: bool = False
    """One weight scale per output row of each Linear instead of one per tensor (for layers with outlier rows)."""
    obs_bits: int | None = None
    """Input bit width of the layers that read the observation (:mod:`actorq.studies.obs_layers`; the target
    copies' too) instead of the activation width, calibrated and frozen like the others; the integer deployment
    keeps it. None quantizes the observation like every other input: one per-tensor range over all components
    left MountainCarContinuous' velocity ~3 levels at 5 bits. Needs activation quantization."""

    def validate(self) -> None:
        """Raise ValueError naming the field when a value cannot work."""
        if self.finetune_steps <= 0:
            raise ValueError(f"finetune_steps must be > 0, got {self.finetune_steps}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 < self.clip_range <= 1:
            raise ValueError(f"clip_range must be in (0, 1], got {self.clip_range}")
        if self.exploration_eps is not None and not 0 <= self.exploration_eps <= 1:
            raise ValueError(f"exploration_eps must be in [0, 1] or None, got {self.exploration_eps}")
        if self.calib_steps <= 0:
            raise ValueError(f"calib_steps must be > 0, got {self.calib_steps}")
        if not 0 <= self.range_freeze_steps <= self.finetune_steps:
            raise ValueError(
                f"range_freeze_steps must be in [0, finetune_steps={self.finetune_steps}], "
                f"got {self.range_freeze_steps}"
            )
        if not 0 < self.ema_decay < 1:
            raise ValueError(f"ema_decay must be in (0, 1), got {self.ema_decay}")
        obs_layers.check_obs_bits(self.obs_bits)


class FinetuneCallback(BaseCallback):
    """Keeps the recipe's constants in force and freezes the ranges ``range_freeze_steps`` into the fine-tune.

    SB3 rewrites the optimizer's learning rate from ``lr_schedule`` before every update; the schedule is replaced
    by a constant, and this callback records the rates the optimizer really had (``lr_seen``) as evidence.
    """

    def __init__(self, modules: dict[str, Any], recipe: QatRecipe) -> None:
        super().__init__()
        self.modules = modules
        self.recipe = recipe
        self.start: int | None = None
        self.frozen_at: int | None = None
        self.lr_seen: set[float] = set()

    def _freeze(self) -> None:
        for m in self.modules.values():
            tq.set_ranges_frozen(m, True)
        self.frozen_at = int(self.num_timesteps)

    def _on_training_start(self) -> None:
        self.start = int(self.num_timesteps)
        if self.recipe.range_freeze_steps == 0:
            self._freeze()

    def _on_rollout_start(self) -> None:
        self.lr_seen.update(float(g["lr"]) for opt in optimizers(self.model) for g in opt.param_groups)

    def _on_step(self) -> bool:
        done = self.num_timesteps - (self.start or 0)
        if self.frozen_at is None and done >= self.recipe.range_freeze_steps:
            self._freeze()
            logger.info("QAT fine-tune: activation ranges frozen at step %d", self.num_timesteps)
        return True


def _calibration_forwards(model: BaseAlgorithm, obs: np.ndarray) -> None:
    """The forwards of :func:`calibrate` without fake-quant layers (the control runs them for the same RNG
    draws)."""
    model.policy.set_training_mode(False)
    for i in range(0, len(obs), 256):
        zoo.forward_modules(model, obs[i : i + 256], zoo.qat_modules(model))


def calibrate(model: BaseAlgorithm, obs: np.ndarray) -> dict[str, tuple[float, float]]:
    """Min/max activation ranges of every fake-quant layer over ``obs``; returns them.

    Raises:
        RuntimeError: If a layer saw no data (its range would stay infinite).
    """
    mods = zoo.qat_modules(model)
    for m in mods.values():
        tq.set_calibrating(m, True)
    model.policy.set_training_mode(False)
    try:
        for i in range(0, len(obs), 256):
            zoo.forward_modules(model, obs[i : i + 256], zoo.qat_modules(model))
    finally:
        for m in mods.values():
            tq.set_calibrating(m, False)
    ranges = {f"{n}.{k}": v for n, m in mods.items() for k, v in tq.activation_ranges(m).items()}
    missing = [k for k, (lo, hi) in ranges.items() if not np.isfinite([lo, hi]).all()]
    if missing:
        raise RuntimeError(f"calibration never reached layers {missing}")
    return ranges


def optimizers(model: BaseAlgorithm) -> list[torch.optim.Optimizer]:
    """The torch optimizers SB3 drives with ``lr_schedule`` (one per policy, or the actor's and the critic's, and
    SAC's entropy-coefficient optimizer)."""
    owners = [model.policy, getattr(model.policy, "actor", None), getattr(model.policy, "critic", None)]
    found = [o.optimizer for o in owners if isinstance(getattr(o, "optimizer", None), torch.optim.Optimizer)]
    ent = getattr(model, "ent_coef_optimizer", None)
    return found + ([ent] if isinstance(ent, torch.optim.Optimizer) else [])


def _constant_schedules(model: BaseAlgorithm, recipe: QatRecipe) -> None:
    model.learning_rate = recipe.learning_rate
    model.lr_schedule = ConstantSchedule(recipe.learning_rate)
    for opt in optimizers(model):  # from the first step on, not only from the first update
        for g in opt.param_groups:
            g["lr"] = recipe.learning_rate
    if isinstance(model, PPO):
        model.clip_range = ConstantSchedule(recipe.clip_range)
    if isinstance(model, DQN) and recipe.exploration_eps is not None:
        model.exploration_schedule = ConstantSchedule(recipe.exploration_eps)


def finetune_qat(
    model: BaseAlgorithm,
    env_id: str | envs.EnvSpec,
    bits: int,
    recipe: QatRecipe | None = None,
    act_bits: int | None = None,
    callbacks: list[BaseCallback] | None = None,
    quantize: bool = True,
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """Fine-tune the (converged, fp32) ``model`` with fake quantization, in place, following ``recipe``.

    ``quantize=False`` is the fine-tune control: the same recipe, calibration episodes, schedules, callbacks and
    steps, with no fake-quant layer at all, so QAT against it isolates the quantization from the extra training.

    Args:
        model: SB3 model holding the fp32 policy; its env is the training env the fine-tune continues on.
        env_id: Env of the calibration episodes (the model's task).
        bits: Weight bit width.
        recipe: The recipe (default :class:`QatRecipe`).
        act_bits: Activation bit width (default: ``bits``; 0 leaves activations in fp32); the observation
            layers' inputs use ``recipe.obs_bits`` when it is set (which then needs activations quantized).
        callbacks: Extra SB3 callbacks (e.g. a learning-curve recorder).
        quantize: False: the unquantized control (``bits`` and ``act_bits`` are ignored and recorded as None).

    Returns:
        The model with its fake-quant layers in place and on (none for the control), and run info (recipe,
        ranges, learning rates, ``obs_bits`` and the ``obs_layers`` it applied to: None and [] for the control).
    """
    recipe = recipe or QatRecipe()
    recipe.validate()
    act_bits = (bits if act_bits is None else (act_bits or None)) if quantize else None
    if quantize:
        obs_layers.check_obs_bits(recipe.obs_bits, act_bits is not None)
    obs_bits = recipe.obs_bits if quantize else None
    # The control records the calibration episodes and runs the calibration forwards too: both sample actions
    # from torch's global RNG, so its fine-tune starts from the RNG state QAT's starts from.
    calib_obs = envs.record_observations(
        model, env_id, recipe.calib_steps, seed=recipe.calib_seed, deterministic=recipe.calib_deterministic
    )
    mods = zoo.qat_modules(model) if quantize else {}
    wrapped: dict[str, list[str]] = {}
    # Found without drawing random numbers (the control does not look for them).
    obs_in = {} if obs_bits is None else obs_layers.observation_layers(model, calib_obs, mods)
    if quantize:
        scheme = tq.QuantScheme.parse(str(bits), per_channel_linear=recipe.per_channel_linear)
        wrapped = {
            n: tq.wrap_quant_layers(
                m, scheme, act_bits=act_bits, ema_decay=recipe.ema_decay,
                act_bits_for=dict.fromkeys(obs_in.get(n, []), obs_bits),
            )
            for n, m in mods.items()
        }  # fmt: skip
    calibrated = calibrate(model, calib_obs) if act_bits else {}
    if not quantize:
        _calibration_forwards(model, calib_obs)
    for m in mods.values():
        tq.set_quant_enabled(m, True)
    _constant_schedules(model, recipe)
    cb = FinetuneCallback(mods, recipe)
    start = int(model.num_timesteps)
    t0 = time.perf_counter()
    # reset_num_timesteps=False: the env, episode buffer and (off-policy) replay buffer carry on from fp32 training.
    model.learn(
        total_timesteps=recipe.finetune_steps, callback=[cb, *(callbacks or [])], reset_num_timesteps=False
    )
    train_s = time.perf_counter() - t0
    info = {
        "schedule": "finetune",
        "recipe": asdict(recipe),
        "bits": bits if quantize else None,
        "act_bits": act_bits,
        "obs_bits": obs_bits,
        "obs_layers": [f"{n}.{layer}" for n, names in obs_in.items() for layer in names],
        "finetune_start": start,
        "finetune_end": int(model.num_timesteps),
        "ranges_frozen_at": cb.frozen_at if quantize else None,
        "lr_seen": sorted(cb.lr_seen),
        "train_seconds": round(train_s, 2),
        "wrapped_layers": wrapped,
        "quantized_forwards": qat.verify_qat(model) if quantize else {},
        "calibrated_ranges": calibrated,
        "activation_ranges": {n: tq.activation_ranges(m) for n, m in mods.items()},
    }
    return model, info


def continue_from(
    state: dict[str, torch.Tensor], algo: str, env_id: str, seed: int, steps: int, **overrides: Any
) -> BaseAlgorithm:
    """A fresh seeded model holding the fp32 policy ``state``, its step counter at the fp32 run's ``steps``, so
    a fine-tune continues that run (no off-policy random warm-up, DQN's epsilon past its decay)."""
    model = zoo.make_model(algo, env_id, seed=seed, **overrides)
    model.policy.load_state_dict(state)
    model.num_timesteps = steps
    return model


def finetune_from(
    base: BaseAlgorithm,
    algo: str,
    env_id: str,
    bits: int,
    seed: int,
    steps: int,
    recipe: QatRecipe | None = None,
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """:func:`finetune_qat` of a copy of the fp32 model ``base`` (trained ``steps`` steps by
    :func:`actorq.studies.zoo.train` with ``seed``); ``base`` itself is left as it is."""
    model = continue_from(base.policy.state_dict(), algo, env_id, seed, steps)
    return finetune_qat(model, env_id, bits, recipe)
