"""What batching N environments per actor can buy at most on this CPU: the compute floor of a batched forward.

A batch-1 forward of a large policy is bound by streaming its weights (``actorq bench policy``'s floor). A batch-N
forward does N times the multiply-adds on the same weights, so as N grows it becomes compute-bound, and its cost
per env step cannot fall below ``multiply-adds per sample / R``, where ``R`` is this core's GEMM rate at the
precision. ``R`` is measured now, with the library actors use (ONNX Runtime's MLAS on one thread: fp32 ``Gemm``,
int8 ``MatMulInteger`` with u8 activations and s8 weights) on a square layer of the policy's widest hidden size
at batch N. Dividing that floor by the measured N=1 inference per env step gives the smallest ``x n1`` inference
ratio any kernel could reach here, so a missed batching target can be told apart from a slow kernel.

On AVX2 without VNNI an int8 multiply-add costs about what an fp32 one does (``vpmaddubsw`` + ``vpmaddwd`` per 32
products against two 8-wide FMAs per 16), so int8 gains from batching far less than fp32: its batch-1 forward
already reads 4x fewer bytes.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

RATE_PRECISIONS = ("fp32", "int8")
"""Precisions whose GEMM rate is measured (fp16 actors compute in fp32 on x86)."""


def gemm_rate_gmacs(precision: str, batch: int, width: int, seconds: float = 0.3) -> float:
    """Multiply-adds per second (1e9) of one ``[batch, width] x [width, width]`` GEMM, one thread, median.

    Args:
        precision: ``fp32`` (``Gemm``) or ``int8`` (``MatMulInteger``, u8 x s8).
        batch: Rows (the actor's environments).
        width: Inner and output size (the policy's widest hidden layer).
        seconds: Time spent timing (at least 5 calls).
    """
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if precision == "fp32":
        weights = rng.standard_normal((width, width)).astype(np.float32)
        node = helper.make_node("Gemm", ["x", "w"], ["y"])
        x_type, y_type, x = TensorProto.FLOAT, TensorProto.FLOAT, rng.standard_normal((batch, width))
        x = x.astype(np.float32)
    elif precision == "int8":
        weights = rng.integers(-127, 128, (width, width), dtype=np.int8)
        node = helper.make_node("MatMulInteger", ["x", "w"], ["y"])
        x_type, y_type = TensorProto.UINT8, TensorProto.INT32
        x = rng.integers(0, 128, (batch, width), dtype=np.uint8)
    else:
        raise ValueError(f"no GEMM rate for precision {precision!r}; choose from {RATE_PRECISIONS}")
    graph = helper.make_graph(
        [node],
        "gemm_rate",
        [helper.make_tensor_value_info("x", x_type, [batch, width])],
        [helper.make_tensor_value_info("y", y_type, [batch, width])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {"x": x}
    for _ in range(3):
        session.run(None, feeds)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return batch * width * width / float(np.median(times)) / 1e9


def batching_notes(
    rows: list[dict[str, Any]], state: dict[str, np.ndarray], width: int, conv_macs: int = 0
) -> list[str]:
    """Add each N>1 row's inference floor (``inference_floor_ms``, ``inference_floor_vs_one_env``,
    ``gemm_gmacs``) and the env steps/s bound it implies (``steps_bound_vs_one_env``); one note per such row.

    Args:
        rows: :func:`actorq.bench.actors_summary.summarize` rows.
        state: The policy's weights (its multiply-adds per sample are the sum of its matrices' sizes).
        width: The policy's widest hidden layer.
        conv_macs: Multiply-adds of a conv torso per sample (its weights are reused at every output position, so
            their sizes don't count them; ``Torso.multiply_adds``), timed at the same GEMM rate.
    """
    macs = sum(int(v.size) for v in state.values() if v.ndim == 2) + int(conv_macs)
    notes = []
    for row in rows:
        one = _one_env_row(rows, row)
        if row["envs"] <= 1 or row["precision"] not in RATE_PRECISIONS or one is None:
            continue
        ms, one_ms = row["ms_per_step"], one["ms_per_step"]
        if not one_ms["inference"]:
            continue
        rate = gemm_rate_gmacs(row["precision"], row["envs"], width)
        floor_ms = macs / rate / 1e6
        # Wall time per env step from the measured rate, not the sum of the components: an off-thread update's
        # decode and apply are timed too but overlap the acting thread. The rest of the step (env, writer,
        # pulls) stays as measured: batching does not shrink it.
        best_ms = 1e3 / row["steps_per_s"] - ms["inference"] + floor_ms
        row["gemm_gmacs"], row["inference_floor_ms"] = rate, floor_ms
        row["inference_floor_vs_one_env"] = floor_ms / one_ms["inference"]
        row["steps_bound_vs_one_env"] = 1e3 / one["steps_per_s"] / best_ms
        notes.append(
            f"{row['variant']}: inference per env step {ms['inference']:.3f} ms = "
            f"{ms['inference'] / one_ms['inference']:.2f}x N=1's ({one_ms['inference']:.3f} ms). Compute floor at "
            f"batch {row['envs']}: {macs / 1e6:.1f}M multiply-adds per step at this core's {row['precision']} GEMM "
            f"rate ({rate:.1f} GMAC/s, one thread, {width}x{width}) = {floor_ms:.3f} ms = "
            f"{row['inference_floor_vs_one_env']:.2f}x N=1's: no kernel batches below that here. With inference at "
            f"that floor and the rest of the step as measured, env steps/s would be at most "
            f"{row['steps_bound_vs_one_env']:.2f}x N=1's (measured {row.get('vs_one_env') or 0:.2f}x)."
        )
    return notes


def _one_env_row(rows: list[dict[str, Any]], row: dict[str, Any]) -> dict[str, Any] | None:
    """The N=1 row of ``row``'s precision, wire bits and update period (None when the bench ran no N=1)."""
    key = (row["precision"], row["comm_bits"], row["update_period"])
    return next(
        (r for r in rows if r["envs"] == 1 and (r["precision"], r["comm_bits"], r["update_period"]) == key),
        None,
    )
