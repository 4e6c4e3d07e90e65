"""The deployed form of a QAT policy: integer weight codes, integer activation codes, integer accumulation.

QAT trains through a fake-quant graph (:class:`~actorq.studies.torch_fake_quant.QuantLayer`): float weights
rounded to the grid on every forward. What a deployment runs instead is :class:`IntegerLinear`: the weight
stored once as signed integer codes (``int8`` storage for <= 8 bits), the input activation rounded to unsigned
codes with the range QAT learned, the dot product accumulated exactly in integers, and one rescale by
``s_x * s_w`` plus the fp32 bias at the end. :func:`deploy_integer` swaps every QuantLayer of the deployed
networks for its integer twin, so ``model.predict`` then runs the integer policy; :func:`check_equal` measures
how far the two are apart layer by layer against the float32 dot-product rounding bound
(:func:`fp32_dot_bound`), since the integer path is the exact value the fake-quant graph approximates.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from actorq.quantize import affine
from actorq.studies import torch_fake_quant as tq
from actorq.studies import zoo

logger = logging.getLogger(__name__)

FP32_EPS = float(np.finfo(np.float32).eps)


class IntegerLinear(nn.Module):
    """Integer-arithmetic Linear built from a trained, enabled :class:`QuantLayer`.

    ``y = s_x * s_w * sum_j (q_x[j] - z_x) * q_w[i, j] + b[i]``, with the sum taken in int64 (exact), then one
    float64 rescale. Without activation quantization the input stays float and only the weight is integer.

    Raises:
        ValueError: If the layer is not a Linear, its weight scheme is not an integer one, or its activation
            range was never observed.
    """

    def __init__(self, q: tq.QuantLayer) -> None:
        super().__init__()
        if not isinstance(q.layer, nn.Linear):
            raise ValueError(f"integer deployment supports Linear layers only, got {type(q.layer).__name__}")
        scheme = q.weight_scheme
        if scheme is None or scheme.precision != "int" or not scheme.symmetric:
            raise ValueError(f"integer deployment needs a symmetric integer weight scheme, got {scheme}")
        w = tq.to_numpy(q.layer.weight)
        qp = tq.weight_qparams(w, scheme, scheme.axis_for(q.layer))
        codes = affine.quantize(w, qp)
        self.bits = scheme.bits
        self.storage_dtype = str(codes.dtype)  # what a deployment stores: int8 for <= 8 bits
        self.register_buffer("w_codes", torch.from_numpy(codes.astype(np.int64)))
        w_scale = np.asarray(qp.scale, np.float64).reshape(-1)  # one per tensor or one per output row
        self.register_buffer("w_scale", torch.from_numpy(w_scale))
        bias = q.layer.bias
        self.register_buffer("bias", None if bias is None else bias.detach().to(torch.float64).clone())
        self.act_bits = q.act_bits
        if q.act_bits is not None:
            if not q.has_range:
                raise ValueError("the layer's activation range was never observed; train or calibrate first")
            aqp = affine.compute_qparams(np.array([q._lo, q._hi], np.float32), q.act_bits, symmetric=False)
            self.x_scale = float(aqp.scale)
            self.x_zero = int(aqp.zero_point)
            self.x_qmin, self.x_qmax = aqp.qmin, aqp.qmax

    def quantize_input(self, x: torch.Tensor) -> torch.Tensor:
        """Unsigned activation codes (int64), rounded exactly as the fake-quant forward rounds."""
        # The very expression of the fake-quant forward (float32 tensor / Python float), so the codes agree.
        q = torch.round(x.to(torch.float32) / self.x_scale) + self.x_zero
        return torch.clamp(q, self.x_qmin, self.x_qmax).to(torch.int64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act_bits is not None:
            acc = (self.quantize_input(x) - self.x_zero) @ self.w_codes.T  # exact integer accumulation
            y = acc.to(torch.float64) * (self.x_scale * self.w_scale)
        else:
            y = (x.to(torch.float64) @ self.w_codes.T.to(torch.float64)) * self.w_scale
        if self.bias is not None:
            y = y + self.bias
        return y.to(torch.float32)


def fp32_dot_bound(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Worst-case float32 rounding error of ``x @ w.T + b`` (``gamma_{n+1} * (|x| @ |w|.T + |b|)``).

    The classical bound for a length-``n`` dot product summed in any order plus one bias add; the fake-quant
    forward computes exactly this on exactly representable grid values, so it may differ from the exact
    integer result by at most this much.
    """
    n = w.shape[1] + 1
    gamma = n * FP32_EPS / (1 - n * FP32_EPS)
    mag = x.abs().to(torch.float64) @ w.abs().T.to(torch.float64)
    if bias is not None:
        mag = mag + bias.abs().to(torch.float64)
    return gamma * mag


