"""Which registered kernels may fail verification on which CPUs, and what a test checks when one does.

A kernel failing verification is a legitimate outcome only where it is explained: the int8 kernels below sum
int8 products in int16 pairs (``vpmaddubsw``) on CPUs without VNNI, and saturate on full-range weights
(/work/shared/STACK.md, "The CPU changes from machine to machine": measured on an AMD EPYC Zen 3, AVX2 only). Every
other rejection, a rejection for anything but accuracy (a kernel that fails to build), a kernel that is not
available in the pinned install, or a rejection without a fallback is a test failure, never a silent pass.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from actorq.actors.kernels import KernelVerificationError, Selection

SATURATE_WITHOUT_VNNI: dict[str, str] = {
    "int8/intmm": "oneDNN",  # torch._int_mm: oneDNN's s8s8s32 GEMM (also when ONEDNN_MAX_CPU_ISA stops below VNNI)
    "int8/ort-s8": "cpu",  # ONNX Runtime s8 x s8 with 8-bit activations
    "int8/ort-u8": "cpu",  # ONNX Runtime u8 x s8 with 8-bit activations (STACK.md: exact only with 7 bits)
}
"""Kernels that may fail verification where the CPU has no VNNI, and what decides it: the CPU's flags, or also
``ONEDNN_MAX_CPU_ISA`` for oneDNN (``make test-avx2``; ONNX Runtime and fbgemm ignore that variable)."""

ONEDNN_WITHOUT_VNNI = {"SSE41", "AVX", "AVX2"}
"""``ONEDNN_MAX_CPU_ISA`` values that keep oneDNN off its VNNI code paths."""

ACCURACY_REASON = re.compile(r"^\w+ probe: .*\(bound ")
"""A rejection for accuracy: a named probe's error against its bound (``verify_probes``'s detail)."""


def cpu_has_vnni() -> bool:
    """Whether this CPU has AVX512-VNNI or AVX-VNNI (int8 dot products without int16 saturation)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []
    )
    return bool({"avx512_vnni", "avx_vnni"} & set(flags))


EXACT_ON_EVERY_CPU = frozenset({"int8/fbgemm"})
"""int8 kernels that accumulate in int32 on every x86_64 CPU of this kind (fbgemm widens before it adds): never
explained by the CPU. Every other int8 GEMM may use ``vpmaddubsw``'s int16 pair sums where there is no VNNI; the
ones seen saturating are :data:`SATURATE_WITHOUT_VNNI`, but CPUs of this kind vary (Zen 2/3, Intel without VNNI),
so on a CPU without VNNI any int8 kernel but these may be rejected, for accuracy, with a fallback."""


def may_fail_verification(name: str) -> bool:
    """Whether kernel ``name`` failing verification here is explained by the CPU (see the module docstring)."""
    if not name.startswith("int8/") or name in EXACT_ON_EVERY_CPU:
        return False
    if not cpu_has_vnni():
        return True
    engine = SATURATE_WITHOUT_VNNI.get(name)
    return engine == "oneDNN" and os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ONEDNN_WITHOUT_VNNI


def applies(selection: Selection, name: str) -> bool:
    """Whether ``name`` was a candidate for the selection's network: a kernel left out is one that differs from
    another only in layers this network does not have (``Kernel.inapplicable``: the conv-only kernels on an MLP)."""
    if name not in selection.not_applicable:
        return True
    assert "no convolutions" in selection.not_applicable[name], selection.not_applicable[name]
    assert name not in selection.order and name not in {r["kernel"] for r in selection.rejected}
    return False


def check_available(selection: Selection, name: str) -> None:
    """Fail (not skip) when the pinned install cannot build ``name`` (ONNX Runtime missing, a torch engine gone)."""
    if name in selection.unavailable:
        pytest.fail(
            f"{name} is not available: {selection.unavailable[name]}; the pinned install (requirements.lock) "
            "provides every registered kernel on x86_64: reinstall the venv"
        )


def check_refused_and_fell_back(
    selection: Selection, name: str, build: Callable[[], object], fallback: Callable[[], Selection]
) -> None:
    """For a kernel ``selection`` did not verify: it is one this CPU explains, it was rejected for accuracy,
    asking for it by name raises naming it and that reason, and selecting its precision falls back to another
    verified kernel of the same precision.

    Args:
        selection: The ``auto`` selection that left ``name`` out.
        name: The kernel (``int8/intmm``).
        build: Builds a policy that asks for ``name`` by name.
        fallback: Selects a kernel of ``name``'s precision (``requested="auto"``).
    """
    rejections = [r for r in selection.rejected if r["kernel"] == name]
    assert len(rejections) == 1, f"{name} was neither verified nor rejected: {selection.describe()}"
    reason = rejections[0]["reason"]
    assert may_fail_verification(name), (
        f"{name} failed verification on {selection.cpu}, which no documented CPU limit explains "
        f"(tests/kernel_outcomes.py): {reason}"
    )
    assert math.isfinite(rejections[0]["error"]) and ACCURACY_REASON.match(reason), (
        f"{name} was rejected for something other than accuracy: {reason}"
    )
    with pytest.raises(KernelVerificationError, match=rf"{re.escape(name)}: \w+ probe: .*\(bound ") as err:
        build()
    assert selection.cpu in str(err.value)
    precision = name.split("/", 1)[0]
    chosen = fallback()
    assert chosen.kernel.startswith(f"{precision}/") and chosen.kernel != name, chosen.describe()
    assert name not in chosen.order and chosen.kernel in chosen.order
    assert name in {r["kernel"] for r in chosen.rejected}, "the fallback did not see the same rejection"
