"""docker/: the images install the project's pins, and compose starts a consistent topology.

What can be checked without a Docker engine: the Dockerfiles install from requirements.lock with the same TensorFlow
as the CPU stack (the learner's GPU build swaps only the package name), run as an unprivileged user with a health
check, and every compose service's command is a valid ``actorq role`` command line (parsed by the real CLI parser)
that agrees with the others on the replay address, actor indices and actor count; with docker/compose.cpu.yaml no
service asks for a GPU. ``docker-compose config`` runs too where a compose tool is installed. Building the images
and running the stack is tests/containers (marker ``docker``).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from actorq.cli import build_parser
from actorq.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def _instructions(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = (DOCKER / name).read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^(\w+)\s+(.*)$", joined, re.M)]


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split(";")[0].strip().split("==")
            pins[name.lower()] = version
    return pins


def test_worker_image_installs_the_runtime_lock_and_ray_only():
    ins = _instructions("Dockerfile.worker")
    assert ins[0] == ("FROM", "python:3.10-slim")
    runs = " && ".join(arg for op, arg in ins if op == "RUN")
    m = re.search(
        r"pip install --no-cache-dir -r requirements-runtime\.lock -c requirements\.lock (.*?) &&", runs
    )
    assert m and m.group(1).split() == ["ray"], (
        runs
    )  # the runtime, and Ray for the KubeRay nodes: no lab, no tools
    assert "pip install --no-cache-dir --no-deps -e ." in runs
    copied = {word for op, arg in ins if op == "COPY" for word in arg.split()[:-1]}
    assert {"actorq", "configs", "requirements.lock", "requirements-runtime.lock"} <= copied
    assert ins[-1] == ("ENTRYPOINT", '["actorq", "role"]')


def test_learner_image_installs_the_gpu_lock_from_the_registry_without_a_cuda_base():
    ins = _instructions("Dockerfile.learner")
    # No CUDA base image: the CUDA 11 / cuDNN 8 libraries TF 2.8 loads come from the nvidia-*-cu11 wheels of
    # docker/requirements.learner-gpu.lock (checked against requirements-runtime.lock in test_learner_gpu_lock.py).
    assert ins[0] == ("FROM", _instructions("Dockerfile.worker")[0][1]) and "cuda" not in ins[0][1]
    assert ("COPY", "requirements.lock docker/requirements.learner-gpu.lock ./") in ins
    runs = " && ".join(arg for op, arg in ins if op == "RUN")
    m = re.search(
        r"pip install --no-cache-dir -r requirements\.learner-gpu\.lock -c requirements\.lock (.*?) &&", runs
    )
    assert m and m.group(1).split() == ["ray"], runs  # the GPU lock, and Ray as in the worker image
    assert 'python -c "import torch"' in runs  # the build fails if torch got in
    tf = _lock()["tensorflow-cpu"]
    assert f"tensorflow=={tf}" in (ROOT / "docker" / "requirements.learner-gpu.lock").read_text().splitlines()
    assert re.search(
        r'"tensorflow-cpu>=2\.8\.\d+,<2\.9', (ROOT / "pyproject.toml").read_text()
    ) and tf.startswith("2.8.")
    assert ins[-1] == ("ENTRYPOINT", '["actorq", "role"]')


def _interpolate(text: str) -> str:
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: m.group(2), text)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(_interpolate((DOCKER / "compose.yaml").read_text()))


def test_compose_services_run_a_consistent_topology(compose):
    services = compose["services"]
    parser = build_parser()
    parsed = {}
    for name, svc in services.items():
        argv = svc["command"]
        assert all(isinstance(a, str) for a in argv), f"{name}: command items must be strings"
        args, extra = parser.parse_known_args(["role", *argv])
        assert not [e for e in extra if "=" not in e], f"{name}: unknown arguments {extra}"
        args.overrides = list(args.overrides or []) + extra
        parsed[name] = args
        assert svc.get("entrypoint") is None, (
            f"{name}: roles start through the image's `actorq role` entrypoint"
        )
        assert any(v.endswith(":/run-dir") for v in svc["volumes"]) and args.run_dir == "/run-dir"
    roles = sorted(a.role for a in parsed.values())
    assert roles.count("replay") == roles.count("learner") == roles.count("quantizer") == 1

    replay = next(n for n, a in parsed.items() if a.role == "replay")
    port = parsed[replay].port
    # The health check reads the port from replay's heartbeat (actorq/roles/health.py) and connects to it.
    assert services[replay]["healthcheck"]["test"] == ["CMD", "python", "-m", "actorq.roles.health"]
    for name, args in parsed.items():
        config = load_config(ROOT / args.config, args.overrides)  # the default config exists and is valid
        if name == replay:
            continue
        assert args.replay_address == f"{replay}:{port}", name
        assert services[name]["depends_on"][replay]["condition"] == "service_healthy"
        if args.role == "actor":
            assert config.actor.num_actors == sum(a.role == "actor" for a in parsed.values()), name
    indices = sorted(a.index for a in parsed.values() if a.role == "actor")
    assert indices == list(range(len(indices))) and len(indices) >= 1, "actor indices must be 0..N-1, unique"


def _gpu(svc: dict) -> bool:
    devices = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    return svc.get("runtime") == "nvidia" or any("gpu" in d.get("capabilities", []) for d in devices)


def test_only_the_learner_gets_a_gpu(compose):
    for name, svc in compose["services"].items():
        if svc["command"][0] == "learner":
            assert _gpu(svc) and svc["image"].startswith("actorq-learner")
            assert svc["build"]["dockerfile"] == "docker/Dockerfile.learner"
            # Through the runtime, a scalar an override file can replace (compose v1 cannot remove a `deploy`).
            assert "deploy" not in svc
        else:
            assert not _gpu(svc) and svc["image"].startswith("actorq-worker"), name
            assert svc["environment"]["NVIDIA_VISIBLE_DEVICES"] == "", name


def _merge(base: dict, override: dict) -> dict:
    """Compose's override rule for what compose.cpu.yaml uses: mappings merge key by key, scalars are replaced."""
    out = dict(base)
    for key, value in override.items():
        out[key] = (
            _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
        )
    return out


