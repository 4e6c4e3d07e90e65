"""ONNX export of MLP policies in fp32 and int8, the int8 codes coming from :mod:`actorq.quantize.affine`.

ONNX Runtime's own quantizer (``onnxruntime.quantization``) needs ``onnx.reference`` (onnx >= 1.13), which the
project's protobuf 3.19 pin (TensorFlow 2.8) rules out, so the int8 graph is written here with the standard
operators its dynamic quantizer emits: ``DynamicQuantizeLinear`` (uint8 activations, range per call) ->
``MatMulInteger`` (int8 weights) -> ``Cast`` -> ``Mul`` by ``x_scale * w_scale`` -> ``Add`` bias. ONNX Runtime
fuses that chain into its int8 GEMM kernels (``MatMulIntegerToFloat``/``DynamicQuantizeMatMul``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from actorq.quantize import affine

OPSET = 13


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


def export_int8(model: nn.Sequential, obs_dim: int, path: str | Path, per_channel: bool = False) -> Path:
    """int8 graph with dynamically quantized uint8 activations and symmetric int8 weights.

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
        w = lin.weight.detach().cpu().numpy().astype(np.float32)  # (out, in)
        codes, qp = affine.quantize_tensor(w, 8, symmetric=True, axis=0 if per_channel else None)
        scale = np.asarray(qp.scale, np.float32)
        inits += [
            numpy_helper.from_array(np.ascontiguousarray(codes.T.astype(np.int8)), f"wq{i}"),
            numpy_helper.from_array(np.zeros(scale.shape, np.int8), f"wz{i}"),
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


def _save(nodes: list, inits: list, obs_dim: int, n_out: int, path: str | Path) -> Path:
    inp, out = _io(obs_dim, n_out)
    graph = helper.make_graph(nodes, "policy", [inp], [out], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="actorq")
    m.ir_version = 7  # readable by every onnxruntime since 1.6
    onnx.checker.check_model(m)
    path = Path(path)
    onnx.save(m, str(path))
    return path
