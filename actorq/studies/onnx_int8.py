"""ONNX export of MLP policies in fp32 and int8, the int8 codes coming from :mod:`actorq.quantize.affine`.

ONNX Runtime's own quantizer (``onnxruntime.quantization``) needs ``onnx.reference`` (onnx >= 1.13), which the
project's protobuf 3.19 pin (TensorFlow 2.8) rules out, so the int8 graph is written here with the standard
operators its dynamic quantizer emits: ``DynamicQuantizeLinear`` (uint8 activations, range per call) ->
``MatMulInteger`` -> ``Cast`` -> ``Mul`` by ``x_scale * w_scale`` -> ``Add`` bias. ONNX Runtime fuses that chain
into one ``DynamicQuantizeMatMul`` per layer.

Weights are stored as uint8 (``code + 128``, zero point 128), not as int8, so the graph is exact on every x86-64 CPU.
ONNX Runtime's int8 GEMMs (MLAS) pick their kernel by operand types and instruction set:

* u8 x s8 (what ``quantize_dynamic`` writes by default) on x86 without VNNI (AVX2: AMD Zen 1-3, Intel Haswell to
  Comet Lake; AVX-512 without VNNI: Skylake-SP) multiplies with ``vpmaddubsw``, which adds adjacent
  u8*s8 products into a *saturating* int16: ``255 * 127 * 2 = 64770 > 32767``. Measured on an AMD EPYC Zen 2
  (AVX2, no VNNI), ORT 1.23.2: up to 13% of the output range off the exact integer result, greedy actions of a
  random 3x64 policy agreeing with fp32 on 87.5% of observations. VNNI (``vpdpbusd``, AVX-512 or AVX) and AMX
  accumulate u8*s8 in 32 bits. ORT's documented remedies are ``reduce_range`` (7-bit codes, so a pair
  sum stays below 2^15) or the u8 x u8 format.
* u8 x u8 widens both operands to 16 bits and multiplies with ``vpmaddwd`` (AVX2, AVX-512) or ``vpdpwssd``
  (AVX-512 VNNI): pair sums of at most ``2 * 255 * 255`` in 32 bits, never saturating, on every x86 kernel
  (MLAS's ``QgemmU8U8Kernel*``; ARM's kernels are not checked here). It keeps the project's full 8-bit weight
  codes and 8-bit activations.

Measured on that Zen 2 (1 thread, batch 1; fp32 ORT as reference): u8 x u8 is bit-exact against
:func:`reference_int8` (2x32 to 3x256 policies, batch 1 and 64) in 0.8-1.1x the time of u8 x s8; 7-bit activations
computed with standard operators are exact too but 2-2.5x slower on small policies (ORT does not fuse them). On a
VNNI/AMX CPU u8 x s8 may be faster; check any other layout on the target CPU with :func:`reference_int8`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from actorq.quantize import affine

OPSET = 13
WEIGHT_ZERO_POINT = 128  # int8 code + 128 = the uint8 stored in the graph


_ACT_OPS = {nn.ReLU: "Relu", nn.Tanh: "Tanh"}  # activations after a Linear -> ONNX operator


def _linears(model: nn.Sequential) -> list[tuple[nn.Linear, str]]:
    """(Linear, ONNX op of the activation after it or ``Identity``) pairs of a Linear/ReLU/Tanh MLP."""
    mods = list(model)
    out = []
    for i, m in enumerate(mods):
        if isinstance(m, nn.Linear):
            out.append((m, _ACT_OPS.get(type(mods[i + 1]), "Identity") if i + 1 < len(mods) else "Identity"))
        elif type(m) not in _ACT_OPS:
            raise TypeError(f"only Linear/ReLU/Tanh MLPs are exported, found {type(m).__name__}")
    return out


def _io(obs_dim: int, n_out: int) -> tuple[onnx.ValueInfoProto, onnx.ValueInfoProto]:
    return (
        helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", obs_dim]),
        helper.make_tensor_value_info("q", TensorProto.FLOAT, ["batch", n_out]),
    )


def export_fp32(model: nn.Sequential, obs_dim: int, path: str | Path) -> Path:
    """fp32 graph: ``MatMul`` + ``Add`` (+ ``Relu``/``Tanh``) per layer."""
    nodes, inits = [], []
    x = "obs"
    layers = _linears(model)
    for i, (lin, act) in enumerate(layers):
        w = lin.weight.detach().cpu().numpy().T.astype(np.float32)
        b = lin.bias.detach().cpu().numpy().astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        y = "q" if i == len(layers) - 1 else f"h{i}"
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"a{i}"]),
        ]
        nodes.append(helper.make_node(act, [f"a{i}"], [y]))
        x = y
    return _save(nodes, inits, obs_dim, layers[-1][0].out_features, path)


def _int8_weights(lin: nn.Linear, per_channel: bool) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 codes ``(out, in)`` in [-127, 127] and their scale (scalar, or one per output unit)."""
    w = lin.weight.detach().cpu().numpy().astype(np.float32)
    codes, qp = affine.quantize_tensor(w, 8, symmetric=True, axis=0 if per_channel else None)
    return codes.astype(np.int8), np.asarray(qp.scale, np.float32)


