"""What a QAT study cell measures on a trained policy: greedy returns, PTQ at each width, and the outcomes of a QAT
model (fake-quant, then deployed as integers) and of the fine-tune control, with weight ranges and action stats."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from actorq.studies import envs, ptq, qat_deploy, zoo
from actorq.studies import torch_fake_quant as tq
from actorq.studies.policy_stats import action_stats, weight_ranges

CALIB_STEPS = 500
"""Observations recorded (greedy, on :data:`CHECK_OBS_SEED`) to calibrate activation ranges and check deployment."""
CHECK_OBS_SEED = 7
"""The environment seed of those observations."""
CONTROL_KIND = "fp32_finetune"
"""The control record's ``kind``, and the field holding its per-episode returns."""


def evaluate(model: BaseAlgorithm, env: str | envs.EnvSpec, episodes: int, replicate: int = 0) -> list[float]:
    """Greedy episode returns on evaluation seed ``replicate`` (a pair's cells all use replicate 0)."""
    return envs.evaluate(model, env, episodes, seed=envs.eval_seed(replicate)).round(4).tolist()


def ptq_widths(
    model: BaseAlgorithm,
    env: str | envs.EnvSpec,
    bits: list[int],
    episodes: int,
    calib: np.ndarray,
    replicate: int = 0,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, Any]]:
    """PTQ W and W+A of ``model`` at each width, evaluated, the model restored after each; returns
    ``({"ptq_w": {bits: returns}, "ptq_wa": {...}}, activation ranges of the first W+A)``.

    The one PTQ definition of the study: an fp32 cell, the completion of an older fp32 record and a zoo agent's
    fp32 replicate all come through here, with activation ranges calibrated on ``calib``.
    """  # fmt: skip
    state = copy.deepcopy(model.policy.state_dict())
    res: dict[str, dict[str, list[float]]] = {"ptq_w": {}, "ptq_wa": {}}
    act_ranges: dict[str, Any] = {}
    for b in bits:
        for key, act in (("ptq_w", None), ("ptq_wa", b)):
            rep = ptq.quantize_policy(model, tq.QuantScheme.parse(str(b)), act_bits=act, calib_obs=calib)
            res[key][str(b)] = evaluate(model, env, episodes, replicate)
            if act is not None and not act_ranges:
                act_ranges = rep["activation_ranges"]
            ptq.unquantize_policy(model, state)
    return res, act_ranges


def control_outcome(
    model: BaseAlgorithm, env: str | envs.EnvSpec, episodes: int, replicate: int = 0
) -> dict[str, Any]:
    """Evaluate a fine-tune control model (the :data:`CONTROL_KIND` returns, on the episodes a QAT cell of the
    same seed is evaluated on), with ``weight_ranges``, ``action_stats`` and its count of fake-quant layers
    (``fake_quant_layers``, 0: the evidence that nothing was quantized)."""
    obs = envs.record_observations(model, env, CALIB_STEPS, seed=CHECK_OBS_SEED)
    wrapped = sum(len(dict(tq.quant_layers(m))) for m in zoo.qat_modules(model).values())
    return {
        CONTROL_KIND: evaluate(model, env, episodes, replicate), "weight_ranges": weight_ranges(model),
        "action_stats": action_stats(model, obs), "fake_quant_layers": wrapped,
    }  # fmt: skip


def qat_outcome(
    model: BaseAlgorithm, env: str | envs.EnvSpec, episodes: int, replicate: int = 0
) -> dict[str, Any]:
    """Evaluate a trained QAT model as the fake-quant graph, check and deploy it as integers (in place),
    evaluate the deployed policy: the record fields ``qat_fake_quant``, ``qat_deployed``, ``deploy_check``,
    ``weight_ranges`` and ``action_stats``."""
    fake_quant = evaluate(model, env, episodes, replicate)
    obs = envs.record_observations(model, env, CALIB_STEPS, seed=CHECK_OBS_SEED)
    stats = action_stats(model, obs)
    ranges = weight_ranges(model)
    a_fq = qat_deploy.actions(model, obs)
    check = qat_deploy.check_equal(model, obs)
    deployed_layers = qat_deploy.deploy_integer(model)
    a_int = qat_deploy.actions(model, obs)
    if a_fq.dtype.kind in "iu":
        check["action_agreement"] = float(np.mean(a_fq == a_int))
    else:
        check["max_action_diff"] = float(np.max(np.abs(a_fq.astype(np.float64) - a_int)))
    check["deployed_layers"] = deployed_layers
    return {
        "qat_deployed": evaluate(model, env, episodes, replicate), "qat_fake_quant": fake_quant,
        "deploy_check": check, "weight_ranges": ranges, "action_stats": stats,
    }  # fmt: skip
