"""``actorq bench policy``: what each actor precision costs per step and per weight update.

For a large policy (D4PG 3x2048, obs 24, act 6: the ActorQ paper's size) and a small one (DQN 2x256, obs 4,
2 actions) and for each actor variant:

* forward latency at batch 1/8/64 on one thread (``QuantizedPolicy.__call__``, numpy in and out, as an actor
  calls it). Repeats interleave the variants, in a rotating order, so machine drift and neighbours' load hit
  all of them alike; median and p10/p90 over all calls, in microseconds;
* the weight message at the variant's natural comm width (fp32 -> 32 bits, fp16 -> 16, int8 -> 8; plus an
  int8 actor fed 4-bit messages) in bytes on the wire;
* the update cost: ``decode_message`` + ``prepare`` + ``install`` (median ms; ``install_ms`` is the part the
  acting thread pays when an updater thread prepares).

Variants (``precision/kernel``, see :mod:`actorq.actors.policy`): fp32/torch, fp16/half,
fp16/fbgemm (the default fp16), int8/intmm (the default int8) and int8/fbgemm (torch's dynamic-quantized Linear). The int8 actor runs 4-bit codes with the same kernel, so its forward rows are
the int8 ones.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

BATCHES = (1, 8, 64)


@dataclass(frozen=True)
class PolicySpec:
    name: str
    algorithm: str
    obs_dim: int
    out_dim: int
    layers: tuple[int, ...]


@dataclass(frozen=True)
class Variant:
    precision: str
    kernel: str
    comm_bits: int

    @property
    def model_key(self) -> tuple[str, str]:
        return self.precision, self.kernel


POLICIES = (
    PolicySpec("3x2048", "d4pg", 24, 6, (2048, 2048, 2048)),
    PolicySpec("2x256", "dqn", 4, 2, (256, 256)),
)
VARIANTS = (
    Variant("fp32", "torch", 32),
    Variant("fp16", "half", 16),
    Variant("fp16", "fbgemm", 16),
    Variant("int8", "intmm", 8),
    Variant("int8", "intmm", 4),
    Variant("int8", "fbgemm", 8),
)


def _reference_state(spec: PolicySpec, seed: int) -> dict[str, np.ndarray]:
    """Float weights shaped like a trained policy's: torch default init, random biases and LayerNorm."""
    import torch

    from actorq.networks.torch_nets import D4PGPolicy, QNetwork

    torch.manual_seed(seed)
    if spec.algorithm == "d4pg":
        model = D4PGPolicy(spec.obs_dim, spec.out_dim, spec.layers)
    else:
        model = QNetwork(spec.obs_dim, spec.out_dim, spec.layers)
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