def export_int8(model: nn.Sequential, obs_dim: int, path: str | Path, per_channel: bool = False) -> Path:
    """int8 graph: dynamically quantized uint8 activations x uint8-stored symmetric int8 weights.

    The weight codes are the symmetric int8 codes of :mod:`actorq.quantize.affine`, stored as ``code + 128``
    with zero point 128 so that ONNX Runtime runs its u8 x u8 kernels, exact on every CPU (module docstring).

    Args:
        model: Linear/ReLU/Tanh MLP.
        obs_dim: Input width.
        path: Output ``.onnx``.
        per_channel: One weight scale per output unit (else per tensor).
    """
    nodes, inits = [], []
    x = "obs"
    layers = _linears(model)
    for i, (lin, act) in enumerate(layers):
        codes, scale = _int8_weights(lin, per_channel)
        wq = (codes.T.astype(np.int16) + WEIGHT_ZERO_POINT).astype(np.uint8)  # (in, out)
        inits += [
            numpy_helper.from_array(np.ascontiguousarray(wq), f"wq{i}"),
            numpy_helper.from_array(np.full(scale.shape, WEIGHT_ZERO_POINT, np.uint8), f"wz{i}"),
            numpy_helper.from_array(scale, f"ws{i}"),
            numpy_helper.from_array(lin.bias.detach().cpu().numpy().astype(np.float32), f"b{i}"),
        ]
        y = "q" if i == len(layers) - 1 else f"h{i}"
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [f"xq{i}", f"xs{i}", f"xz{i}"]),
            helper.make_node("MatMulInteger", [f"xq{i}", f"wq{i}", f"xz{i}", f"wz{i}"], [f"mi{i}"]),
            helper.make_node("Cast", [f"mi{i}"], [f"mf{i}"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"xs{i}", f"ws{i}"], [f"sc{i}"]),
            helper.make_node("Mul", [f"mf{i}", f"sc{i}"], [f"dq{i}"]),
            helper.make_node("Add", [f"dq{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node(act, [f"a{i}"], [y]),
        ]
        x = y
    return _save(nodes, inits, obs_dim, layers[-1][0].out_features, path)


def _dynamic_quantize(x: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """ONNX ``DynamicQuantizeLinear``: uint8 codes over ``[min(x, 0), max(x, 0)]`` of the whole tensor."""
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    if hi == lo:  # all zeros: every code is the zero point and the scale multiplies nothing
        return np.zeros(x.shape, np.int64), np.float32(0.0), 0
    scale = np.float32(np.float32(hi - lo) / np.float32(255))
    zero = int(np.clip(np.rint(-np.float32(lo) / scale), 0, 255))
    return np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.int64), scale, zero


def reference_int8(model: nn.Sequential, obs: np.ndarray, per_channel: bool = False) -> np.ndarray:
    """What :func:`export_int8`'s graph computes with exact integer arithmetic (numpy, int64 accumulation).

    A runtime's output for the same ``obs`` batch (one ``run`` call: activation ranges are per call) should
    match this to float rounding; a kernel that saturates its accumulation does not.
    """
    h = np.asarray(obs, np.float32)
    for lin, act in _linears(model):
        codes, wscale = _int8_weights(lin, per_channel)
        xq, xscale, xzero = _dynamic_quantize(h)
        acc = (xq - xzero) @ codes.T.astype(np.int64)
        h = acc.astype(np.float32) * (xscale * wscale) + lin.bias.detach().cpu().numpy().astype(np.float32)
        if act == "Relu":
            h = np.maximum(h, np.float32(0))
        elif act == "Tanh":
            h = np.tanh(h)
    return h


def _save(nodes: list, inits: list, obs_dim: int, n_out: int, path: str | Path) -> Path:
    inp, out = _io(obs_dim, n_out)
    graph = helper.make_graph(nodes, "policy", [inp], [out], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="actorq")
    m.ir_version = 7  # readable by every onnxruntime since 1.6
    onnx.checker.check_model(m)
    path = Path(path)
    onnx.save(m, str(path))
    return path
