"""``actorq bench policy``: every actor kernel on this machine: verified or rejected, its speed, its update cost.

For a large policy (D4PG 3x2048, obs 24, act 6: the ActorQ paper's size), a small one (DQN 2x256, obs 4,
2 actions) and the Atari conv policy (DQN's Nature CNN on 84x84x4 uint8 frames, dense 512, 6 actions; ``--policy``
picks some):

* every registered kernel (:mod:`actorq.actors.kernels`) is verified against fp32 on the full-range probe, as an
  actor does at start: ``verified``, ``rejected`` (with the measured error), ``unavailable`` (with why) or ``n/a``
  (a conv-only kernel on an MLP);
* forward latency of each verified kernel at batch 1/8/64 on one thread (``ActorPolicy.__call__``, numpy in
  and out, as an actor calls it). Repeats interleave the kernels in a rotating order, so machine drift and
  neighbours' load hit all alike; each visit starts with one untimed call (the steady state an actor running one
  policy sees, not the cache refill after another kernel's weights); median and p10/p90 in microseconds;
* batch 1 **cold** as well: each timed call follows a write pass over :data:`EVICT_BYTES`, so the weights come
  from DRAM (and so does everything else the call touches: the runtime's code and buffers, which is most of the
  cold time of a small policy). An actor's loop lies between warm and cold: its env and experience writer evict
  part of the weights between two forwards (measured on an AMD EPYC Zen 2, 3x2048 ``int8/ort-s8r``: 0.31-0.40 ms
  warm, 0.82-0.87 ms cold, 0.40-0.55 ms per step inside ``actorq bench actors`` on different days);
* the weight-streaming floor at batch 1: the policy's weight bytes at the kernel's precision divided by the
  single-core read bandwidth measured now for a working set of that size (no batch-1 forward can beat it; cold:
  divided by the DRAM read bandwidth);
* the weight message at the precision's natural comm width (fp32 -> 32 bits, fp16 -> 16, int8 -> 8, plus int8
  fed 4-bit messages) in bytes, and the update cost: ``decode_message`` + ``prepare`` + ``install`` (median ms;
  ``install_ms`` is what the acting thread pays when the kernel prepares off-thread);
* which kernel an actor would choose per precision (fastest verified at batch 1, and at batch 8 among those
  that verify at batch 8 too: ``actor.envs_per_actor`` 8) and for ``auto`` (fp32 unless another precision is
  faster by more than 3%), and the CPU (model, flags, caches, bandwidth) it all ran on;
* for a conv policy, each layer's time per kernel at batch 1 and 8 (:mod:`actorq.bench.policy_layers`):
  whether a precision's gain comes from the convolutions' arithmetic or the 3136x512 dense layer's weight stream.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.bench.policy_layers import LAYER_BATCHES, format_layers, layer_records
from actorq.config import BYTES_PER_WEIGHT
from actorq.hardware import cpu_summary, hardware_record, read_bandwidth_gbs
from actorq.measure.common import interleave, write_json

logger = logging.getLogger(__name__)

BATCHES = (1, 8, 64)
EVICT_BYTES = 64 << 20
"""Written before each cold call: 4x the largest L3 these machines have, so no weight stays cached."""
COLD = "1c"
"""The cold batch-1 cell's key (``batch`` 1 in records, with ``cold`` true)."""
NATURAL_BITS = {"fp32": (32,), "fp16": (16,), "int8": (8, 4)}