def _capture(model: BaseAlgorithm, obs: np.ndarray) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Input and fake-quant output of every deployed QuantLayer on ``obs``."""
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = []
    for mname, mod in zoo.deployed_modules(model).items():
        for lname, q in tq.quant_layers(mod):

            def hook(_m: nn.Module, inp: tuple, out: torch.Tensor, key: str = f"{mname}.{lname}") -> None:
                seen[key] = (inp[0].detach().clone(), out.detach().clone())

            hooks.append(q.register_forward_hook(hook))
    model.policy.set_training_mode(False)
    try:
        zoo.forward_modules(model, obs, zoo.deployed_modules(model))
    finally:
        for h in hooks:
            h.remove()
    return seen


def check_equal(model: BaseAlgorithm, obs: np.ndarray) -> dict[str, Any]:
    """Compare every deployed QuantLayer with its :class:`IntegerLinear` twin on the same inputs.

    Returns:
        Per layer: the largest absolute difference, the largest ratio of difference to the fp32 rounding bound
        (<= 1 means within the bound), and the weight/activation code ranges. ``within_bound`` is the AND.
    """
    seen = _capture(model, obs)
    layers = {}
    for mname, mod in zoo.deployed_modules(model).items():
        for lname, q in tq.quant_layers(mod):
            x, y_fq = seen[f"{mname}.{lname}"]
            integer = IntegerLinear(q)
            with torch.no_grad():
                y_int = integer(x)
                x_fq = (
                    x
                    if q.act_bits is None
                    else (integer.quantize_input(x) - integer.x_zero) * integer.x_scale
                )
                w_fq = integer.w_codes.to(torch.float64) * integer.w_scale.reshape(-1, 1)
                bound = fp32_dot_bound(x_fq, w_fq, integer.bias) + FP32_EPS * y_fq.abs().to(torch.float64)
            diff = (y_int.to(torch.float64) - y_fq.to(torch.float64)).abs()
            layers[f"{mname}.{lname}"] = {
                "max_abs_diff": float(diff.max()),
                "max_diff_over_bound": float((diff / bound.clamp_min(1e-30)).max()),
                "storage": integer.storage_dtype,
                "weight_codes": [int(integer.w_codes.min()), int(integer.w_codes.max())],
            }
    ok = all(v["max_diff_over_bound"] <= 1.0 for v in layers.values())
    return {"layers": layers, "within_bound": ok, "observations": int(len(obs))}


def deploy_integer(model: BaseAlgorithm) -> list[str]:
    """Replace every QuantLayer of the deployed networks by its :class:`IntegerLinear` (in place).

    Target networks (training only) keep their wrappers. Returns the names of the replaced layers.

    Raises:
        ValueError: If a deployed network has no QuantLayer (the model was not trained with QAT).
    """
    done = []
    for mname, mod in zoo.deployed_modules(model).items():
        found = list(tq.quant_layers(mod))
        if not found:
            raise ValueError(f"{mname} has no fake-quant layers: deploy_integer needs a QAT model")
        for lname, q in found:
            parent_name, _, child = lname.rpartition(".")
            parent = mod.get_submodule(parent_name) if parent_name else mod
            setattr(parent, child, IntegerLinear(q))
            done.append(f"{mname}.{lname}")
    return done


def actions(model: BaseAlgorithm, obs: np.ndarray) -> np.ndarray:
    """Deterministic actions of ``model`` on a batch of observations."""
    a, _ = model.predict(obs, deterministic=True)
    return np.asarray(a)
