"""Every actor inference kernel, by name. The names per precision are :data:`actorq.config.KERNELS` (one list,
validated in configs before any process starts); a test checks that this registry and that list agree."""

from __future__ import annotations

from actorq.actors.kernels.base import Kernel
from actorq.actors.kernels.ort_kernels import Fp32Ort, Int8OrtS8, Int8OrtS8R, Int8OrtS8RFloatConv, Int8OrtU8
from actorq.actors.kernels.torch_kernels import (
    Fp16Fbgemm,
    Fp16Half,
    Fp32Torch,
    Int8Fbgemm,
    Int8IntMM,
    Int8Onednn,
    Int8Qnnpack,
    Int8X86,
)
from actorq.config import KERNELS, PRECISIONS

CANDIDATES: tuple[type[Kernel], ...] = (
    Fp32Torch,
    Fp32Ort,
    Fp16Fbgemm,
    Fp16Half,
    Int8OrtU8,
    Int8OrtS8R,
    Int8OrtS8RFloatConv,
    Int8OrtS8,
    Int8Fbgemm,
    Int8X86,
    Int8Onednn,
    Int8Qnnpack,
    Int8IntMM,
)
"""In this order when times tie; the first of each precision is the reference for nothing: all are verified."""


def full_name(precision: str, kernel: str) -> str:
    """``int8/fbgemm`` from (``int8``, ``fbgemm``) or from a name that is already full."""
    return kernel if "/" in kernel else f"{precision}/{kernel}"


def candidates_for(precision: str, requested: str = "auto") -> list[str]:
    """Kernel names to consider for ``precision`` (or every precision for ``auto``) and a request.

    Raises:
        ValueError: Unknown precision, or a requested kernel that does not belong to ``precision``.
    """
    if precision != "auto" and precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {(*PRECISIONS, 'auto')}")
    names = [c.name for c in CANDIDATES if precision == "auto" or c.name.startswith(f"{precision}/")]
    if requested == "auto":
        return names
    name = full_name(precision, requested)
    if name not in names:
        allowed = ", ".join(["auto", *KERNELS.get(precision, ())])
        raise ValueError(f"kernel {requested!r} is not one of {allowed} for precision {precision}")
    return [name]
