"""Actor inference kernels: a registry of candidates per precision, each verified against fp32 and timed on the
machine that runs it before an actor uses the fastest (see :mod:`.select`)."""

from actorq.actors.kernels.base import Kernel, PolicySpec
from actorq.actors.kernels.registry import CANDIDATES, candidates_for, full_name
from actorq.actors.kernels.select import Selection, build_kernel, select_kernel, time_kernels
from actorq.actors.kernels.verify import Check, KernelVerificationError, compare, probe_inputs, verify

__all__ = [
    "CANDIDATES",
    "Check",
    "Kernel",
    "KernelVerificationError",
    "PolicySpec",
    "Selection",
    "build_kernel",
    "candidates_for",
    "compare",
    "full_name",
    "probe_inputs",
    "select_kernel",
    "time_kernels",
    "verify",
]