@dataclass(frozen=True)
class PolicyShape:
    name: str
    algorithm: str
    obs_dim: int
    out_dim: int
    layers: tuple[int, ...]
    image: tuple[int, ...] = ()
    """uint8 frames' shape for the Nature CNN torso (empty: an MLP on ``obs_dim`` floats)."""

    def torso(self) -> Any:
        """The conv torso, None for an MLP."""
        from actorq.algorithms.torso import NATURE_CNN, Torso

        return Torso(NATURE_CNN, self.image, pixels=True) if self.image else None

    def spec(self) -> Any:
        from actorq.actors.kernels import PolicySpec

        return PolicySpec.build(self.algorithm, self.obs_dim, self.out_dim, self.layers, torso=self.torso())

    def inputs(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """``batch`` observations as an actor passes them: uint8 frames, or N(0, 1) floats."""
        if self.image:
            return rng.integers(0, 256, (batch, *self.image), dtype=np.uint8)
        return rng.standard_normal((batch, self.obs_dim)).astype(np.float32)


POLICIES = (
    PolicyShape("3x2048", "d4pg", 24, 6, (2048, 2048, 2048)),
    PolicyShape("2x256", "dqn", 4, 2, (256, 256)),
    PolicyShape("atari", "dqn", 84 * 84 * 4, 6, (512,), image=(84, 84, 4)),
)


def _reference_state(shape: PolicyShape, seed: int) -> dict[str, np.ndarray]:
    """Float weights shaped like a trained policy's: torch default init, random biases and LayerNorm."""
    import torch

    torch.manual_seed(seed)
    model = shape.spec().float_model()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.1)
            elif name == "norm.weight":
                p.normal_(1.0, 0.2)
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _percentiles_us(samples: list[float]) -> tuple[float, float, float]:
    p10, p50, p90 = np.percentile(np.asarray(samples) * 1e6, [10, 50, 90])
    return float(p50), float(p10), float(p90)


