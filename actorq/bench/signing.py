"""``actorq bench signing``: what signing and verifying weight messages costs, on one core.

The message is the paper-size policy's (D4PG 3x2048, obs 24, act 6) at int8 on the wire (~8.5 MB), as the
quantizer publishes it and every actor pulls it. Measured, interleaved per repeat, median and p90 in ms:

* ``sign``: HMAC-SHA256 over the message (``signing.sign``), the quantizer's extra work per publish;
* ``verify``: the same plus the constant-time compare (``signing.verify``), an actor's extra work per new message;
* ``read_header`` without and with the key: the actor's whole pre-decode check (crc32 and header, plus the tag),
  so their difference is what authentication adds to a pull;
* ``encode`` without and with the key: the quantizer's whole encode, likewise.

The process is pinned to one CPU while it measures (hashlib runs on one thread anyway). SHA-256 speed depends on
the CPU's SHA extensions (``sha_ni``), so the CPU model and flags go with the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from actorq.measure.common import cpu_flags, interleave, machine_info, write_json
from actorq.networks.mapping import torch_state_shapes
from actorq.quantize.codec import encode_message, read_header
from actorq.quantize.signing import POLICY_STREAM, TAG_BYTES, generate_key, sign, verify
from actorq.usage import positive_int

log = logging.getLogger(__name__)

TARGET_MS = 5.0
"""Issue 11's budget for each of sign and verify on the 3x2048 int8 message."""


@contextlib.contextmanager
def _one_cpu() -> Iterator[int | None]:
    """Pin this process to one of its CPUs for the duration (where the OS allows it)."""
    if not hasattr(os, "sched_getaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def _paper_state(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = torch_state_shapes("d4pg", 24, 6, (2048, 2048, 2048))
    return {k: (rng.standard_normal(s) * 0.02).astype(np.float32) for k, s in shapes.items()}


def run_signing_bench(repeats: int = 30, json_path: str | None = None) -> dict[str, Any]:
    """Measure sign/verify and the codec paths with and without a key; return (and optionally write) the record."""
    key = generate_key()
    state = _paper_state()
    meta = {"version": 1, "learner_step": 0, "precision": "int8", "comm_bits": 8}
    signed = encode_message(state, key=key, **meta)
    body, tag = signed[:-TAG_BYTES], bytes(signed[-TAG_BYTES:])
    cases: dict[str, Callable[[], object]] = {
        "sign": lambda: sign(key, POLICY_STREAM, body),
        "verify": lambda: verify(key, POLICY_STREAM, body, tag),
        "read_header_unsigned": lambda: read_header(signed),
        "read_header_verified": lambda: read_header(signed, key=key),
        "encode_unsigned": lambda: encode_message(state, **meta),
        "encode_signed": lambda: encode_message(state, key=key, **meta),
    }
    assert verify(key, POLICY_STREAM, body, tag)
    times: dict[str, list[float]] = {name: [] for name in cases}
    with _one_cpu() as cpu:
        for fn in cases.values():  # warm-up: page in the buffers, load OpenSSL
            fn()
        for _, name in interleave(list(cases), repeats):  # drift hits every case alike
            t0 = time.perf_counter()
            cases[name]()
            times[name].append((time.perf_counter() - t0) * 1e3)
    result: dict[str, Any] = {
        "message_bytes": int(signed.nbytes),
        "repeats": repeats,
        "pinned_cpu": cpu,
        "machine": machine_info(),
        "sha_ni": "sha_ni" in cpu_flags(),
        "target_ms": TARGET_MS,
    }
    for name, samples in times.items():
        result[f"{name}_ms"] = float(np.median(samples))
        result[f"{name}_p90_ms"] = float(np.percentile(samples, 90))
    result["verify_overhead_ms"] = result["read_header_verified_ms"] - result["read_header_unsigned_ms"]
    result["sign_overhead_ms"] = result["encode_signed_ms"] - result["encode_unsigned_ms"]
    if json_path:
        write_json(json_path, result)
    return result


def format_result(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"weights-message signing, D4PG 3x2048 int8 message ({r['message_bytes'] / 1e6:.2f} MB), one CPU "
        f"({m.get('cpu', '?')}, sha_ni={'yes' if r['sha_ni'] else 'no'}), {r['repeats']} repeats, median (p90) ms:"
    ]
    for name in (
        "sign",
        "verify",
        "read_header_unsigned",
        "read_header_verified",
        "encode_unsigned",
        "encode_signed",
    ):
        lines.append(f"  {name:<22} {r[f'{name}_ms']:8.2f}  ({r[f'{name}_p90_ms']:.2f})")
    lines.append(
        f"  added per pull (verify in read_header): {r['verify_overhead_ms']:.2f} ms; per publish (sign in encode): "
        f"{r['sign_overhead_ms']:.2f} ms; target <= {r['target_ms']:.0f} ms each"
    )
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    result = run_signing_bench(args.repeats, args.json_path)
    sys.stdout.write(format_result(result) + "\n")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``signing [--repeats N] [--json PATH]`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "signing", help="cost of signing and verifying the 3x2048 int8 weight message on one core"
    )
    parser.add_argument("--repeats", type=positive_int, default=30, help="measurements per case (default 30)")
    parser.add_argument(
        "--json", dest="json_path", metavar="PATH", default=None, help="write the record as JSON"
    )
    parser.set_defaults(func=_main)
    return parser
