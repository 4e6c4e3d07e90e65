"""The torch layers the actor policies are made of (never imports TensorFlow).

Each algorithm's policy lives in its package (``actorq/algorithms/<name>/torch_policy.py``) and builds on what is
shared here: :func:`layer_widths`, Sonnet's LayerNorm epsilon, the int8 layer of the quantized actors, and the conv
torso's layers (:class:`NhwcConv2d`, the float convolution in TF's NHWC layout, and :class:`Im2colConv`, a
convolution computed by any kernel's Linear layer).

``Int8Linear`` is the int8 layer of the quantized actors: per-output-row symmetric int8 weight codes with one
float32 scale per row (exactly what an 8-bit or narrower weight message carries), activations quantized
per row on the fly, int32 accumulation through ``torch._int_mm`` (exact with AVX512-VNNI/AMX; on AVX2-only
CPUs oneDNN's emulation saturates, which the actor's kernel verification detects and rejects). Unlike
``torch.ao.nn.quantized.dynamic.Linear`` it needs no weight prepacking: installing new codes is a pointer swap.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from actorq.algorithms.torso import PIXEL_SCALE, Torso

SONNET_LAYER_NORM_EPS = 1e-5
"""``snt.LayerNorm``'s default epsilon (added to the variance, as torch does)."""

INT8_QMAX = 127
"""Restricted symmetric int8 range [-127, 127], as the codec's 8-bit codes."""


