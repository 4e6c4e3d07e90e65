"""The actor's torch policy at fp32, fp16 or int8, and the cheap installation of new weight messages.

Precisions:

* ``fp32``: the float model (:mod:`actorq.networks.torch_nets`).
* ``fp16``: kernel ``"fbgemm"`` (default, described below) or ``"half"``: the same model in half precision (weights, LayerNorm and
  activations); inputs are cast to half and outputs back to float32. CPUs without fp16 arithmetic (no
  AVX512-FP16) run it several times slower than fp32, which is why it is not the default. Kernel ``"fbgemm"``: fp16 weights, float32 activations
  (``torch.ao.nn.quantized.dynamic.Linear(dtype=float16)``): faster than fp32 on large layers (half the weight
  bytes), but each update pays ``quantized::linear_prepack_fp16`` (~150 ms per 2048x2048 layer). See
  ``actorq bench policy``.
* ``int8``: every Linear layer gets int8 per-output-row symmetric weights and dynamically quantized int8
  activations; LayerNorm, tanh/elu/relu and the action rescaling stay float32. Two kernels:
  ``"intmm"`` (default, :class:`~actorq.networks.torch_nets.Int8Linear` over ``torch._int_mm``) and
  ``"fbgemm"`` (``torch.ao.nn.quantized.dynamic.Linear``, weights per-channel qint8, activations 7-bit).
  Both use the message's codes as they are when it carries symmetric codes of <= 8 bits; "intmm" installs
  them without any repacking, "fbgemm" must run ``quantized::linear_prepack`` (tens of ms for a 2048x2048
  layer), which is why it is not the default.

Updating is split so that an updater thread can do the work off the acting thread: :meth:`prepare` builds
every new tensor (copies, casts, quantization, prepacking) without touching the live model, and
:meth:`install` swaps references under a lock (microseconds). :meth:`apply` does both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from actorq.networks.mapping import torch_state_shapes
from actorq.networks.torch_nets import D4PGPolicy, Int8Linear, QNetwork, linear_prefixes, quantize_rows
from actorq.quantize.codec import (
    EncodedTensor,
    MissingTensorError,
    ShapeMismatchError,
    UnknownTensorError,
    WeightMessage,
)

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16", "int8")
KERNELS = {"fp32": ("torch",), "fp16": ("fbgemm", "half"), "int8": ("intmm", "fbgemm")}
"""Kernels per precision; the first is the default."""
QUANTIZED_ENGINE = "fbgemm"


@dataclass(frozen=True)
class PreparedWeights:
    """New weights built by :meth:`QuantizedPolicy.prepare`, ready for an O(1) :meth:`QuantizedPolicy.install`."""

    version: int
    learner_step: int
    comm_bits: int
    linears: dict[str, Any]
    """Per Linear prefix: (weight, bias) tensors (torch/half), (codes, scale, bias) (intmm) or packed params."""
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    """The other parameters (LayerNorm) by torch key."""
    owner: int = 0


def _set_quantized_engine() -> None:
    if QUANTIZED_ENGINE in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = QUANTIZED_ENGINE
    else:  # e.g. ARM: qnnpack only; the intmm kernel doesn't depend on the engine
        logger.warning(
            "quantized engine %s unavailable (have %s)", QUANTIZED_ENGINE, torch.backends.quantized.engine
        )


def _float32(t: EncodedTensor) -> np.ndarray:
    """A float32 array owned by no one else: f32 data are views into the message buffer, so they are copied."""
    if t.encoding == "f32":
        return np.array(t.data, dtype=np.float32, order="C", copy=True)
    return np.ascontiguousarray(t.to_float32(), dtype=np.float32)  # fresh: cast or dequantized


def _float16(t: EncodedTensor) -> np.ndarray:
    if t.encoding == "f16":
        return np.array(t.data, dtype=np.float16, order="C", copy=True)
    return t.to_float32().astype(np.float16, order="C")


def _int8_codes(t: EncodedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row int8 codes and float32 scales for a weight ``[out, in]``.

    Symmetric codes of <= 8 bits along axis 0 (or per tensor) are exactly representable as int8 codes with their
    own scales, so they are used as they are: no dequantize/requantize round trip, no added error. Anything
    else (f32/f16 messages) is quantized per row here.
    """
    out_features = t.shape[0]
    if t.encoding == "q" and t.bits <= 8 and t.axis in (0, None) and t.scale is not None:
        zero = t.zero_point
        if zero is None or not np.any(zero):
            codes = t.data if t.data.flags.writeable else t.data.copy()  # decoded codes are fresh arrays
            codes = np.ascontiguousarray(codes.astype(np.int8, copy=False))
            scale = np.broadcast_to(np.asarray(t.scale, np.float32).reshape(-1), (out_features,)).copy()
            return torch.from_numpy(codes), torch.from_numpy(scale)
    return quantize_rows(torch.from_numpy(_float32(t)))


