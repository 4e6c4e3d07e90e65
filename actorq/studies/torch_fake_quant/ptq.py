"""Post-training quantization of every weight layer of a torch module, with a report per layer.

:func:`ptq_quantize_` rewrites the weights of **every** ``nn.Linear`` / ``nn.Conv{1,2,3}d`` of a module in place
(convolutions per output channel, linears per tensor or per output row) and returns one :class:`LayerReport` per
parameterised module, including the ones it could not quantize, so that no layer is ever skipped silently (the
original QuaRL code quantized nothing for DDPG and only the output layer of the Atari A2C/PPO policies).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from actorq.studies.torch_fake_quant.fake_quant import QuantLayer
from actorq.studies.torch_fake_quant.scheme import QUANT_LAYER_TYPES, QuantScheme, quantize_array, to_numpy

logger = logging.getLogger(__name__)


@dataclass
class LayerReport:
    """What PTQ did to one parameterised module (or a loose parameter)."""

    name: str
    kind: str
    shape: tuple[int, ...]
    n_params: int
    quantized: bool
    scheme: str
    weight_mse: float = 0.0
    changed_fraction: float = 0.0
    max_abs_change: float = 0.0
    bias: str = "none"
    note: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d


@torch.no_grad()
def ptq_quantize_(module: nn.Module, scheme: QuantScheme, prefix: str = "") -> list[LayerReport]:
    """Quantize the weights of every Linear/Conv layer of ``module`` in place.

    Biases stay fp32 for integer schemes (int8 kernels accumulate them in int32 at scale s_w * s_x, which
    fp32 represents faithfully); for fp16/bf16 the whole layer, bias included, is cast. Any other module that
    owns parameters (norm layers, ...) and any loose parameter (e.g. PPO's ``log_std``) is reported as not
    quantized with the reason, and logged as a warning.

    Args:
        module: Any torch module (an SB3 policy, a Q-network, an actor).
        scheme: The quantization scheme.
        prefix: Name prefix for the reports.

    Returns:
        One report per Linear/Conv layer, then one per other parameter owner.
    """
    reports: list[LayerReport] = []
    for name, sub in module.named_modules():
        full = f"{prefix}{name}" if name else prefix.rstrip(".") or type(module).__name__
        own = dict(sub.named_parameters(recurse=False))
        if isinstance(sub, QuantLayer):
            continue  # its inner layer is visited as ``<name>.layer``
        if isinstance(sub, QUANT_LAYER_TYPES):
            w = to_numpy(sub.weight)
            wq = quantize_array(w, scheme, scheme.axis_for(sub))
            diff = wq - w
            if sub.bias is not None:
                if scheme.precision in ("fp16", "bf16"):
                    b = quantize_array(to_numpy(sub.bias), scheme)
                    sub.bias.copy_(torch.from_numpy(b).to(sub.bias))
                    bias = scheme.precision
                else:
                    bias = "fp32 (kept)"
            else:
                bias = "none"
            sub.weight.copy_(torch.from_numpy(wq).to(sub.weight))
            reports.append(
                LayerReport(
                    name=full,
                    kind=type(sub).__name__,
                    shape=tuple(w.shape),
                    n_params=int(w.size),
                    quantized=scheme.precision != "fp32",
                    scheme=scheme.describe(sub),
                    weight_mse=float(np.mean(diff.astype(np.float64) ** 2)) if w.size else 0.0,
                    changed_fraction=float(np.mean(diff != 0)) if w.size else 0.0,
                    max_abs_change=float(np.max(np.abs(diff))) if w.size else 0.0,
                    bias=bias,
                )
            )
        elif own:
            for pname, p in own.items():
                msg = f"{type(sub).__name__} parameter is not a Linear/Conv weight; left in fp32"
                logger.warning("PTQ: %s.%s not quantized: %s", full, pname, msg)
                reports.append(
                    LayerReport(
                        name=f"{full}.{pname}" if full else pname,
                        kind=type(sub).__name__,
                        shape=tuple(p.shape),
                        n_params=int(p.numel()),
                        quantized=False,
                        scheme="fp32",
                        note=msg,
                    )
                )
    return reports
