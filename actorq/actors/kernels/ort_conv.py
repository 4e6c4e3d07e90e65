"""The conv torso in an ONNX Runtime graph (:mod:`actorq.actors.kernels.ort_kernels` builds the rest).

Observations enter as the environment gives them (``uint8`` frames are cast and divided by 255, HWC transposed
to ONNX's NCHW); each convolution is ``Conv`` (fp32) or, in int8 graphs, ``ConvInteger`` on per-tensor u8
activations (quantized as the kernel quantizes its Linear layers' inputs) and the message's int8 codes (s8, or
shifted to u8), its int32 sums scaled per output channel (activation scale x the channel's weight scale) plus the
bias; relu follows each; the last output is transposed back to NHWC and flattened, the TF network's feature
order, for the dense layers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from actorq.actors.kernels.base import PolicySpec, conv_names, float32
from actorq.algorithms.torso import PIXEL_SCALE


def conv_torso(
    spec: PolicySpec, conv: Callable, helper, numpy_helper, tensors, inits: list, nodes: list
) -> str:
    """Append the torso's nodes (``conv(helper, numpy_helper, prefix, x, tensors, inits, nodes)`` writes each
    convolution); returns the name of the ``[B, features]`` output."""
    from onnx import TensorProto

    torso = spec.image
    nodes.append(helper.make_node("Cast", ["obs"], ["obs.f"], to=TensorProto.FLOAT))
    x = "obs.f"
    if torso.pixels:
        inits.append(numpy_helper.from_array(np.float32(PIXEL_SCALE).reshape(()), "pixel.scale"))
        nodes.append(helper.make_node("Div", [x, "pixel.scale"], ["obs.s"]))
        x = "obs.s"
    if not torso.channels_first:
        nodes.append(helper.make_node("Transpose", [x], ["obs.nchw"], perm=[0, 3, 1, 2]))
        x = "obs.nchw"
    for prefix in conv_names(spec):
        x = conv(helper, numpy_helper, prefix, x, tensors, inits, nodes)
        nodes.append(helper.make_node("Relu", [x], [f"{prefix}.a"]))
        x = f"{prefix}.a"
    nodes.append(helper.make_node("Transpose", [x], ["conv.nhwc"], perm=[0, 2, 3, 1]))
    nodes.append(helper.make_node("Flatten", ["conv.nhwc"], ["features"], axis=1))
    return "features"


def _stride(spec: PolicySpec, prefix: str) -> list[int]:
    return [spec.image.conv[int(prefix.rsplit(".", 1)[1])].stride] * 2


def float_conv(
    spec: PolicySpec, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list
) -> str:
    """fp32 ``Conv`` (MLAS) of NCHW ``x`` with the message's weights, dequantized when they are codes."""
    inits += [
        numpy_helper.from_array(float32(tensors[f"{prefix}.weight"]), f"{prefix}.w"),
        numpy_helper.from_array(float32(tensors[f"{prefix}.bias"]), f"{prefix}.b"),
    ]
    inputs = [x, f"{prefix}.w", f"{prefix}.b"]
    nodes.append(helper.make_node("Conv", inputs, [f"{prefix}.y"], strides=_stride(spec, prefix)))
    return f"{prefix}.y"


def int8_conv(
    spec: PolicySpec,
    helper,
    numpy_helper,
    prefix: str,
    quantized: tuple[str, str, str],
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    tensors,
    inits: list,
    nodes: list,
) -> str:
    """``ConvInteger`` of u8 activations ``quantized`` = (codes, scale, zero point names) and ``weights`` =
    (``[out, in, kh, kw]`` s8 or u8 codes, their scalar zero point, per-output-channel float32 scales), scaled back
    to float and biased."""
    from onnx import TensorProto

    qx, sx, zx = quantized
    codes, zero, scale = weights
    p = f"{prefix}."
    out = codes.shape[0]
    inits += [
        numpy_helper.from_array(np.ascontiguousarray(codes), f"{p}w"),
        numpy_helper.from_array(np.asarray(zero), f"{p}wz"),
        numpy_helper.from_array(scale.astype(np.float32).reshape(1, out, 1, 1), f"{p}ws"),
        numpy_helper.from_array(float32(tensors[f"{p}bias"]).reshape(1, out, 1, 1), f"{p}b"),
    ]
    node = helper.make_node
    nodes += [
        node("ConvInteger", [qx, f"{p}w", zx, f"{p}wz"], [f"{p}acc"], strides=_stride(spec, prefix)),
        node("Cast", [f"{p}acc"], [f"{p}accf"], to=TensorProto.FLOAT),
        node("Mul", [sx, f"{p}ws"], [f"{p}scale"]),
        node("Mul", [f"{p}accf", f"{p}scale"], [f"{p}yq"]),
        node("Add", [f"{p}yq", f"{p}b"], [f"{p}y"]),
    ]
    return f"{p}y"
