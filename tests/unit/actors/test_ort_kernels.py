"""``int8/ort-s8r`` computes exactly what its docstring says: 7-bit activations, exact int32 sums, on any CPU.

The emulation below is the docstring's formula in numpy (int64 accumulation, so no saturation is possible). On an
AVX2-only CPU a kernel whose ``vpmaddubsw`` pair sums saturated would be off by several percent here (as
``int8/ort-s8`` is); exact accumulation leaves only float32 rounding and the odd rounding tie.
"""

from __future__ import annotations

import numpy as np
import onnxruntime  # noqa: F401  (pinned: failing to import it is a failure, not a skip)
import pytest

from actorq.actors.kernels import PolicySpec
from actorq.actors.kernels.base import float32, int8_codes, prefixes
from actorq.actors.kernels.ort_kernels import INT8_MIN_FEATURES, Int8OrtS8R
from actorq.actors.kernels.verify import probe_inputs, probe_tensors
from actorq.networks.torch_nets import SONNET_LAYER_NORM_EPS

LAYERS = (256, 256)


def quantize_7bit(x: np.ndarray) -> tuple[np.ndarray, np.float32, np.float32]:
    """``q = round(x / s) + z`` per tensor, ``s = (max(x, 0) - min(x, 0)) / 127``, ``z = round(-min(x, 0) / s)``."""
    lo, hi = np.float32(min(x.min(), 0.0)), np.float32(max(x.max(), 0.0))
    s = max(np.float32((hi - lo) / np.float32(127.0)), np.finfo(np.float32).tiny)
    z = np.round(-lo / s)
    q = np.clip(np.round(x / s) + z, 0, 255)
    return q.astype(np.int64), np.float32(s), np.float32(z)


def emulate(spec: PolicySpec, tensors, x: np.ndarray) -> np.ndarray:
    """The s8r graph in numpy: thin layers in float, the others as exact integer sums of 7-bit activations."""
    h = x.astype(np.float64)
    for i, prefix in enumerate(prefixes(spec)):
        weight, bias = tensors[f"{prefix}.weight"], float32(tensors[f"{prefix}.bias"]).astype(np.float64)
        if min(weight.shape) < INT8_MIN_FEATURES:
            h = h @ float32(weight).astype(np.float64).T + bias
        else:
            codes, scale = int8_codes(weight)
            q, s, z = quantize_7bit(h.astype(np.float32))
            acc = (q - np.int64(z)) @ codes.astype(np.int64).T  # exact: what an unsaturated int32 kernel sums
            assert (q <= 128).all() and np.abs(codes).max() <= 127  # the docstring's no-saturation premise
            h = acc * (np.float64(s) * scale.astype(np.float64)) + bias
        if prefix == "head":
            break
        if spec.algorithm == "dqn":
            h = np.maximum(h, 0.0)
        elif i == 0:
            mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
            h = (h - mean) / np.sqrt(var + SONNET_LAYER_NORM_EPS)
            h = np.tanh(h * float32(tensors["norm.weight"]) + float32(tensors["norm.bias"]))
        else:
            h = np.where(h > 0, h, np.expm1(h))
    if spec.algorithm == "d4pg":
        h = (np.tanh(h) + 1.0) / 2.0 * spec.action_range + np.asarray(spec.action_low)
    return h


@pytest.mark.parametrize("algorithm", ["d4pg", "dqn"])
@pytest.mark.parametrize("batch", [1, 8])
def test_s8r_is_exact_7bit_arithmetic_on_full_range_codes(algorithm, batch):
    spec = PolicySpec.build(algorithm, 11, 4, LAYERS, -2.0, 2.0)
    tensors = probe_tensors(spec)  # full-range codes in every int8 layer
    kernel = Int8OrtS8R(spec)
    kernel.install(kernel.prepare(tensors))
    x = 3.0 * probe_inputs(spec, 64)
    for start in range(0, len(x), batch):
        chunk = np.ascontiguousarray(x[start : start + batch])
        got, want = kernel.forward(chunk), emulate(spec, tensors, chunk)
        scale = 4.0 if algorithm == "d4pg" else np.abs(want).max()
        assert np.abs(got - want).max() / scale < 2e-3, (start, got, want)


def test_forward_results_are_not_overwritten_by_the_next_call():
    """The output buffer is reused between calls; what a caller was handed must not change."""
    spec = PolicySpec.build("dqn", 11, 4, LAYERS)
    kernel = Int8OrtS8R(spec)
    kernel.install(kernel.prepare(probe_tensors(spec)))
    x = probe_inputs(spec, 2)
    first = kernel.forward(x[:1])
    kept = first.copy()
    kernel.forward(x[1:])
    np.testing.assert_array_equal(first, kept)
