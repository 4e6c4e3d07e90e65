"""What the container tests need from the machine: a reachable Docker daemon, a compose tool, and the images.

:func:`unusable_reason` says why the tests cannot run here (they skip with it); everything else assumes a daemon.
Images are built with ``docker build`` straight from docker/Dockerfile.worker, as a user would; where no registry
is reachable the base image comes from the test shim in :mod:`tests.containers.stand_in_base`.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.containers import stand_in_base

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
WORKER_IMAGE = "actorq-worker:latest"
IMAGE_UID = 10001
"""The unprivileged user the images run as (docker/Dockerfile.worker): it must own the mounted run dir and key."""
BUILD_NEED_MIB = 16_000
"""Free disk that building the worker image from nothing needs on Docker's data root, in MiB. Measured 2026-11-26
(a fresh `.ci/run`, AMD EPYC Zen 4): the stand-in base and the build peaked 15,524 MiB above the disk's use before
them and settled at 7,980 MiB (the classic builder holds the container's 7.4 GB venv layer and its committed copy at
once). A machine with less would fail the build minutes in with "no space left on device"; it skips instead."""


def compose_tool() -> list[str] | None:
    """``docker-compose`` (v1, Debian's) or the ``docker compose`` plugin, whichever is installed."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


def unusable_reason() -> str | None:
    """Why the container tests cannot run on this machine, or None when they can."""
    if shutil.which("docker") is None:
        return "no docker CLI installed (.ci/run installs docker.io and docker-compose where apt can)"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}\t{{.DockerRootDir}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "docker info timed out: the daemon does not answer"
    version, _, root = info.stdout.strip().partition("\t")
    if info.returncode != 0 or not version:
        said = (info.stderr or info.stdout).strip().splitlines()
        return f"no reachable Docker daemon ({said[-1] if said else f'docker info exit {info.returncode}'})"
    if compose_tool() is None:
        return "docker is installed without a compose tool (docker-compose or the compose plugin)"
    return disk_shortfall(root)


def disk_shortfall(root: str) -> str | None:
    """Why the worker image cannot be built on Docker's data root ``root`` for lack of disk (only when it is not
    built yet), or None."""
    if stand_in_base.image_exists(WORKER_IMAGE):
        return None
    if not root or not Path(root).is_dir():  # a remote daemon (DOCKER_HOST): its disk is not ours to measure
        return None
    free_mib = shutil.disk_usage(root).free // 2**20
    if free_mib >= BUILD_NEED_MIB:
        return None
    return (
        f"building {WORKER_IMAGE} needs about {BUILD_NEED_MIB} MiB free on Docker's data root {root}, which has "
        f"{free_mib} MiB: free some space (docker system prune removes unused images) or move Docker's data-root"
    )


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``docker ARGS`` and return the completed process (text output)."""
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def ensure_base_image() -> str:
    """Make ``python:3.10-slim`` available: already there, pulled, or (offline) the test shim's stand-in."""
    if stand_in_base.image_exists():
        return "present"
    pulled = subprocess.run(
        ["docker", "pull", stand_in_base.TAG], capture_output=True, text=True, timeout=600
    )
    if pulled.returncode == 0:
        return "pulled"
    seconds = stand_in_base.build()
    said = pulled.stderr.strip().splitlines()
    return f"stand-in built in {seconds:.0f} s (pull failed: {said[-1] if said else pulled.returncode})"


def build_worker_image(timeout_s: float = 1800) -> float:
    """``docker build -f docker/Dockerfile.worker -t actorq-worker:latest .`` (cached layers reused); seconds."""
    started = time.monotonic()
    result = subprocess.run(
        ["docker", "build", "-f", "docker/Dockerfile.worker", "-t", WORKER_IMAGE, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise AssertionError(f"building {WORKER_IMAGE} failed:\n{tail}")
    return time.monotonic() - started


@dataclass
class Stack:
    """One compose project (its own name, run directory and key), driven through the compose CLI."""

    project: str
    env: dict[str, str]
    files: tuple[str, ...] = ("compose.yaml", "compose.cpu.yaml")
    tool: list[str] = field(default_factory=lambda: compose_tool() or ["docker-compose"])

    def __call__(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        argv = [*self.tool, "-p", self.project]
        for name in self.files:
            argv += ["-f", str(DOCKER / name)]
        result = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and result.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)} failed: {result.stderr.strip()[-3000:]}")
        return result

    def container(self, service: str) -> str:
        """The id of ``service``'s (single) container."""
        ids = self("ps", "-q", service).stdout.split()
        assert len(ids) == 1, f"{service}: expected one container, got {ids}"
        return ids[0]

    def state(self, service: str) -> dict:
        """``docker inspect``'s State of the service's container, plus its RestartCount and Args."""
        data = json.loads(docker("inspect", self.container(service)).stdout)[0]
        return {**data["State"], "RestartCount": data["RestartCount"], "Args": data["Args"]}

    def logs(self, service: str | None = None) -> str:
        return self("logs", "--no-color", *([service] if service else []), check=False).stdout

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes still labelled with this project."""
        label = f"label=com.docker.compose.project={self.project}"
        return {
            kind: docker(*cmd, "--filter", label, "-q").stdout.split()
            for kind, cmd in {
                "containers": ("ps", "-a"),
                "networks": ("network", "ls"),
                "volumes": ("volume", "ls"),
            }.items()
        }