def _bench_shape(shape: PolicyShape, quick: bool) -> dict[str, Any]:
    """Verify, time and cost every kernel for one policy shape."""
    from actorq.actors.kernels import select_kernel
    from actorq.actors.kernels.select import _choose
    from actorq.actors.policy import ActorPolicy
    from actorq.quantize.codec import decode_message, encode_message

    reps, calls, budget_s, update_reps = (5, 20, 0.015, 3) if quick else (20, 50, 0.06, 10)
    spec = shape.spec()
    _, survey = select_kernel(spec, "auto", use_cache=False, budget_s=0.1)
    # The kernels that verify at envs_per_actor 8 too (exactness may depend on the batch's GEMM path).
    _, survey8 = select_kernel(spec, "auto", batch=8, use_cache=False, budget_s=0.02)
    state = _reference_state(shape, seed=0)
    policies: dict[str, ActorPolicy] = {}
    messages: dict[tuple[str, int], np.ndarray] = {}
    for name in survey.order:
        precision, kernel = name.split("/")
        policy = ActorPolicy(*_args(shape), precision, kernel=kernel, use_cache=False, torso=shape.torso())
        for bits in NATURAL_BITS[precision]:
            messages[(name, bits)] = encode_message(
                state, version=1, learner_step=0, precision=precision, comm_bits=bits
            )
        policy.apply(decode_message(messages[(name, NATURAL_BITS[precision][0])]))  # the first-message check
        policies[name] = policy

    # Update cost: decode + prepare + install, kernels interleaved per repeat.
    updates: dict[tuple[str, int], list[tuple[float, float, float]]] = {k: [] for k in messages}
    for _ in range(update_reps):
        for (name, bits), buf in messages.items():
            policy = policies[name]
            t0 = time.perf_counter()
            msg = decode_message(buf, expected=policy.expected_shapes())
            t1 = time.perf_counter()
            prepared = policy.prepare(msg)
            t2 = time.perf_counter()
            policy.install(prepared)
            t3 = time.perf_counter()
            updates[(name, bits)].append((t1 - t0, t2 - t1, t3 - t2))
            del msg, prepared

    # Forward latency: every (kernel, batch) cell once per repeat, in a rotating order.
    rng = np.random.default_rng(0)
    inputs: dict[Any, np.ndarray] = {b: shape.inputs(rng, b) for b in BATCHES}
    inputs[COLD] = inputs[1]
    evict = np.zeros(EVICT_BYTES, np.uint8)
    cells = [(name, b) for name in policies for b in (*BATCHES, COLD)]
    for name, b in cells:  # warm-up
        policies[name](inputs[b])
    samples: dict[tuple[str, int], list[float]] = {c: [] for c in cells}
    for _, (name, b) in interleave(cells, reps):
        policy, x, out = policies[name], inputs[b], samples[(name, b)]
        # Untimed: refills the caches the other cells' weights evicted, which an actor running one policy
        # never has to do; timing it would charge each kernel for its neighbours in this bench.
        policy(x)
        start = time.perf_counter()
        for _ in range(calls):
            if b == COLD:
                evict += 1  # the weights leave every cache level
            t0 = time.perf_counter()
            policy(x)
            out.append(time.perf_counter() - t0)
            if t0 - start > budget_s:
                break

    tensors = {n: decode_message(messages[(n, NATURAL_BITS[n.split("/")[0]][0])]).tensors for n in policies}
    weights = spec.weight_count()
    bandwidth = {p: read_bandwidth_gbs(weights * nb) for p, nb in BYTES_PER_WEIGHT.items()}
    dram_gbs = read_bandwidth_gbs(EVICT_BYTES)  # the cold calls' floor: every weight byte from DRAM
    chosen_by_batch = {}
    for batch, verified in ((1, survey.order), (8, survey8.order)):
        times = {name: _percentiles_us(samples[(name, batch)])[0] for name in policies if name in verified}
        chosen_by_batch[batch] = {
            p: min((n for n in times if n.startswith(f"{p}/")), key=times.get, default=None)
            for p in BYTES_PER_WEIGHT
        }
        chosen_by_batch[batch]["auto"] = _choose(times, "auto")[0] if times else None
    chosen = chosen_by_batch[1]
    records: list[dict[str, Any]] = []
    for name in [c for c in _all_names()]:
        precision = name.split("/")[0]
        base = {"policy": shape.name, "algorithm": shape.algorithm, "kernel": name, "precision": precision}
        if name in survey.unavailable:
            records.append({**base, "status": "unavailable", "reason": survey.unavailable[name]})
            continue
        if name in survey.not_applicable:
            records.append({**base, "status": "n/a", "reason": survey.not_applicable[name]})
            continue
        if name not in policies:
            reason = next((r["reason"] for r in survey.rejected if r["kernel"] == name), "")
            records.append({**base, "status": "rejected", "error": survey.errors.get(name), "reason": reason})
            continue
        floor_us = weights * BYTES_PER_WEIGHT[precision] / (bandwidth[precision] * 1e9) * 1e6
        cold_floor_us = weights * BYTES_PER_WEIGHT[precision] / (dram_gbs * 1e9) * 1e6
        for bits in NATURAL_BITS[precision]:
            dec, prep, inst = (np.median(np.asarray(updates[(name, bits)]), axis=0) * 1e3).tolist()
            for b in (*BATCHES, COLD):
                med, p10, p90 = _percentiles_us(samples[(name, b)])
                records.append(
                    {
                        **base,
                        "status": "verified",
                        "error": survey.errors.get(name),
                        "chosen": chosen[precision] == name,
                        "chosen_auto": chosen["auto"] == name,
                        "verified_at_8": name in survey8.order,
                        "batch": 1 if b == COLD else b,
                        "cold": b == COLD,
                        "forward_us": round(med, 1),
                        "forward_p10_us": round(p10, 1),
                        "forward_p90_us": round(p90, 1),
                        "floor_us": round(cold_floor_us if b == COLD else floor_us, 1)
                        if b in (1, COLD)
                        else None,
                        "read_gbs": round(bandwidth[precision], 2),
                        "update_ms": round(float(np.median(np.sum(updates[(name, bits)], axis=1)) * 1e3), 3),
                        "decode_ms": round(dec, 3),
                        "prepare_ms": round(prep, 3),
                        "install_ms": round(inst, 4),
                        "prepare_off_thread": policies[name].prepare_off_thread,
                        "message_bytes": int(messages[(name, bits)].nbytes),
                        "comm_bits": bits,
                    }
                )
    return {
        "policy": shape.name,
        "weights": weights,
        "chosen": chosen,
        "chosen_by_batch": chosen_by_batch,
        "rejected_at_8": {r["kernel"]: r["reason"] for r in survey8.rejected},
        "read_gbs": {p: round(v, 2) for p, v in bandwidth.items()},
        "records": records,
        "layers": layer_records(policies, {b: inputs[b] for b in LAYER_BATCHES}, quick, tensors)
        if shape.image
        else [],
    }


def _args(shape: PolicyShape) -> tuple:
    return shape.algorithm, shape.obs_dim, shape.out_dim, shape.layers


def _all_names() -> list[str]:
    from actorq.actors.kernels import CANDIDATES

    return [c.name for c in CANDIDATES]