def run_policy_bench(quick: bool, json_path: str | None) -> list[dict[str, Any]]:
    """Measure forward latency, message bytes and update cost per policy and actor variant.

    Args:
        quick: Fewer repeats (well under a minute); the full run repeats ~4x more.
        json_path: Where to write the records as a JSON list (None: don't write).

    Returns:
        Records ``{"policy", "algorithm", "precision", "kernel", "batch", "forward_us", "forward_p10_us",
        "forward_p90_us", "update_ms", "decode_ms", "prepare_ms", "install_ms", "message_bytes",
        "comm_bits"}``, one per policy, variant and batch.
    """
    import torch

    from actorq.actors.policy import QuantizedPolicy
    from actorq.quantize.codec import decode_message, encode_message

    reps, calls, budget_s, update_reps = (5, 20, 0.015, 5) if quick else (20, 50, 0.06, 20)
    rng = np.random.default_rng(0)
    policies: dict[tuple[str, str, str], QuantizedPolicy] = {}
    messages: dict[tuple[str, Variant], np.ndarray] = {}
    for spec in POLICIES:
        state = _reference_state(spec, seed=0)
        for v in VARIANTS:
            key = (spec.name, *v.model_key)
            if key not in policies:
                policies[key] = QuantizedPolicy(
                    spec.algorithm,
                    spec.obs_dim,
                    spec.out_dim,
                    spec.layers,
                    v.precision,
                    -1.0,
                    1.0,
                    1,
                    v.kernel,
                )
            messages[(spec.name, v)] = encode_message(
                state, version=1, learner_step=0, precision=v.precision, comm_bits=v.comm_bits
            )
            policies[key].apply(decode_message(messages[(spec.name, v)]))
    logger.info(
        "policy bench: torch %s, %s, %d threads",
        torch.__version__,
        platform.processor() or "cpu",
        torch.get_num_threads(),
    )

    # Update cost: decode + prepare + install, variants interleaved per repeat.
    updates: dict[tuple[str, Variant], list[tuple[float, float, float]]] = {k: [] for k in messages}
    for _ in range(update_reps):
        for (name, v), buf in messages.items():
            policy = policies[(name, *v.model_key)]
            t0 = time.perf_counter()
            msg = decode_message(buf, expected=policy.expected_shapes())
            t1 = time.perf_counter()
            prepared = policy.prepare(msg)
            t2 = time.perf_counter()
            policy.install(prepared)
            t3 = time.perf_counter()
            updates[(name, v)].append((t1 - t0, t2 - t1, t3 - t2))
            del msg, prepared

    # Forward latency: every (policy, model, batch) cell once per repeat, in a rotating order.
    inputs = {
        (s.name, b): rng.standard_normal((b, s.obs_dim)).astype(np.float32) for s in POLICIES for b in BATCHES
    }
    cells = [(key, b) for key in policies for b in BATCHES]
    for key, b in cells:  # warm-up
        policies[key](inputs[(key[0], b)])
    samples: dict[tuple[tuple[str, str, str], int], list[float]] = {c: [] for c in cells}
    for rep in range(reps):
        shift = rep % len(cells)
        for key, b in cells[shift:] + cells[:shift]:
            policy, x, out = policies[key], inputs[(key[0], b)], samples[(key, b)]
            start = time.perf_counter()
            for _ in range(calls):
                t0 = time.perf_counter()
                policy(x)
                out.append(time.perf_counter() - t0)
                if t0 - start > budget_s:
                    break

    records = []
    for spec in POLICIES:
        for v in VARIANTS:
            dec, prep, inst = (np.median(np.asarray(updates[(spec.name, v)]), axis=0) * 1e3).tolist()
            for b in BATCHES:
                med, p10, p90 = _percentiles_us(samples[((spec.name, *v.model_key), b)])
                records.append(
                    {
                        "policy": spec.name,
                        "algorithm": spec.algorithm,
                        "precision": v.precision,
                        "kernel": v.kernel,
                        "batch": b,
                        "forward_us": round(med, 1),
                        "forward_p10_us": round(p10, 1),
                        "forward_p90_us": round(p90, 1),
                        "update_ms": round(
                            float(np.median(np.sum(updates[(spec.name, v)], axis=1)) * 1e3), 3
                        ),
                        "decode_ms": round(dec, 3),
                        "prepare_ms": round(prep, 3),
                        "install_ms": round(inst, 4),
                        "message_bytes": int(messages[(spec.name, v)].nbytes),
                        "comm_bits": v.comm_bits,
                    }
                )
    logger.info("policy bench results:\n%s", format_table(records))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(records, f, indent=1)
        logger.info("wrote %d records to %s", len(records), json_path)
    return records


def format_table(records: list[dict[str, Any]]) -> str:
    """A readable table of bench records, with each variant's fp32 ratios (forward speed-up, update cost)."""
    fp32 = {(r["policy"], r["batch"]): r for r in records if r["precision"] == "fp32"}
    head = (
        f"{'policy':<7} {'actor':<12} {'bits':>4} {'batch':>5} {'fwd us':>9} {'p10-p90 us':>17} {'x fp32':>6} "
        f"{'update ms':>9} {'/fp32':>5} {'install us':>10} {'msg bytes':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in records:
        base = fp32[(r["policy"], r["batch"])]
        actor = f"{r['precision']}/{r['kernel']}"
        lines.append(
            f"{r['policy']:<7} {actor:<12} {r['comm_bits']:>4} {r['batch']:>5} {r['forward_us']:>9.1f} "
            f"{r['forward_p10_us']:>8.1f}-{r['forward_p90_us']:<8.1f} {base['forward_us'] / r['forward_us']:>6.2f} "
            f"{r['update_ms']:>9.2f} {r['update_ms'] / base['update_ms']:>5.2f} {r['install_ms'] * 1e3:>10.1f} "
            f"{r['message_bytes']:>10d}"
        )
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    records = run_policy_bench(quick=args.quick, json_path=args.json_path)
    sys.stdout.write(format_table(records) + "\n")
    if args.json_path:
        sys.stdout.write(f"wrote {len(records)} records to {args.json_path}\n")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``policy [--quick] [--json PATH]`` on the ``actorq bench`` subparsers; ``func`` runs it."""
    parser = subparsers.add_parser(
        "policy",
        help="actor inference latency, update cost and message size per precision",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats (under a minute)")
    parser.add_argument(
        "--json", dest="json_path", metavar="PATH", default=None, help="write records as JSON"
    )
    parser.set_defaults(func=_main)
    return parser
