"""The GPU learner's lock (docker/requirements.learner-gpu.lock, written by `make lock`): requirements-runtime.lock's
pins with tensorflow in place of tensorflow-cpu, no torch, the CUDA 11 / cuDNN 8 wheels TF 2.8 loads; and it resolves
from the registry."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_LOCK = ROOT / "docker" / "requirements.learner-gpu.lock"
CPU_LOCK = ROOT / "requirements-runtime.lock"
LEFT_OUT = re.compile(r"^(torch|triton|nvidia-.*-cu12)$")
"""The runtime's pins the GPU lock leaves out: torch and what comes with it (the learner never imports torch)."""


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_the_gpu_lock_is_the_cpu_lock_with_tensorflow_and_cuda_11_and_without_torch():
    gpu, cpu = _pins(GPU_LOCK), _pins(CPU_LOCK)
    assert gpu["tensorflow"] == cpu["tensorflow-cpu"] == "2.8.4" and "tensorflow-cpu" not in gpu
    assert not [name for name in gpu if LEFT_OUT.match(name)]
    for name, version in cpu.items():
        if name == "tensorflow-cpu" or LEFT_OUT.match(name):
            continue
        assert gpu.get(name) == version, (
            f"{name}: {gpu.get(name)} in the GPU lock, {version} in requirements.lock"
        )
    cuda = {name: v for name, v in gpu.items() if name.startswith("nvidia-") and name.endswith("-cu11")}
    assert cuda["nvidia-cudnn-cu11"].startswith("8.")  # TF 2.8 opens libcudnn.so.8
    assert cuda["nvidia-cuda-runtime-cu11"].startswith("11.")
    assert {"nvidia-cublas-cu11", "nvidia-cufft-cu11", "nvidia-curand-cu11", "nvidia-cusolver-cu11",
            "nvidia-cusparse-cu11"} <= set(cuda)  # fmt: skip


def _index_answers() -> bool:
    try:
        probe = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "nvidia-cudnn-cu11"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0 and "8.9.6.50" in probe.stdout


@pytest.mark.slow
def test_pip_resolves_the_gpu_lock(tmp_path):
    if not _index_answers():
        pytest.skip(
            "no package index answers (pip index versions nvidia-cudnn-cu11 failed): cannot resolve the lock"
        )
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
         str(report), "-r", str(GPU_LOCK)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    resolved = {
        i["metadata"]["name"].lower().replace("_", "-") for i in json.loads(report.read_text())["install"]
    }
    assert "tensorflow" in resolved and "nvidia-cudnn-cu11" in resolved
    assert "torch" not in resolved and not [n for n in resolved if n.endswith("-cu12")]