def layer_widths(obs_dim: int, layers: Sequence[int]) -> list[tuple[int, int]]:
    """``(fan_in, fan_out)`` of each hidden Linear of a policy on ``obs_dim`` inputs (ValueError on bad widths)."""
    layers = [int(w) for w in layers]
    if not layers or any(w <= 0 for w in layers):
        raise ValueError(f"layers must be a non-empty sequence of positive widths, got {layers}")
    widths = [int(obs_dim), *layers]
    return list(zip(widths[:-1], widths[1:], strict=True))


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-row int8 quantization of a float ``[out, in]`` weight.

    Returns:
        ``(codes int8 [out, in] in [-127, 127], scale float32 [out])`` with ``weight ~= scale[:, None] * codes``;
        an all-zero row gets scale 1 (codes 0), so no division by zero.
    """
    w = weight.detach().float()
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / INT8_QMAX, torch.ones_like(amax))
    codes = torch.round(w / scale[:, None]).clamp_(-INT8_QMAX, INT8_QMAX).to(torch.int8)
    return codes, scale


class Int8Linear(nn.Module):
    """Linear layer with int8 per-row weight codes and dynamically quantized int8 activations.

    ``y = (s_x * s_w) * (q_x @ q_w.T) + b`` where ``q_x = round(x / s_x)``, ``s_x = max|x_row| / 127`` per input
    row, and ``q_w`` / ``s_w`` are the weight codes and per-output-row scales. Accumulation is exact in int32.
    The weights live in one tuple attribute so :meth:`set_codes` swaps them atomically (a forward running on
    another thread sees either the old or the new set, never a mix).

    Args:
        in_features: Input width.
        out_features: Output width.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self._weights = (
            torch.zeros(self.out_features, self.in_features, dtype=torch.int8),
            torch.ones(self.out_features),
            torch.zeros(self.out_features),
        )

    @classmethod
    def from_float(cls, linear: nn.Linear) -> Int8Linear:
        """Quantize a float ``nn.Linear`` (per-row symmetric int8)."""
        layer = cls(linear.in_features, linear.out_features)
        codes, scale = quantize_rows(linear.weight)
        bias = (
            linear.bias.detach().float().clone()
            if linear.bias is not None
            else torch.zeros(layer.out_features)
        )
        layer.set_codes(codes, scale, bias)
        return layer

    def set_codes(self, codes: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> None:
        """Install int8 codes ``[out, in]``, float32 row scales ``[out]`` and float32 bias ``[out]`` (no copy).

        Codes may come from any symmetric code width <= 8 bits (a 4-bit message's codes in [-7, 7] are used
        as they are, with their own scales).
        """
        if codes.dtype != torch.int8 or tuple(codes.shape) != (self.out_features, self.in_features):
            raise ValueError(f"codes must be int8 {(self.out_features, self.in_features)}, got {codes.dtype}")
        if tuple(scale.shape) != (self.out_features,) or tuple(bias.shape) != (self.out_features,):
            raise ValueError(f"scale and bias must have shape ({self.out_features},)")
        self._weights = (codes.contiguous(), scale.float().contiguous(), bias.float().contiguous())

    @property
    def weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(codes, scale, bias)`` currently installed."""
        return self._weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        codes, scale, bias = self._weights
        amax = x.abs().amax(dim=-1, keepdim=True).clamp_min_(1e-30)
        x_scale = amax * (1.0 / INT8_QMAX)
        # |x / x_scale| <= 127 up to one ulp, so rounding can't leave [-127, 127]; no clamp needed.
        xq = torch.div(x, x_scale).round_().to(torch.int8)
        acc = torch._int_mm(xq, codes.t())  # codes stay [out, in] row-major: the fast layout for _int_mm
        return torch.addcmul(bias, acc, x_scale * scale)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, dtype=int8 (per-row)"


def image_input(x: torch.Tensor, torso: Torso) -> torch.Tensor:
    """A conv torso's input as NHWC floats: ``uint8`` (or any integer) frames cast to float32, divided by 255 when
    the torso reads pixels (a float16 input, the half kernel's, stays float16), CHW transposed to HWC (a view)."""
    if not x.is_floating_point():
        x = x.float()
    if torso.pixels:
        x = x / PIXEL_SCALE
    return x.permute(0, 2, 3, 1) if torso.channels_first else x


class NhwcConv2d(nn.Conv2d):
    """``nn.Conv2d`` (VALID padding) on NHWC ``[B, H, W, C]`` inputs, NHWC outputs: the layout TF's conv uses.

    The permutes are views: the NHWC input is NCHW in channels-last memory, which torch's CPU convolutions read
    as it is. The weight keeps torch's ``[out, in, kh, kw]`` (the mapping's ``conv.{i}.weight``).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


def conv_weight_as_matrix(weight: torch.Tensor) -> torch.Tensor:
    """A ``[out, in, kh, kw]`` conv weight as the ``[out, kh * kw * in]`` matrix :class:`Im2colConv` multiplies
    (patch elements in height-width-channel order)."""
    return weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1)


class Im2colConv(nn.Module):
    """A square, strided, VALID convolution on NHWC inputs as one matrix product through ``linear``.

    The input's patches ``[B * Ho * Wo, kh * kw * in]`` are gathered by one strided view and one copy, and
    ``linear`` (any module mapping ``[N, K] -> [N, out]`` whose weight is :func:`conv_weight_as_matrix` of the
    conv's: :class:`Int8Linear`, a dynamic quantized or fp16 ``Linear``) computes every output position at once;
    its ``[B * Ho * Wo, out]`` result is the NHWC output. So every kernel's verified Linear computes the
    convolutions too, with per-output-channel weight scales (the matrix's rows).

    Args:
        conv: The float convolution (its sizes; the weights come through ``linear``).
        linear: The layer computing the patches' product.
    """

    def __init__(self, conv: nn.Conv2d, linear: nn.Module):
        super().__init__()
        self.kernel, self.stride = int(conv.kernel_size[0]), int(conv.stride[0])
        self.in_channels, self.out_channels = int(conv.in_channels), int(conv.out_channels)
        if (
            conv.kernel_size[0] != conv.kernel_size[1]
            or conv.stride[0] != conv.stride[1]
            or conv.padding != (0, 0)
        ):
            raise ValueError("Im2colConv computes square, VALID convolutions only")
        self.linear = linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, h, w, c = x.shape
        k, s = self.kernel, self.stride
        ho, wo = (h - k) // s + 1, (w - k) // s + 1
        patches = x.as_strided((b, ho, wo, k, k, c), (h * w * c, s * w * c, s * c, w * c, c, 1))
        y = self.linear(patches.reshape(b * ho * wo, k * k * c))
        return y.view(b, ho, wo, self.out_channels)

    @staticmethod
    def matrix_linear(conv: nn.Conv2d) -> nn.Linear:
        """The float ``nn.Linear`` whose weight is the conv's as a matrix (what a kernel's factory converts)."""
        linear = nn.Linear(conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1], conv.out_channels)
        linear.weight.data = conv_weight_as_matrix(conv.weight.detach()).contiguous()
        linear.bias.data = conv.bias.detach().clone()
        return linear


def conv_prefixes(module: nn.Module) -> list[str]:
    """Names (``conv.0`` ...) of a policy's convolutions, in network order."""
    return [name for name, m in module.named_modules() if isinstance(m, nn.Conv2d)]


def linear_prefixes(module: nn.Module) -> list[str]:
    """Names (``torso.0``, ..., ``head``) of the float Linear layers of a policy, in network order."""
    return [name for name, m in module.named_modules() if isinstance(m, nn.Linear)]
