"""Torch kernels: fp32, fp16 (half model, fbgemm fp16 Linear), int8 ``torch._int_mm`` and torch's dynamic
quantized Linear under each quantized engine.

Which of them is exact depends on the CPU, so none is trusted by assumption (see
:mod:`actorq.actors.kernels.verify`). What we know, per class docstring, is why each may or may not be.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from actorq.actors.kernels.base import (
    Kernel,
    PolicySpec,
    check_conv_prefixes,
    check_prefixes,
    conv_matrix,
    float16,
    float32,
    int8_codes,
    retire,
)
from actorq.networks.torch_nets import Im2colConv, Int8Linear, quantize_rows
from actorq.quantize.message import EncodedTensor

logger = logging.getLogger(__name__)

_ENGINE_LOCK = threading.Lock()


@contextlib.contextmanager
def quantized_engine(name: str):
    """Run the block with ``torch.backends.quantized.engine = name`` (process-global, so under a lock).

    Prepacking picks its implementation from the engine set at prepack time; the packed weight then carries it,
    so a kernel prepacked under one engine keeps running that engine's code whatever is set later.
    """
    with _ENGINE_LOCK:
        old = torch.backends.quantized.engine
        torch.backends.quantized.engine = name
        try:
            yield
        finally:
            torch.backends.quantized.engine = old


def _replace(model: nn.Module, names: list[str], factory: Callable[[nn.Linear], nn.Module]) -> nn.Module:
    for prefix in names:
        owner, _, name = prefix.rpartition(".")
        parent = model.get_submodule(owner) if owner else model
        setattr(parent, name, factory(getattr(parent, name)))
    return model


class TorchKernel(Kernel):
    """A torch model whose Linear layers the subclass replaces (:meth:`_make`); a conv torso's convolutions then
    become :class:`~actorq.networks.torch_nets.Im2colConv` over the same kind of layer (their weights as
    ``[out, kh * kw * in]`` matrices, per-output-channel scales). LayerNorm and activations stay float32."""

    half = False

    def __init__(self, spec: PolicySpec):
        super().__init__(spec)
        torch.set_num_threads(spec.threads)
        model = spec.float_model()
        self._prefixes = check_prefixes(spec, model)
        self._convs = check_conv_prefixes(spec, model)
        self._model = self._convert(model)
        self._modules = dict(self._model.named_modules())
        self._im2col = {p for p in self._convs if isinstance(self._modules[p], Im2colConv)}

    def _make(self, linear: nn.Linear) -> nn.Module | None:
        """The layer replacing a float ``linear`` (None: the float layers stay)."""
        return None

    def _convert(self, model: nn.Module) -> nn.Module:
        if type(self)._make is TorchKernel._make:  # float layers stay
            return model
        model = _replace(model, self._prefixes, self._make)
        return _replace(
            model, self._convs, lambda conv: Im2colConv(conv, self._make(Im2colConv.matrix_linear(conv)))
        )

    def _linear(self, weight: EncodedTensor, bias: torch.Tensor) -> Any:
        return torch.from_numpy(float32(weight)), bias

    def _set_linear(self, module: nn.Module, payload: Any) -> None:
        module.weight.data, module.bias.data = payload

    def prepare(self, tensors: Mapping[str, EncodedTensor]) -> Any:
        linears = {}
        for p in self._convs + self._prefixes:
            weight = tensors[f"{p}.weight"]
            weight = conv_matrix(weight) if p in self._im2col else weight
            linears[p] = self._linear(weight, torch.from_numpy(float32(tensors[f"{p}.bias"])))
        others = {}
        for key, t in tensors.items():
            if key.rsplit(".", 1)[0] not in linears:
                value = torch.from_numpy(float32(t))
                others[key] = value.half() if self.half else value
        return linears, others

    def install(self, payload: Any) -> None:
        linears, others = payload
        for prefix, value in linears.items():
            module = self._modules[prefix]
            self._set_linear(module.linear if prefix in self._im2col else module, value)
        for key, value in others.items():
            owner, name = key.rsplit(".", 1)
            getattr(self._modules[owner], name).data = value
        # The previous payload now holds the last references to the replaced weights: free them elsewhere.
        retire(getattr(self, "_installed", None))
        self._installed = payload

    def forward(self, x: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(x)
        with torch.inference_mode():
            y = self._model(t.half() if self.half else t)
        return y.float().numpy()

    @property
    def module(self) -> nn.Module:
        return self._model


class Fp32Torch(TorchKernel):
    """The float32 reference (torch's fp32 GEMM/GEMV). Exact up to float32 reassociation on every CPU."""

    name = "fp32/torch"


class Fp16Half(TorchKernel):
    """The whole model in half precision (weights, LayerNorm, activations).

    Correct everywhere torch runs half on CPU, but CPUs without fp16 arithmetic (no AVX512-FP16) emulate it and run
    several times slower than fp32; kept so that ``auto`` can find out on machines that have it.
    """

    name = "fp16/half"
    half = True

    def _convert(self, model: nn.Module) -> nn.Module:
        return model.half()

    def _linear(self, weight: EncodedTensor, bias: torch.Tensor) -> Any:
        return torch.from_numpy(float16(weight)), bias.half()


class Fp16Fbgemm(TorchKernel):
    """fp16 weights, float32 activations (``quantized::linear_dynamic_fp16``, FBGEMM's fp16 GEMM).

    FBGEMM converts the weights to float32 (F16C) and accumulates in float32, so it is exact to fp16 weight
    rounding on any x86-64 CPU with AVX2+F16C; unavailable without the fbgemm engine (e.g. ARM builds).
    Each update pays ``linear_prepack_fp16`` (about 150 ms per 2048x2048 layer), so it is prepared off-thread.
    """

    name = "fp16/fbgemm"
    prepare_off_thread = True

    @classmethod
    def unavailable(cls) -> str | None:
        if "fbgemm" not in torch.backends.quantized.supported_engines:
            return f"torch has no fbgemm engine (engines: {torch.backends.quantized.supported_engines})"
        return None

    def _make(self, linear: nn.Linear) -> nn.Module:
        from torch.ao.nn.quantized import dynamic as nnqd

        with quantized_engine("fbgemm"):
            layer = nnqd.Linear(linear.in_features, linear.out_features, dtype=torch.float16)
            layer._packed_params._packed_params = torch.ops.quantized.linear_prepack_fp16(
                linear.weight.detach(), linear.bias.detach().float()
            )
        return layer

    def _linear(self, weight: EncodedTensor, bias: torch.Tensor) -> Any:
        values = torch.from_numpy(float16(weight).astype(np.float32))  # fp16 values, as the packed weight
        with quantized_engine("fbgemm"):
            return torch.ops.quantized.linear_prepack_fp16(values, bias)

    def _set_linear(self, module: nn.Module, payload: Any) -> None:
        module._packed_params._packed_params = payload


class Int8IntMM(TorchKernel):
    """:class:`~actorq.networks.torch_nets.Int8Linear` over ``torch._int_mm``: int8 x int8 -> int32, per-row
    weight scales, activations quantized per row to 8 bits; installs message codes with no repacking.

    ``_int_mm`` runs oneDNN's s8s8s32 GEMM. With AVX512-VNNI (or AMX) it accumulates exactly in int32. On
    AVX2-only CPUs oneDNN emulates it with ``vpmaddubsw``, whose int16 pair sums saturate on full-range codes:
    measured on an AMD EPYC Zen 2/3, [1x2048]x[2048x2048] off by up to ~180,000 and actions off by 25% of the
    range. Verification rejects it there.
    """

    name = "int8/intmm"

    def _make(self, linear: nn.Linear) -> nn.Module:
        return Int8Linear.from_float(linear)

    def _linear(self, weight: EncodedTensor, bias: torch.Tensor) -> Any:
        codes, scale = int8_codes(weight)
        return torch.from_numpy(codes), torch.from_numpy(scale), bias

    def _set_linear(self, module: nn.Module, payload: Any) -> None:
        module.set_codes(*payload)


class Int8Dynamic(TorchKernel):
    """``torch.ao.nn.quantized.dynamic.Linear``: per-channel qint8 weights (the message's codes and scales, no
    float round trip), activations quantized per tensor at run time, under one quantized engine.

    Subclasses name the engine. fbgemm (and x86, which dispatches to fbgemm or oneDNN) quantize activations to 7
    bits (``reduce_range``) so that u8 x s8 pair sums cannot saturate int16: exact on AVX2 and on VNNI. oneDNN
    and qnnpack make their own choices; verification decides. Each update prepacks every layer (tens of ms for a
    2048x2048 layer), so it is prepared off-thread.
    """

    engine = ""
    prepare_off_thread = True

    @classmethod
    def unavailable(cls) -> str | None:
        if cls.engine not in torch.backends.quantized.supported_engines:
            return f"torch has no {cls.engine} engine (engines: {torch.backends.quantized.supported_engines})"
        return None

    def _make(self, linear: nn.Linear) -> nn.Module:
        from torch.ao.nn.quantized import dynamic as nnqd

        with quantized_engine(self.engine):
            layer = nnqd.Linear(linear.in_features, linear.out_features, dtype=torch.qint8)
        codes, scale = quantize_rows(linear.weight)
        layer._packed_params._packed_params = self._pack(codes, scale, linear.bias.detach().float())
        return layer

    def _pack(self, codes: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> Any:
        zero = torch.zeros(codes.shape[0], dtype=torch.long)
        qweight = torch._make_per_channel_quantized_tensor(codes, scale.double(), zero, 0)
        with quantized_engine(self.engine):
            return torch.ops.quantized.linear_prepack(qweight, bias)

    def _linear(self, weight: EncodedTensor, bias: torch.Tensor) -> Any:
        codes, scale = int8_codes(weight)
        return self._pack(torch.from_numpy(codes), torch.from_numpy(scale), bias)

    def _set_linear(self, module: nn.Module, payload: Any) -> None:
        # What LinearPackedParams.set_weight_bias stores, minus the prepack done in prepare().
        module._packed_params._packed_params = payload


class Int8Fbgemm(Int8Dynamic):
    __doc__ = Int8Dynamic.__doc__
    name = "int8/fbgemm"
    engine = "fbgemm"


class Int8X86(Int8Dynamic):
    __doc__ = Int8Dynamic.__doc__
    name = "int8/x86"
    engine = "x86"


class Int8Onednn(Int8Dynamic):
    __doc__ = Int8Dynamic.__doc__
    name = "int8/onednn"
    engine = "onednn"


class Int8Qnnpack(Int8Dynamic):
    """As :class:`Int8Dynamic` under qnnpack, torch's ARM engine (it ignores ``reduce_range``: 8-bit activations)."""

    name = "int8/qnnpack"
    engine = "qnnpack"
