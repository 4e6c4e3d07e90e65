"""The learner's GPU libraries from the registry's ``nvidia-*-cu11`` wheels, loaded before TensorFlow loads.

TensorFlow 2.8.4 (built against CUDA 11.2 and cuDNN 8.1) finds CUDA by ``dlopen`` of sonames such as
``libcudart.so.11.0`` and ``libcudnn.so.8``. The registry's ``nvidia-*-cu11`` wheels (``docker/requirements.learner-
gpu.lock``) put those libraries in ``site-packages/nvidia/<package>/lib``, where the dynamic loader does not look, and
``LD_LIBRARY_PATH`` is read once, when a process starts: setting it inside the learner is too late. So the learner's
process loads each library itself, by path and with ``RTLD_GLOBAL``, before its first ``import tensorflow``
(:func:`preload`, called by ``python -m actorq.roles learner``); TensorFlow's later ``dlopen`` by soname then finds
the library already loaded. Only TF 2.8's sonames (:data:`SONAMES`) are loaded: torch's ``nvidia-*-cu12`` wheels share
the ``nvidia`` folder (and some sonames: ``libcurand.so.10``), so nothing is loaded without the CUDA 11 runtime
``libcudart.so.11.0``; the learner's image has no torch (the learner never imports it), whose cu12 wheels would
overwrite the cu11 ones' folders. Without the wheels nothing is loaded and TensorFlow runs on the CPU.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

SONAMES = (
    r"libcudart\.so\.11\.0",
    r"libcublasLt\.so\.11",
    r"libcublas\.so\.11",
    r"libcufft\.so\.10",
    r"libcurand\.so\.10",
    r"libcusparse\.so\.11",
    r"libcusolver\.so\.11",
    r"libcupti\.so\.11\.\d+",
    r"libcudnn_\w+\.so\.8",
    r"libcudnn\.so\.8",
)
"""The libraries TensorFlow 2.8 opens, in the order they are loaded (each after those it links against; cuDNN's
parts before ``libcudnn.so.8``, which opens them by name)."""


def library_dirs() -> list[Path]:
    """``site-packages/nvidia/*/lib`` folders of the installed ``nvidia-*`` wheels (none when not installed)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(
        p / "lib"
        for root in spec.submodule_search_locations
        for p in Path(root).iterdir()
        if (p / "lib").is_dir()
    )


def library_files(dirs: list[Path]) -> list[Path]:
    """The files in ``dirs`` named as one of :data:`SONAMES`, in that order."""
    files = [f for d in dirs for f in d.iterdir()]
    return [f for pattern in SONAMES for f in sorted(files) if re.fullmatch(pattern, f.name)]


def preload(dirs: list[Path] | None = None) -> list[str]:
    """Load TF 2.8's CUDA libraries from the ``nvidia-*-cu11`` wheels (:func:`library_files`) into this process,
    globally, before TensorFlow is imported; returns the names loaded. Also puts their folders first on
    ``LD_LIBRARY_PATH`` for processes this one starts. A library that fails to load is logged and skipped:
    TensorFlow then says which one it misses and runs on the CPU."""
    dirs = library_dirs() if dirs is None else dirs
    files = library_files(dirs)
    if not any(f.name == "libcudart.so.11.0" for f in files):
        return []  # no CUDA 11 runtime: torch's cu12 wheels share some sonames (libcurand.so.10), never load those
    loaded = []
    for path in files:
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            loaded.append(path.name)
        except OSError as exc:
            log.warning("could not load %s: %s", path, exc)
    if loaded:
        used = sorted({str(p.parent) for p in files})
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
            [*used, os.environ.get("LD_LIBRARY_PATH", "")]
        ).rstrip(os.pathsep)
        log.info("CUDA libraries for TensorFlow from the nvidia-*-cu11 wheels: %s", ", ".join(loaded))
    return loaded