def test_cpu_override_runs_the_learner_from_the_worker_image_without_a_gpu(compose):
    override = yaml.safe_load((DOCKER / "compose.cpu.yaml").read_text())
    merged = _merge(compose, override)
    assert set(merged["services"]) == set(compose["services"])
    for name, svc in merged["services"].items():
        assert not _gpu(svc), f"{name} still asks for a GPU with compose.cpu.yaml"
        assert svc["image"] == "actorq-worker:latest", name
        assert svc["environment"]["NVIDIA_VISIBLE_DEVICES"] == "", name
    assert merged["services"]["learner"]["build"]["dockerfile"] == "docker/Dockerfile.worker"
    assert merged["services"]["learner"]["command"] == compose["services"]["learner"]["command"]


@pytest.mark.parametrize("name", ["Dockerfile.worker", "Dockerfile.learner"])
def test_images_run_unprivileged_with_a_health_check_and_a_clean_pip_check(name):
    ins = _instructions(name)
    ops = [op for op, _ in ins]
    users = [arg for op, arg in ins if op == "USER"]
    assert users and users[-1] not in ("root", "0"), f"{name} must end as an unprivileged user"
    assert ops.index("USER") > max(i for i, op in enumerate(ops) if op == "RUN"), "USER after the last RUN"
    health = [arg for op, arg in ins if op == "HEALTHCHECK"]
    assert health and health[-1].endswith('CMD ["python", "-m", "actorq.roles.health"]'), name
    env = " ".join(arg for op, arg in ins if op == "ENV")
    assert "ACTORQ_HEALTH_FILE=" in env, f"{name}: roles write their heartbeat only where the variable is set"
    runs = [arg for op, arg in ins if op == "RUN"]
    assert "pip check" in runs[-1], f"{name}: the last install step must end with `pip check`"
    for arg in runs:
        if "pip install" in arg:
            assert "--no-cache-dir" in arg, f"{name}: pip's cache would stay in the layer"
        if "apt-get install" in arg:
            assert "rm -rf /var/lib/apt/lists/*" in arg, f"{name}: apt's lists would stay in the layer"


def _ignore_rules(path: Path) -> list[str]:
    return [line for line in path.read_text().split("\n") if line.strip() and not line.startswith("#")]


def test_build_contexts_ignore_everything_the_images_do_not_copy():
    # BuildKit reads docker/<Dockerfile>.dockerignore, the classic builder and docker-compose v1 the root one.
    root_rules = _ignore_rules(ROOT / ".dockerignore")
    for name in ("Dockerfile.worker", "Dockerfile.learner"):
        rules = _ignore_rules(DOCKER / f"{name}.dockerignore")
        assert rules == root_rules, f"{name}.dockerignore and .dockerignore disagree"
        assert rules[0] == "*"
        for op, arg in _instructions(name):
            for path in shlex.split(arg)[:-1] if op == "COPY" else []:
                assert f"!{path}" in rules, f"{name} copies {path} but its .dockerignore leaves it out"
    for kept_out in (".venv", "runs", "reports", ".git"):
        assert f"!{kept_out}" not in root_rules


@pytest.mark.subprocess
@pytest.mark.skipif(
    not (shutil.which("docker-compose") or shutil.which("docker")), reason="no compose tool installed"
)
def test_compose_tool_accepts_the_file():
    tool = [shutil.which("docker-compose")] if shutil.which("docker-compose") else ["docker", "compose"]
    for files in (["compose.yaml"], ["compose.yaml", "compose.cpu.yaml"]):
        result = subprocess.run(
            [*tool, *(a for f in files for a in ("-f", str(DOCKER / f))), "config", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if tool[0].endswith("docker") and "unknown" in (result.stderr + result.stdout):
            pytest.skip("docker is installed without the compose plugin")
        assert result.returncode == 0, f"{files}: {result.stderr}"


def test_weights_key_is_a_docker_secret_and_nothing_is_published(compose):
    """Every role that handles weights reads the run's key from a Docker secret kept outside the run directory;
    no service publishes a port, and the network they share is internal (Reverb has no authentication)."""
    parser = build_parser()
    secret = compose["secrets"]["weights_key"]["file"]
    run_dir_volume = next(v for v in compose["services"]["replay"]["volumes"] if v.endswith(":/run-dir"))
    assert not secret.startswith(run_dir_volume.split(":")[0] + "/"), (
        "the key must not live in the run directory"
    )
    assert compose["networks"]["actorq"]["internal"] is True
    for name, svc in compose["services"].items():
        assert "ports" not in svc, f"{name} publishes a port"
        assert svc["networks"] == ["actorq"], name
        args, _ = parser.parse_known_args(["role", *svc["command"]])
        if args.role == "replay":
            assert "secrets" not in svc and args.weights_key_file is None, "replay never needs the key"
            continue
        assert svc["secrets"] == ["weights_key"], name
        assert args.weights_key_file == "/run/secrets/weights_key" and not args.insecure_weights, name
        assert not any("KEY" in k and "FILE" not in k for k in svc.get("environment", {})), name
