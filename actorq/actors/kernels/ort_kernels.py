"""ONNX Runtime kernels: the whole policy network in one session, one Python call per step.

The graph is written directly from the message's tensors (``onnx.helper``; no torch export, no file): ``Gemm``
(fp32) or an int8 matmul (int8 weights with per-output-column scales, activations quantized per tensor to uint8
at run time: ``com.microsoft.DynamicQuantizeMatMul``, or ``MatMulIntegerToFloat`` after a 7-bit quantization)
per Linear layer, ``LayerNormalization`` (opset 17), tanh / elu /
relu, and the D4PG action rescaling. A weight message builds a new session (``prepare``, off the acting thread)
that ``install`` swaps in. In int8 graphs the thin layers (fewer than :data:`INT8_MIN_FEATURES` inputs or
outputs: the observation layer and the action head) run as fp32 ``Gemm`` on the message's dequantized codes:
the same weights, computed more exactly, and cheaper than quantizing their activations (measured on an AMD EPYC
Zen 2, 3x2048: 5 us instead of 15 us for the observation layer).

``forward`` runs through an I/O binding (input bound in place, output into a buffer kept per batch size) rather
than ``InferenceSession.run``, whose per-call output allocation and name lookups cost ~20 us a step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from actorq.actors.kernels import ort_conv
from actorq.actors.kernels.base import Kernel, PolicySpec, float32, int8_codes, prefixes, retire
from actorq.networks.torch_nets import SONNET_LAYER_NORM_EPS
from actorq.quantize.message import EncodedTensor

logger = logging.getLogger(__name__)

OPSET = 17
"""ONNX opset: the first with LayerNormalization (onnx 1.12 writes it, ONNX Runtime 1.23 runs it)."""

INT8_MIN_FEATURES = 32
"""Layers with fewer inputs or outputs run as fp32 ``Gemm`` in int8 graphs (see the module docstring)."""

ACTIVATION_LEVELS_7BIT = 127.0
"""Steps of the 7-bit activation grid of :class:`Int8OrtS8R`: codes ``0..127`` (see its docstring)."""


def _state_tensors(spec: PolicySpec) -> dict[str, EncodedTensor]:
    state = {k: v.numpy() for k, v in spec.float_model().state_dict().items()}
    return {k: EncodedTensor(k, tuple(v.shape), "f32", v, 32) for k, v in state.items()}


class OrtKernel(Kernel):
    """Base: builds the graph from a message; subclasses choose how a Linear layer is written."""

    prepare_off_thread = True
    profile_dir: str | None = None
    """Set on an instance before ``prepare``: its sessions write ONNX Runtime's per-node profile there
    (``actorq bench policy``'s per-layer times)."""

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            return f"onnxruntime/onnx not importable ({exc})"
        return None

    def __init__(self, spec: PolicySpec):
        super().__init__(spec)
        self._session = self.prepare(_state_tensors(spec))
        self._bindings: dict[int, tuple[Any, np.ndarray]] = {}

    # -- graph -------------------------------------------------------------------------------------------------
    def _linear(self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list) -> str:
        w = float32(tensors[f"{prefix}.weight"])
        inits += [
            numpy_helper.from_array(w, f"{prefix}.w"),
            numpy_helper.from_array(float32(tensors[f"{prefix}.bias"]), f"{prefix}.b"),
        ]
        nodes.append(helper.make_node("Gemm", [x, f"{prefix}.w", f"{prefix}.b"], [f"{prefix}.y"], transB=1))
        return f"{prefix}.y"

    def _conv(self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list) -> str:
        """One convolution of a conv torso on NCHW ``x`` (fp32 ``Conv``; int8 graphs override it)."""
        return ort_conv.float_conv(self.spec, helper, numpy_helper, prefix, x, tensors, inits, nodes)

    def _model_bytes(self, tensors: Mapping[str, EncodedTensor]) -> bytes:
        return self.onnx_model(tensors).SerializeToString()

    def onnx_model(self, tensors: Mapping[str, EncodedTensor]) -> Any:
        """The ONNX model (``onnx.ModelProto``) this kernel runs for a message's tensors: input ``obs``
        ``[B, obs_dim]`` float32, output ``out`` ``[B, out_dim]`` float32 (what ``actorq export`` writes)."""
        from onnx import TensorProto, helper, numpy_helper

        spec = self.spec
        net = spec.algo.network
        inits: list = []
        nodes: list = []
        x = "obs"
        if spec.image is not None:
            x = ort_conv.conv_torso(spec, self._conv, helper, numpy_helper, tensors, inits, nodes)
        for i, prefix in enumerate(prefixes(spec)):
            x = self._linear(helper, numpy_helper, prefix, x, tensors, inits, nodes)
            if prefix == "head":
                break
            if i == 0 and net.first_layer_norm:
                inits += [
                    numpy_helper.from_array(float32(tensors["norm.weight"]), "norm.w"),
                    numpy_helper.from_array(float32(tensors["norm.bias"]), "norm.b"),
                ]
                nodes.append(
                    helper.make_node(
                        "LayerNormalization",
                        [x, "norm.w", "norm.b"],
                        ["norm.y"],
                        axis=-1,
                        epsilon=SONNET_LAYER_NORM_EPS,
                    )
                )
                nodes.append(helper.make_node("Tanh", ["norm.y"], [f"{prefix}.a"]))
            elif net.activation == "elu":
                nodes.append(helper.make_node("Elu", [x], [f"{prefix}.a"], alpha=1.0))
            else:
                nodes.append(helper.make_node("Relu", [x], [f"{prefix}.a"]))
            x = f"{prefix}.a"
        if net.bounded_output:
            # TanhToSpec: (tanh(h) + 1) / 2 * (high - low) + low, with the bounds in float32 as the learner has them.
            scale = np.asarray(spec.action_range, np.float32)
            inits += [
                numpy_helper.from_array(np.float32(1.0).reshape(()), "one"),
                numpy_helper.from_array(np.float32(0.5).reshape(()), "half"),
                numpy_helper.from_array(scale, "range"),
                numpy_helper.from_array(np.asarray(spec.action_low, np.float32), "low"),
            ]
            nodes += [
                helper.make_node("Tanh", [x], ["t"]),
                helper.make_node("Add", ["t", "one"], ["t1"]),
                helper.make_node("Mul", ["t1", "half"], ["t2"]),
                helper.make_node("Mul", ["t2", "range"], ["t3"]),
                helper.make_node("Add", ["t3", "low"], ["out"]),
            ]
        else:
            nodes.append(helper.make_node("Identity", [x], ["out"]))
        obs_type = TensorProto.UINT8 if spec.input_dtype == np.uint8 else TensorProto.FLOAT
        graph = helper.make_graph(
            nodes,
            "actorq_policy",
            [helper.make_tensor_value_info("obs", obs_type, [None, *spec.input_shape])],
            [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, spec.out_dim])],
            inits,
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]
        )
        model.ir_version = 8  # what onnxruntime 1.23 and onnx 1.12 agree on
        for node in model.graph.node:  # named by output ("torso.0.y"): a profile's times map to their layer
            node.name = node.name or node.output[0]
        return model

    # -- Kernel ------------------------------------------------------------------------------------------------
    def prepare(self, tensors: Mapping[str, EncodedTensor]) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.spec.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # don't burn the env's core
        options.log_severity_level = 3
        if self.profile_dir:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(self.profile_dir) / self.name.replace("/", "_"))
        return ort.InferenceSession(self._model_bytes(tensors), options, providers=["CPUExecutionProvider"])

    @property
    def session(self) -> Any:
        """The ONNX Runtime session now installed (diagnostics: :meth:`end_profiling` reads its profile)."""
        return self._session

    def install(self, payload: Any) -> None:
        old, self._session = self._session, payload
        self._bindings = {}  # bound to the old session
        retire(old)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=self.spec.input_dtype)
        bound = self._bindings.get(x.shape[0])
        if bound is None:
            out = np.empty((x.shape[0], self.spec.out_dim), np.float32)
            binding = self._session.io_binding()
            binding.bind_output("out", "cpu", 0, np.float32, out.shape, out.ctypes.data)
            bound = self._bindings[x.shape[0]] = (binding, out)
        binding, out = bound
        binding.bind_cpu_input("obs", x)
        self._session.run_with_iobinding(binding)
        return out.copy()  # the buffer is reused by the next call