class QuantizedPolicy:
    """The actor's policy network at one precision, fed by weight messages.

    Args:
        algorithm: ``"d4pg"`` (deterministic action in bounds) or ``"dqn"`` (Q-values).
        obs_dim: Flat observation size.
        out_dim: Action dimensions (D4PG) or number of actions (DQN).
        layers: Hidden widths (must match the learner's).
        precision: ``"fp32"``, ``"fp16"`` or ``"int8"``.
        action_low: D4PG lower action bound(s) (scalar or ``[out_dim]``); default -1.
        action_high: D4PG upper action bound(s); default 1.
        threads: torch intra-op threads (process-wide setting).
        kernel: One of ``KERNELS[precision]`` (see the module docstring); None picks the first.
    """

    def __init__(
        self,
        algorithm: str,
        obs_dim: int,
        out_dim: int,
        layers: tuple[int, ...],
        precision: str = "int8",
        action_low: float | np.ndarray | None = None,
        action_high: float | np.ndarray | None = None,
        threads: int = 1,
        kernel: str | None = None,
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not one of {PRECISIONS}")
        kernel = KERNELS[precision][0] if kernel is None else kernel
        if kernel not in KERNELS[precision]:
            raise ValueError(
                f"kernel {kernel!r} is not one of {KERNELS[precision]} for precision {precision}"
            )
        self.algorithm = algorithm
        self.obs_dim, self.out_dim, self.layers = int(obs_dim), int(out_dim), tuple(int(w) for w in layers)
        self.precision, self.kernel = precision, kernel
        self._mode = f"{precision}/{kernel}"
        self._expected = torch_state_shapes(algorithm, self.obs_dim, self.out_dim, self.layers)
        torch.set_num_threads(int(threads))
        _set_quantized_engine()

        if algorithm == "d4pg":
            low = -1.0 if action_low is None else action_low
            high = 1.0 if action_high is None else action_high
            model: nn.Module = D4PGPolicy(self.obs_dim, self.out_dim, self.layers, low, high)
        else:
            model = QNetwork(self.obs_dim, self.out_dim, self.layers)
        model.eval().requires_grad_(False)
        self._prefixes = linear_prefixes(model)
        if self._mode == "int8/intmm":
            model = _replace(model, self._prefixes, Int8Linear.from_float)
        elif kernel == "fbgemm":
            model = _replace(model, self._prefixes, lambda lin: _fbgemm_from_float(lin, precision))
        elif self._mode == "fp16/half":
            model = model.half()
        self._model = model
        self._modules = dict(model.named_modules())
        self._lock = threading.Lock()
        self._token = id(self)
        self.version = -1
        self.learner_step = -1

    # -- inference ---------------------------------------------------------------------------------------------
    @property
    def module(self) -> nn.Module:
        """The torch module (read-only use: tests and diagnostics)."""
        return self._model

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions (D4PG, in bounds, before exploration noise) or Q-values (DQN) as float32 numpy.

        Args:
            obs: ``[obs_dim]`` or ``[B, obs_dim]`` observations.

        Returns:
            ``[out_dim]`` or ``[B, out_dim]`` float32.
        """
        x = np.asarray(obs, dtype=np.float32)
        if x.shape[-1:] != (self.obs_dim,) or x.ndim not in (1, 2):
            raise ValueError(
                f"expected observations [obs_dim] or [B, obs_dim] with obs_dim={self.obs_dim}, got {x.shape}"
            )
        if not (x.flags.c_contiguous and x.flags.writeable):
            x = np.array(x, order="C")  # torch.from_numpy warns on read-only arrays
        t = torch.from_numpy(x)
        if x.ndim == 1:
            t = t.unsqueeze(0)
        if self._mode == "fp16/half":
            t = t.half()
        with self._lock, torch.inference_mode():
            y = self._model(t)
        out = y.float().numpy()
        return out[0] if x.ndim == 1 else out

    # -- weights -----------------------------------------------------------------------------------------------
    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """``{torch key: shape}`` the policy needs; pass as ``decode_message(buf, expected=...)``."""
        return dict(self._expected)

    def apply(self, message: WeightMessage) -> None:
        """Install a decoded message's weights (:meth:`prepare` then :meth:`install`).

        Raises:
            UnknownTensorError, MissingTensorError, ShapeMismatchError: The message doesn't fit this network;
                the current weights are left untouched.
        """
        self.install(self.prepare(message))

    def prepare(self, message: WeightMessage) -> PreparedWeights:
        """Build the new weights for this policy's precision without touching the live model (thread-safe).

        Raises:
            UnknownTensorError, MissingTensorError, ShapeMismatchError: As :meth:`apply`.
        """
        self._validate({name: t.shape for name, t in message.tensors.items()})
        tensors = message.tensors
        linears: dict[str, Any] = {}
        for prefix in self._prefixes:
            w, b = tensors[f"{prefix}.weight"], tensors[f"{prefix}.bias"]
            bias = torch.from_numpy(_float32(b))
            if self._mode == "fp32/torch":
                linears[prefix] = (torch.from_numpy(_float32(w)), bias)
            elif self._mode == "fp16/half":
                linears[prefix] = (torch.from_numpy(_float16(w)), bias.half())
            elif self._mode == "fp16/fbgemm":
                weight = torch.from_numpy(_float16(w).astype(np.float32))  # fp16 values, as the packed weight
                linears[prefix] = torch.ops.quantized.linear_prepack_fp16(weight, bias)
            else:
                codes, scale = _int8_codes(w)
                linears[prefix] = (
                    (codes, scale, bias) if self.kernel == "intmm" else _fbgemm_pack(codes, scale, bias)
                )
        others = {}
        for key in self._expected:
            if key.rsplit(".", 1)[0] not in linears:
                value = torch.from_numpy(_float32(tensors[key]))
                others[key] = value.half() if self._mode == "fp16/half" else value
        return PreparedWeights(
            message.version, message.learner_step, message.comm_bits, linears, others, self._token
        )

    def install(self, prepared: PreparedWeights) -> None:
        """Swap prepared weights in (reference swaps under the inference lock; no copies)."""
        if prepared.owner != self._token:
            raise ValueError("these weights were prepared by another QuantizedPolicy")
        with self._lock:
            for prefix, payload in prepared.linears.items():
                module = self._modules[prefix]
                if self._mode == "int8/intmm":
                    module.set_codes(*payload)
                elif self.kernel == "fbgemm":
                    # What LinearPackedParams.set_weight_bias stores, minus the prepack done in prepare().
                    module._packed_params._packed_params = payload
                else:
                    module.weight.data, module.bias.data = payload
            for key, value in prepared.tensors.items():
                owner, name = key.rsplit(".", 1)
                getattr(self._modules[owner], name).data = value
            self.version, self.learner_step = prepared.version, prepared.learner_step

    def load_state(self, state: Mapping[str, np.ndarray], version: int = 0, learner_step: int = 0) -> None:
        """Install float weights keyed by torch name (e.g. ``mapping.tf_to_torch_state``'s output) directly.

        Raises:
            UnknownTensorError, MissingTensorError, ShapeMismatchError: As :meth:`apply`.
        """
        tensors = {}
        for name, value in state.items():
            arr = np.asarray(value)
            tensors[name] = EncodedTensor(
                name, tuple(arr.shape), "f32", arr.astype(np.float32, copy=False), 32
            )
        self.apply(WeightMessage(version, learner_step, "fp32", 32, tensors, 0))

    def _validate(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        unknown = sorted(set(shapes) - set(self._expected))
        if unknown:
            raise UnknownTensorError(
                f"message carries {unknown} that this {self.algorithm} policy does not have"
            )
        missing = [k for k in self._expected if k not in shapes]
        if missing:
            raise MissingTensorError(
                f"this {self.algorithm} policy expects {missing} but the message lacks them"
            )
        for key, want in self._expected.items():
            if tuple(shapes[key]) != want:
                raise ShapeMismatchError(
                    f"tensor {key!r} has shape {tuple(shapes[key])} but this policy (obs_dim={self.obs_dim}, "
                    f"layers={self.layers}, out_dim={self.out_dim}) expects {want}"
                )


def _replace(model: nn.Module, prefixes: list[str], factory) -> nn.Module:
    for prefix in prefixes:
        owner, _, name = prefix.rpartition(".")
        parent = model.get_submodule(owner) if owner else model
        setattr(parent, name, factory(getattr(parent, name)))
    return model


def _fbgemm_pack(codes: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> Any:
    """Per-channel qint8 weight from codes and scales (no float round trip), prepacked for fbgemm."""
    zero = torch.zeros(codes.shape[0], dtype=torch.long)
    qweight = torch._make_per_channel_quantized_tensor(codes, scale.double(), zero, 0)
    return torch.ops.quantized.linear_prepack(qweight, bias)


def _fbgemm_from_float(linear: nn.Linear, precision: str) -> nn.Module:
    """``torch.ao.nn.quantized.dynamic.Linear`` with qint8 per-row (int8) or fp16 weights."""
    from torch.ao.nn.quantized import dynamic as nnqd

    bias = linear.bias.detach().float()
    if precision == "fp16":
        layer = nnqd.Linear(linear.in_features, linear.out_features, dtype=torch.float16)
        layer._packed_params._packed_params = torch.ops.quantized.linear_prepack_fp16(
            linear.weight.detach(), bias
        )
        return layer
    layer = nnqd.Linear(linear.in_features, linear.out_features, dtype=torch.qint8)
    codes, scale = quantize_rows(linear.weight)
    layer._packed_params._packed_params = _fbgemm_pack(codes, scale, bias)
    return layer
