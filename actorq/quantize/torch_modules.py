"""PyTorch glue for quantization: post-training quantization of every weight layer and fake-quant modules.

This is the only module of ``actorq.quantize`` that imports torch. The numbers always come from the numpy
maths in :mod:`actorq.quantize.affine` / :mod:`actorq.quantize.floats`, so a weight quantized here is
bit-for-bit the weight the rest of ActorQ would produce for the same scheme.

Two tools:

* :func:`ptq_quantize_` rewrites the weights of **every** ``nn.Linear`` / ``nn.Conv{1,2,3}d`` of a module in
  place (convolutions per output channel, linears per tensor or per output row) and returns one
  :class:`LayerReport` per parameterised module, including the ones it could not quantize, so that no layer is
  ever skipped silently (the original QuaRL code quantized nothing for DDPG and only the output layer of the
  Atari A2C/PPO policies).
* :class:`QuantLayer` wraps a Linear/Conv and fake-quantizes its weight (per forward, straight-through
  estimator) and its input activation (asymmetric, with an EMA or min/max observed range). It keeps the very
  same ``nn.Parameter`` objects, so an optimizer built before wrapping keeps training them: the QAT hooks can't
  get lost the way they did in the original code.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actorq.quantize import affine, floats

logger = logging.getLogger(__name__)

QUANT_LAYER_TYPES: tuple[type[nn.Module], ...] = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
FLOAT_PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class QuantScheme:
    """How weights are quantized.

    Attributes:
        precision: ``"fp32"`` (no-op), ``"fp16"``, ``"bf16"`` or ``"int"`` (uniform affine, ``bits`` wide).
        bits: Bit width for ``"int"`` (2..16); 32/16 for the float precisions.
        symmetric: Symmetric restricted range (weights are roughly zero-centred, so this is the default).
        per_channel_linear: One scale per output row of a Linear (else one per tensor).
        per_channel_conv: One scale per output channel of a convolution.
    """

    precision: str = "int"
    bits: int = 8
    symmetric: bool = True
    per_channel_linear: bool = False
    per_channel_conv: bool = True

    @classmethod
    def parse(cls, spec: str | int, **kwargs: bool) -> QuantScheme:
        """Build a scheme from ``"fp32"``, ``"fp16"``, ``"bf16"``, ``"8"`` or ``"int8"``."""
        s = str(spec).strip().lower()
        if s in FLOAT_PRECISIONS:
            return cls(precision=s, bits=32 if s == "fp32" else 16, **kwargs)
        s = s.removeprefix("int")
        if not s.isdigit():
            raise ValueError(f"unknown precision {spec!r}: use fp32, fp16, bf16 or an integer bit width")
        bits = int(s)
        if not affine.MIN_BITS <= bits <= affine.MAX_BITS:
            raise ValueError(f"bit width must be in [{affine.MIN_BITS}, {affine.MAX_BITS}], got {bits}")
        return cls(precision="int", bits=bits, **kwargs)

    @property
    def label(self) -> str:
        """Short name used in tables: ``fp32``, ``fp16``, ``bf16`` or ``int8`` etc."""
        return self.precision if self.precision != "int" else f"int{self.bits}"

    def axis_for(self, layer: nn.Module) -> int | None:
        """Per-channel axis for ``layer``'s weight (0 = output channels) or None for per tensor."""
        if isinstance(layer, nn.Linear):
            return 0 if self.per_channel_linear else None
        return 0 if self.per_channel_conv else None

    def describe(self, layer: nn.Module) -> str:
        """Human-readable scheme of one layer, e.g. ``int4 symmetric per-channel(axis 0)``."""
        if self.precision != "int":
            return self.precision
        axis = self.axis_for(layer)
        gran = "per-tensor" if axis is None else f"per-channel(axis {axis})"
        return f"{self.label} {'symmetric' if self.symmetric else 'asymmetric'} {gran}"


def quantize_array(w: np.ndarray, scheme: QuantScheme, axis: int | None = None) -> np.ndarray:
    """Weights after quantization and dequantization under ``scheme`` (float32, same shape).

    Per-channel quantization flattens every axis but ``axis`` first, so a conv kernel
    ``(out, in, kh, kw)`` gets exactly one scale per output channel.
    """
    w = np.asarray(w, np.float32)
    if scheme.precision == "fp32":
        return w.copy()
    if scheme.precision == "fp16":
        return floats.to_fp16(w).astype(np.float32)
    if scheme.precision == "bf16":
        return np.asarray(floats.round_bf16(w), np.float32)
    if axis is None:
        return affine.fake_quantize(w, scheme.bits, symmetric=scheme.symmetric, axis=None)
    moved = np.moveaxis(w, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    out = affine.fake_quantize(flat, scheme.bits, symmetric=scheme.symmetric, axis=0)
    return np.moveaxis(out.reshape(moved.shape), 0, axis)


def weight_qparams(w: np.ndarray, scheme: QuantScheme, axis: int | None) -> affine.QParams:
    """The affine parameters :func:`quantize_array` uses for ``w`` (``scheme`` must be ``int``)."""
    if scheme.precision != "int":
        raise ValueError("float precisions have no affine parameters")
    w = np.asarray(w, np.float32)
    if axis is None:
        return affine.compute_qparams(w, scheme.bits, symmetric=scheme.symmetric)
    flat = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    return affine.compute_qparams(flat, scheme.bits, symmetric=scheme.symmetric, axis=0)


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


def _t2np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()


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
            w = _t2np(sub.weight)
            wq = quantize_array(w, scheme, scheme.axis_for(sub))
            diff = wq - w
            if sub.bias is not None:
                if scheme.precision in ("fp16", "bf16"):
                    b = quantize_array(_t2np(sub.bias), scheme)
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


# --------------------------------------------------------------------------------------------------------
# Fake quantization with a straight-through estimator (QAT, activation PTQ)
# --------------------------------------------------------------------------------------------------------


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
        return torch.from_numpy(quantize_array(_t2np(w), scheme)).to(w.device, w.dtype)
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
            if self.training or self.calibrating:
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
) -> list[str]:
    """Replace every Linear/Conv inside ``module`` by a :class:`QuantLayer` (in place).

    Returns:
        Names of the wrapped layers (relative to ``module``).

    Raises:
        ValueError: If ``module`` contains no Linear/Conv layer at all (nothing would be quantized).
    """
    targets = [
        (name, sub) for name, sub in module.named_modules() if isinstance(sub, QUANT_LAYER_TYPES) and name
    ]
    if isinstance(module, QUANT_LAYER_TYPES):
        raise ValueError("wrap the parent of a bare layer, not the layer itself")
    wrapped = []
    for name, sub in targets:
        parent_name, _, child = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        if isinstance(parent, QuantLayer):
            continue
        setattr(parent, child, QuantLayer(sub, weight_scheme, act_bits, ema_decay))
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


def activation_ranges(module: nn.Module) -> dict[str, tuple[float, float]]:
    """Observed ``(min, max)`` input range of every wrapped layer that quantizes activations."""
    return {
        name: (float(q.act_min), float(q.act_max))
        for name, q in quant_layers(module)
        if q.act_bits is not None
    }
