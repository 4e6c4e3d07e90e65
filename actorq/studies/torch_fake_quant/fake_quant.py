"""Fake quantization with a straight-through estimator, for QAT and activation PTQ.

:class:`QuantLayer` wraps a Linear/Conv and fake-quantizes its weight (per forward, straight-through estimator)
and its input activation (asymmetric, with an EMA or min/max observed range). It keeps the very same
``nn.Parameter`` objects, so an optimizer built before wrapping keeps training them: the QAT hooks can't get lost
the way they did in the original code.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actorq.quantize import affine
from actorq.studies.torch_fake_quant.scheme import QUANT_LAYER_TYPES, QuantScheme, quantize_array, to_numpy

logger = logging.getLogger(__name__)


def _affine_fq_torch(x: torch.Tensor, qp: affine.QParams) -> torch.Tensor:
    """Torch version of ``affine.dequantize(affine.quantize(x, qp))`` for per-tensor parameters."""
    scale = float(qp.scale)
    zero = float(qp.zero_point)
    y = torch.round(x / scale) + zero  # torch.round is round-half-to-even, like np.rint
    y = torch.clamp(y, qp.qmin, qp.qmax)
    return (y - zero) * scale


def fake_quant_activation(
    x: torch.Tensor, lo: float, hi: float, bits: int, qp: affine.QParams | None = None
) -> torch.Tensor:
    """Fake-quantize an activation to the asymmetric grid covering ``[lo, hi]`` (and 0).

    Gradient: straight through inside the clipping range, zero outside (as TF's FakeQuantWithMinMaxVars).
    ``qp`` may pass precomputed parameters for that range.
    """
    if qp is None:
        qp = affine.compute_qparams(np.array([lo, hi], np.float32), bits, symmetric=False)
    with torch.no_grad():
        xq = _affine_fq_torch(x, qp)
        clip_lo = float(qp.scale) * (qp.qmin - float(qp.zero_point))
        clip_hi = float(qp.scale) * (qp.qmax - float(qp.zero_point))
        inside = (x >= clip_lo) & (x <= clip_hi)
    if not x.requires_grad:
        return xq
    return torch.where(inside, x + (xq - x).detach(), xq)


@torch.no_grad()
def fake_quant_weight_torch(w: torch.Tensor, scheme: QuantScheme, axis: int | None) -> torch.Tensor:
    """Torch twin of :func:`quantize_array`, bit-identical to it (tested), for use inside training loops.

    The affine parameters still come from :func:`actorq.quantize.affine.compute_qparams`: they depend only on
    the per-channel min and max, which torch reduces on the tensor's own device.
    """
    if scheme.precision == "fp32":
        return w.clone()
    if scheme.precision in ("fp16", "bf16"):
        return torch.from_numpy(quantize_array(to_numpy(w), scheme)).to(w.device, w.dtype)
    if axis is None:
        mm = torch.stack([w.min(), w.max()]).float().cpu().numpy()
        qp = affine.compute_qparams(mm, scheme.bits, symmetric=scheme.symmetric)
        scale = torch.tensor(float(qp.scale), device=w.device)
        zero = torch.tensor(float(qp.zero_point), device=w.device)
    else:
        flat = w.movedim(axis, 0).reshape(w.shape[axis], -1)
        mm = torch.stack([flat.min(1).values, flat.max(1).values], 1).float().cpu().numpy()
        qp = affine.compute_qparams(mm, scheme.bits, symmetric=scheme.symmetric, axis=0)
        shape = [1] * w.dim()
        shape[axis] = -1
        scale = torch.from_numpy(qp.scale).to(w.device).reshape(shape)
        zero = torch.from_numpy(qp.zero_point.astype(np.float32)).to(w.device).reshape(shape)
    # Same arithmetic as affine.quantize: float32 division up to 8 bits, float64 above.
    work = torch.float32 if scheme.bits <= 8 else torch.float64
    y = torch.clamp(torch.round(w.to(work) / scale.to(work)) + zero.to(work), qp.qmin, qp.qmax)
    return ((y.float() - zero) * scale).to(w.dtype)


class QuantLayer(nn.Module):
    """A Linear/Conv whose weight and input activation are fake-quantized in ``forward``.

    The wrapped layer's parameters are used as they are (no copies), so optimizers, SB3 target-network
    updates and ``state_dict`` loading of the original layer keep working through ``self.layer``.

    Args:
        layer: The Linear or Conv module to wrap.
        weight_scheme: Scheme for the weight, or None to leave weights alone (activation-only PTQ).
        act_bits: Bit width for the input activation, or None to leave activations in fp32.
        ema_decay: Decay of the exponential moving average of the activation min/max in training mode.
    """

    def __init__(
        self,
        layer: nn.Module,
        weight_scheme: QuantScheme | None = None,
        act_bits: int | None = None,
        ema_decay: float = 0.99,
    ) -> None:
        super().__init__()
        if not isinstance(layer, QUANT_LAYER_TYPES):
            raise TypeError(f"QuantLayer wraps Linear/Conv layers, got {type(layer).__name__}")
        self.layer = layer
        self.weight_scheme = weight_scheme
        self.act_bits = act_bits
        self.ema_decay = ema_decay
        self.quant_enabled = True  # False before the QAT quant delay: observe only
        self.calibrating = False  # True: track the plain min/max of every batch (PTQ calibration)
        # True: training-mode forwards stop moving the range, so the update sees the grid the rollout used.
        self.ranges_frozen = False
        self.register_buffer("act_min", torch.tensor(math.inf))
        self.register_buffer("act_max", torch.tensor(-math.inf))
        self._lo, self._hi = math.inf, -math.inf  # mirror of act_min/act_max as Python floats
        self._act_qp: tuple[tuple[float, float], affine.QParams] | None = None
        self.quantized_forwards = 0  # evidence that the fake-quant path really ran
        self._wcache: tuple[int, int, torch.Tensor] | None = None

    def extra_repr(self) -> str:
        w = self.weight_scheme.label if self.weight_scheme else "fp32"
        a = f"uint{self.act_bits}" if self.act_bits else "fp32"
        return f"weight={w}, act={a}, enabled={self.quant_enabled}"

    @property
    def has_range(self) -> bool:
        return math.isfinite(self._lo) and math.isfinite(self._hi)

    def _load_from_state_dict(self, *args: object, **kwargs: object) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self._lo, self._hi = float(self.act_min), float(self.act_max)

    @torch.no_grad()
    def _observe(self, x: torch.Tensor) -> None:
        lo, hi = float(x.min()), float(x.max())
        if self.calibrating or not self.has_range:
            lo, hi = min(self._lo, lo), max(self._hi, hi)
        else:
            d = self.ema_decay
            lo, hi = d * self._lo + (1 - d) * lo, d * self._hi + (1 - d) * hi
        # Python floats drive the forward pass (no tensor syncs); the buffers carry them in state_dict.
        self._lo, self._hi = lo, hi
        self.act_min.fill_(lo)
        self.act_max.fill_(hi)

    def _act_qparams(self) -> affine.QParams:
        key = (self._lo, self._hi)
        if self._act_qp is None or self._act_qp[0] != key:
            qp = affine.compute_qparams(np.array(key, np.float32), self.act_bits, symmetric=False)
            self._act_qp = (key, qp)
        return self._act_qp[1]

    def _quantized_weight(self) -> torch.Tensor:
        w = self.layer.weight
        if self.training:
            # Weights change every update, and SB3 target updates write through ``.data`` (invisible to
            # ``_version``): never cache while training.
            self._wcache = None
            wq = fake_quant_weight_torch(
                w.detach(), self.weight_scheme, self.weight_scheme.axis_for(self.layer)
            )
        else:
            key = (w.data_ptr(), w._version)
            if self._wcache is None or self._wcache[:2] != key:
                wq = fake_quant_weight_torch(
                    w.detach(), self.weight_scheme, self.weight_scheme.axis_for(self.layer)
                )
                self._wcache = (key[0], key[1], wq)
            wq = self._wcache[2]
        # Straight-through estimator: forward uses wq, backward passes the gradient to w unchanged.
        return w + (wq - w).detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act_bits is not None:
            if self.calibrating or (self.training and not self.ranges_frozen):
                self._observe(x)
            if self.quant_enabled and self.has_range:
                x = fake_quant_activation(x, self._lo, self._hi, self.act_bits, self._act_qparams())
        w = self.layer.weight
        if self.quant_enabled and self.weight_scheme is not None and self.weight_scheme.precision != "fp32":
            w = self._quantized_weight()
        if self.quant_enabled and (self.weight_scheme is not None or self.act_bits is not None):
            self.quantized_forwards += 1
        if isinstance(self.layer, nn.Linear):
            return F.linear(x, w, self.layer.bias)
        return self.layer._conv_forward(x, w, self.layer.bias)


def wrap_quant_layers(
    module: nn.Module,
    weight_scheme: QuantScheme | None,
    act_bits: int | None = None,
    ema_decay: float = 0.99,
    act_bits_for: Mapping[str, int] | None = None,
) -> list[str]:
    """Replace every Linear/Conv inside ``module`` by a :class:`QuantLayer` (in place).

    Args:
        module: The network whose layers get wrapped.
        weight_scheme: Weight scheme of every wrapped layer (None: weights stay as they are).
        act_bits: Input activation bit width of every wrapped layer (None: fp32 inputs).
        ema_decay: EMA decay of the activation ranges in training mode.
        act_bits_for: Input activation bit widths of named layers (names relative to ``module``, as returned),
            overriding ``act_bits`` for them: the observation-reading layers under ``obs_bits``.

    Returns:
        Names of the wrapped layers (relative to ``module``).

    Raises:
        ValueError: If ``module`` contains no Linear/Conv layer at all (nothing would be quantized), or
            ``act_bits_for`` names a layer that is not among those wrapped.
    """
    targets = [
        (name, sub) for name, sub in module.named_modules() if isinstance(sub, QUANT_LAYER_TYPES) and name
    ]
    if isinstance(module, QUANT_LAYER_TYPES):
        raise ValueError("wrap the parent of a bare layer, not the layer itself")
    act_bits_for = dict(act_bits_for or {})
    unknown = sorted(set(act_bits_for) - {name for name, _ in targets})
    if unknown:
        raise ValueError(
            f"act_bits_for names {unknown}, which are no Linear/Conv layers of {type(module).__name__}; "
            f"give names relative to the module, e.g. {[n for n, _ in targets][:3]}"
        )
    wrapped = []
    for name, sub in targets:
        parent_name, _, child = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        if isinstance(parent, QuantLayer):
            continue
        setattr(parent, child, QuantLayer(sub, weight_scheme, act_bits_for.get(name, act_bits), ema_decay))
        wrapped.append(name)
    if not wrapped and not any(isinstance(m, QuantLayer) for m in module.modules()):
        raise ValueError(f"{type(module).__name__} has no Linear/Conv layer to quantize")
    logger.debug("wrapped %d layers for fake quantization: %s", len(wrapped), wrapped)
    return wrapped


def unwrap_quant_layers(module: nn.Module) -> int:
    """Put the original layers back in place of every :class:`QuantLayer`; returns how many."""
    found = [(n, m) for n, m in module.named_modules() if isinstance(m, QuantLayer)]
    for name, wrapper in found:
        parent_name, _, child = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        setattr(parent, child, wrapper.layer)
    return len(found)


def quant_layers(module: nn.Module) -> Iterator[tuple[str, QuantLayer]]:
    """Every :class:`QuantLayer` in ``module`` with its name."""
    for name, sub in module.named_modules():
        if isinstance(sub, QuantLayer):
            yield name, sub


def set_quant_enabled(module: nn.Module, enabled: bool) -> None:
    """Switch fake quantization on or off in every wrapped layer (observers keep running)."""
    for _, q in quant_layers(module):
        q.quant_enabled = enabled


def set_calibrating(module: nn.Module, calibrating: bool) -> None:
    """Enter/leave min/max calibration of the activation ranges in every wrapped layer."""
    for _, q in quant_layers(module):
        q.calibrating = calibrating


def set_ranges_frozen(module: nn.Module, frozen: bool) -> None:
    """Freeze (or unfreeze) the activation ranges of every wrapped layer: training forwards stop observing.

    Calibration (:func:`set_calibrating`) still sets the ranges of a frozen layer: freezing only stops the EMA.
    """
    for _, q in quant_layers(module):
        q.ranges_frozen = frozen


def activation_ranges(module: nn.Module) -> dict[str, tuple[float, float]]:
    """Observed ``(min, max)`` input range of every wrapped layer that quantizes activations."""
    return {
        name: (float(q.act_min), float(q.act_max))
        for name, q in quant_layers(module)
        if q.act_bits is not None
    }