def run_policy_bench(quick: bool, json_path: str | None, policies: list[str] | None = None) -> dict[str, Any]:
    """Measure every kernel for each policy shape; see the module docstring.

    Args:
        quick: Fewer repeats (about a minute); the full run repeats ~4x more.
        json_path: Where to write the result as JSON (None: don't write).
        policies: Names of the :data:`POLICIES` to measure (None: all).

    Returns:
        ``{"hardware": {...}, "policies": [{"policy", "weights", "chosen": {precision|auto: kernel},
        "read_gbs", "records": [...]}]}``; a record per kernel (``status`` verified / rejected / unavailable / n/a)
        and, for verified ones, per comm width and batch.
    """
    import torch

    torch.set_num_threads(1)
    logger.info("policy bench on %s, torch %s", cpu_summary(), torch.__version__)
    result = {
        "hardware": hardware_record(),
        "torch": torch.__version__,
        "policies": [
            _bench_shape(shape, quick) for shape in POLICIES if not policies or shape.name in policies
        ],
    }
    logger.info("policy bench results:\n%s", format_table(result))
    if json_path:
        write_json(json_path, result)
    return result


def format_table(result: dict[str, Any]) -> str:
    """A readable table: each kernel's status, speed against fp32 and the floor, update cost, the choices."""
    hw = result["hardware"]
    lines = [
        f"CPU: {cpu_summary()}; L2 {hw.get('l2_bytes')} B, L3 {hw.get('l3_bytes')} B, "
        f"DRAM read {hw.get('dram_read_gbs')} GB/s (one core)"
    ]
    head = (
        f"{'policy':<7} {'kernel':<14} {'status':<9} {'error':>7} {'bits':>4} {'batch':>6} {'fwd us':>8} "
        f"{'x fp32':>6} {'floor us':>8} {'/floor':>6} {'update ms':>9} {'install us':>10} {'msg bytes':>10} chosen"
    )
    for shape in result["policies"]:
        recs = shape["records"]
        fp32 = {
            (r["batch"], r.get("cold", False)): r["forward_us"]
            for r in recs
            if r.get("status") == "verified" and r["kernel"] == shape["chosen"].get("fp32")
        }
        lines += ["", head, "-" * len(head)]
        for r in recs:
            error = "-" if r.get("error") is None else f"{r['error']:.3g}"
            if r["status"] != "verified":
                lines.append(
                    f"{r['policy']:<7} {r['kernel']:<14} {r['status']:<9} {error:>7}  {r.get('reason', '')}"
                )
                continue
            marks = ",".join(m for m, on in ((r["precision"], r["chosen"]), ("auto", r["chosen_auto"])) if on)
            floor = (
                f"{r['floor_us']:8.1f} {r['forward_us'] / r['floor_us']:6.2f}"
                if r["floor_us"]
                else f"{'':8} {'':6}"
            )
            speed = fp32.get((r["batch"], r.get("cold", False)), float("nan")) / r["forward_us"]
            batch = f"{r['batch']}{' cold' if r.get('cold') else ''}"
            lines.append(
                f"{r['policy']:<7} {r['kernel']:<14} {'verified':<9} {error:>7} {r['comm_bits']:>4} {batch:>6} "
                f"{r['forward_us']:>8.1f} {speed:>6.2f} {floor} {r['update_ms']:>9.2f} "
                f"{r['install_ms'] * 1e3:>10.1f} {r['message_bytes']:>10d} {marks}"
            )
        for batch, choice in shape.get("chosen_by_batch", {1: shape["chosen"]}).items():
            chosen = ", ".join(f"{p}: {k}" for p, k in choice.items())
            lines.append(f"chosen at batch {batch} ({shape['policy']}): {chosen}")
        for kernel, reason in shape.get("rejected_at_8", {}).items():
            lines.append(f"rejected at batch 8: {kernel}: {reason}")
        lines += format_layers(shape.get("layers", []), shape["policy"])
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    result = run_policy_bench(quick=args.quick, json_path=args.json_path, policies=args.policies)
    sys.stdout.write(format_table(result) + "\n")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``policy [--quick] [--json PATH]`` on the ``actorq bench`` subparsers; ``func`` runs it."""
    parser = subparsers.add_parser(
        "policy",
        help="every actor kernel verified against fp32, timed, its update cost; the choices per precision",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats (about a minute)")
    parser.add_argument(
        "--json", dest="json_path", metavar="PATH", default=None, help="write the result as JSON"
    )
    parser.add_argument(
        "--policy",
        dest="policies",
        action="append",
        choices=[shape.name for shape in POLICIES],
        help="measure only this policy (repeatable; default: all): 3x2048 (D4PG), 2x256 (DQN), atari (DQN, "
        "Nature CNN on 84x84x4 frames, per-layer times)",
    )
    parser.set_defaults(func=_main)
    return parser