class Fp32Ort(OrtKernel):
    """fp32 ``Gemm`` in ONNX Runtime (MLAS SGEMM): exact up to float32 reassociation on every CPU. One session
    call per step instead of one torch op per layer, which matters for small policies."""

    name = "fp32/ort"


class Int8OrtS8(OrtKernel):
    """int8 ``DynamicQuantizeMatMul`` with s8 weights (the message's codes as they are) and u8 activations.

    On AVX512-VNNI/AMX MLAS accumulates u8 x s8 exactly in int32. On AVX2-only CPUs its u8s8 kernel uses
    ``vpmaddubsw``, whose int16 pair sums saturate on full-range codes (measured on an AMD EPYC Zen 2: 12% output
    error on a 2048x2048 layer): verification rejects it there; :class:`Int8OrtU8` is the exact variant.
    """

    name = "int8/ort-s8"

    def _linear(self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list) -> str:
        if min(tensors[f"{prefix}.weight"].shape) < INT8_MIN_FEATURES:
            return super()._linear(helper, numpy_helper, prefix, x, tensors, inits, nodes)
        return self._int8_linear(helper, numpy_helper, prefix, x, tensors, inits, nodes)

    def _int8_linear(
        self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list
    ) -> str:
        codes, scale = int8_codes(tensors[f"{prefix}.weight"])
        weights, zero = self._weights(codes)
        inits += [
            numpy_helper.from_array(weights, f"{prefix}.w"),
            numpy_helper.from_array(scale.astype(np.float32), f"{prefix}.s"),
            numpy_helper.from_array(zero, f"{prefix}.z"),
            numpy_helper.from_array(float32(tensors[f"{prefix}.bias"]), f"{prefix}.b"),
        ]
        nodes.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [x, f"{prefix}.w", f"{prefix}.s", f"{prefix}.z", f"{prefix}.b"],
                [f"{prefix}.y"],
                domain="com.microsoft",
            )
        )
        return f"{prefix}.y"

    def _conv(self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list) -> str:
        """A convolution as ``ConvInteger`` on this kernel's quantized activations. ONNX Runtime's CPU
        ``ConvInteger`` takes u8 weights only (1.23), so every int8 graph's convolutions use the codes shifted to
        u8 (zero point 128): MLAS's u8 x u8 path, exact in int32 on AVX2 as on VNNI (:class:`Int8OrtU8`)."""
        quantized = self._quantize_input(helper, numpy_helper, prefix, x, inits, nodes)
        codes, scale = int8_codes(tensors[f"{prefix}.weight"])
        shifted = (codes.astype(np.int16) + 128).astype(np.uint8)
        layer = (shifted, np.uint8(128), scale)
        return ort_conv.int8_conv(
            self.spec, helper, numpy_helper, prefix, quantized, layer, tensors, inits, nodes
        )

    def _quantize_input(self, helper, numpy_helper, prefix: str, x: str, inits: list, nodes: list):
        """``(codes, scale, zero point)`` names of ``x`` quantized per tensor to u8 (``DynamicQuantizeLinear``:
        8-bit, asymmetric)."""
        names = [f"{prefix}.qx", f"{prefix}.sx", f"{prefix}.zx"]
        nodes.append(helper.make_node("DynamicQuantizeLinear", [x], names))
        return tuple(names)

    @staticmethod
    def _weights(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``[in, out]`` weights for the op and their per-column zero points."""
        return np.ascontiguousarray(codes.T), np.zeros(codes.shape[0], np.int8)


class Int8OrtU8(Int8OrtS8):
    """int8 ``DynamicQuantizeMatMul`` with the codes shifted to u8 (``code + 128``, zero point 128).

    The same values as :class:`Int8OrtS8`, but MLAS runs its u8 x u8 kernel, which widens to int16 before
    ``vpmaddwd``: no saturation, exact in int32 on AVX2 as on AVX512 (measured on an AMD EPYC Zen 2: 0.7% output
    error, all of it activation rounding). On VNNI CPUs it may be slower than the s8 variant; timing decides.
    """

    name = "int8/ort-u8"

    @staticmethod
    def _weights(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shifted = (codes.T.astype(np.int16) + 128).astype(np.uint8)
        return np.ascontiguousarray(shifted), np.full(codes.shape[0], 128, np.uint8)


class Int8OrtS8R(Int8OrtS8):
    """int8 ``MatMulIntegerToFloat`` with s8 weights (the message's codes) and 7-bit u8 activations.

    Activations are quantized per tensor, asymmetrically, to ``q = round(x / s) + z`` with
    ``s = (max(x, 0) - min(x, 0)) / 127`` and ``z = round(-min(x, 0) / s)``, so ``q`` lies in ``0..128`` (128 only
    when two roundings meet at .5). Codes are in ``-127..127``. A ``vpmaddubsw`` pair sum is then at most
    ``2 * 128 * 127 = 32512 < 32767``: MLAS's fast u8 x s8 kernel cannot saturate, so the int32 accumulation is
    exact on AVX2-only CPUs (where :class:`Int8OrtS8` saturates) as on AVX512-VNNI/AMX ones. The price is one
    bit of activation resolution, the same trade as torch's ``reduce_range`` on x86 (measured on an AMD EPYC
    Zen 2, 3x2048 D4PG probe: 1.0% of the action range vs 0.6% for :class:`Int8OrtU8`, both well inside the
    3% bound), for a u8 x s8 kernel that reads the packed weights faster than the u8 x u8 one (there: 115 vs
    156 us per 2048x2048 layer).
    """

    name = "int8/ort-s8r"

    def _int8_linear(
        self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list
    ) -> str:
        codes, scale = int8_codes(tensors[f"{prefix}.weight"])
        p = f"{prefix}."
        qx, sx, zx = self._quantize_input(helper, numpy_helper, prefix, x, inits, nodes)
        inits += [
            numpy_helper.from_array(np.ascontiguousarray(codes.T), f"{p}w"),
            numpy_helper.from_array(scale.astype(np.float32), f"{p}s"),
            numpy_helper.from_array(np.zeros(codes.shape[0], np.int8), f"{p}z"),
            numpy_helper.from_array(float32(tensors[f"{p}bias"]), f"{p}b"),
        ]
        nodes.append(
            helper.make_node(
                "MatMulIntegerToFloat",
                [qx, f"{p}w", sx, f"{p}s", zx, f"{p}z", f"{p}b"],
                [f"{p}y"],
                domain="com.microsoft",
            )
        )
        return f"{p}y"

    def _quantize_input(self, helper, numpy_helper, prefix: str, x: str, inits: list, nodes: list):
        """``(codes, scale, zero point)`` names of ``x`` quantized per tensor to the 7-bit grid (class docstring)."""
        from onnx import TensorProto

        if not any(init.name == "q7.levels" for init in inits):
            inits += [
                numpy_helper.from_array(np.float32(0.0).reshape(()), "q7.zero"),
                numpy_helper.from_array(np.float32(ACTIVATION_LEVELS_7BIT).reshape(()), "q7.levels"),
                # all-zero activations: any positive scale quantizes them to the zero point exactly
                numpy_helper.from_array(np.float32(np.finfo(np.float32).tiny).reshape(()), "q7.tiny"),
            ]
        p = f"{prefix}."
        node = helper.make_node
        nodes += [
            node("ReduceMin", [x], [f"{p}min_x"], keepdims=0),
            node("ReduceMax", [x], [f"{p}max_x"], keepdims=0),
            node("Min", [f"{p}min_x", "q7.zero"], [f"{p}lo"]),  # the grid must hold 0 exactly
            node("Max", [f"{p}max_x", "q7.zero"], [f"{p}hi"]),
            node("Sub", [f"{p}hi", f"{p}lo"], [f"{p}span"]),
            node("Div", [f"{p}span", "q7.levels"], [f"{p}s_raw"]),
            node("Max", [f"{p}s_raw", "q7.tiny"], [f"{p}sx"]),
            node("Div", [f"{p}lo", f"{p}sx"], [f"{p}lo_steps"]),
            node("Neg", [f"{p}lo_steps"], [f"{p}z_raw"]),
            node("Round", [f"{p}z_raw"], [f"{p}z_round"]),
            node("Cast", [f"{p}z_round"], [f"{p}zx"], to=TensorProto.UINT8),
            node("QuantizeLinear", [x, f"{p}sx", f"{p}zx"], [f"{p}qx"]),
        ]
        return f"{p}qx", f"{p}sx", f"{p}zx"


class Int8OrtS8RFloatConv(Int8OrtS8R):
    """:class:`Int8OrtS8R`'s dense layers, the convolutions in fp32 (``Conv``, MLAS's blocked NCHWc kernels) on the
    message's int8 codes' values (dequantized: exact).

    A conv layer reuses each weight at every output position, so its cost is arithmetic, where MLAS's fp32 conv
    outran ``ConvInteger`` (u8 x u8, plus quantizing the activations) on the CPUs measured (an Intel Xeon with
    AVX512-VNNI, ``actorq bench policy --policy atari``'s per-layer rows); the 3136x512 dense layer is a weight
    stream, where int8's 4x fewer bytes pay. Only a candidate for conv policies (on an MLP it is ``ort-s8r``).
    """

    name = "int8/ort-s8r-f32conv"

    @classmethod
    def inapplicable(cls, spec: PolicySpec) -> str | None:
        return None if spec.image is not None else "no convolutions in this policy: it would be int8/ort-s8r"

    def _conv(self, helper, numpy_helper, prefix: str, x: str, tensors, inits: list, nodes: list) -> str:
        return ort_conv.float_conv(self.spec, helper, numpy_helper, prefix, x, tensors, inits, nodes)
