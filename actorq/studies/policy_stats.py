"""What a trained policy's weights and outputs look like: the record fields ``weight_ranges`` and
``action_stats`` of every ``qat-study`` cell (fp32, the fine-tune control, QAT)."""

from __future__ import annotations

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from actorq.studies import torch_fake_quant as tq
from actorq.studies import zoo


def weight_ranges(model: BaseAlgorithm) -> dict[str, list[float]]:
    """``[min, max, std]`` of every deployed Linear weight (wrapped or not)."""
    out = {}
    for mname, mod in zoo.deployed_modules(model).items():
        for lname, sub in mod.named_modules():
            if isinstance(sub, torch.nn.Linear):
                w = tq.to_numpy(sub.weight)
                out[f"{mname}.{lname}".replace(".layer", "")] = [
                    float(w.min()),
                    float(w.max()),
                    float(w.std()),
                ]
    return out


def action_stats(model: BaseAlgorithm, obs: np.ndarray) -> dict[str, float]:
    """How much room the policy's outputs leave for quantization noise.

    Discrete: median gap between the two largest action logits (DQN: Q-values) (a flip needs noise of that size).
    Continuous: fraction of action components within 1% of the bound (saturated tanh outputs are robust).
    """
    pol = model.policy
    pol.set_training_mode(False)
    x = pol.obs_to_tensor(obs)[0]
    with torch.no_grad():
        if hasattr(pol, "q_net") or hasattr(pol, "get_distribution"):
            logits = pol.q_net(x) if hasattr(pol, "q_net") else pol.get_distribution(x).distribution.logits
            top2 = torch.topk(logits, 2, dim=1).values
            return {"median_action_gap": float((top2[:, 0] - top2[:, 1]).median())}
        a = pol._predict(x, deterministic=True)  # SAC's actor(x) would sample
    return {"saturated_fraction": float((a.abs() >= 0.99).float().mean())}
