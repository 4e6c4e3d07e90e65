"""docker/kuberay/: the KubeRay manifests are valid for their API versions and keep ActorQ's invariants.

No cluster and no network: the core objects (Namespace, Service, NetworkPolicy, PersistentVolumeClaims, and each Ray
pod template as a core PodTemplate) go through ``kubernetes-validate`` in strict mode at Kubernetes 1.33 (the API
version KubeRay v1.4.2 is built against); the RayCluster goes through the openAPIV3Schema of KubeRay v1.4.2's CRD
(stored in tests/data/kuberay with its source) plus a check for fields the schema does not know, which the API server
would reject or silently drop. Then the invariants: replay only behind a ClusterIP Service, the weights key only as a
mounted Secret named by ACTORQ_WEIGHTS_KEY_FILE, non-root containers, a GPU for the learner group alone, the
placement resources the ray config names, /dev/shm large enough for the object store, and a README command line
that agrees with all of it.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from actorq.config import schema as config_schema
from actorq.weights_key import KEY_ENV

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "docker" / "kuberay"
CRD_SCHEMA = ROOT / "tests" / "data" / "kuberay" / "raycluster-v1-openapiv3.v1.4.2.json"
KUBERNETES_VERSION = "1.33.0"
SECRET_NAME = "actorq-weights-key"


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KUBERAY / name).read_text()) if d is not None]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return _documents("namespace.yaml") + _documents("raycluster.yaml")


@pytest.fixture(scope="module")
def cluster(objects) -> dict[str, Any]:
    (rc,) = [o for o in objects if o["kind"] == "RayCluster"]
    return rc


def _groups(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Group name -> group spec; the head group is "head"."""
    return {"head": cluster["spec"]["headGroupSpec"]} | {
        g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]
    }


def _ray_container(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]["containers"][0]  # KubeRay runs `ray start` in the first container


def _start_resources(group: dict[str, Any]) -> dict[str, float]:
    """The custom resources `ray start --resources` gets: KubeRay passes the value to bash as `--resources=VALUE`."""
    value = group["rayStartParams"].get("resources")
    return json.loads(shlex.split(value)[0]) if value else {}


def _quantity(text: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "": 1}
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|)", str(text))
    assert m, f"unexpected quantity {text!r}"
    return int(m.group(1)) * units[m.group(2)]


def _unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Paths in ``value`` that ``schema`` does not declare (structural CRD schemas have no additionalProperties:
    false, so plain JSON-schema validation lets a misspelt field through)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        if "properties" in schema:
            out = []
            for key, item in value.items():
                if key in schema["properties"]:
                    out += _unknown_fields(item, schema["properties"][key], f"{path}.{key}")
                else:
                    out.append(f"{path}.{key}")
            return out
        if isinstance(schema.get("additionalProperties"), dict):
            return [
                u
                for k, v in value.items()
                for u in _unknown_fields(v, schema["additionalProperties"], f"{path}.{k}")
            ]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [u for i, v in enumerate(value) for u in _unknown_fields(v, schema["items"], f"{path}[{i}]")]
    return []


def _crd_errors(cluster: dict[str, Any]) -> list[str]:
    schema = json.loads(CRD_SCHEMA.read_text())
    # OpenAPI v3.0 schemas are JSON Schema draft 4 plus extension keywords (x-kubernetes-*, nullable) it ignores.
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft4Validator(schema).iter_errors(cluster)
    ]
    return errors + [f"unknown field {p}" for p in _unknown_fields(cluster, schema, "")]


def _core_errors(obj: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{obj['kind']}: {exc.message} at {list(exc.path)}"
    return None


def test_core_objects_are_valid_kubernetes_1_33(objects, cluster):
    core = [o for o in objects if o["kind"] != "RayCluster"]
    assert {o["kind"] for o in core} == {"Namespace", "Service", "NetworkPolicy", "PersistentVolumeClaim"}
    # Pod templates sit inside the custom resource, where kubernetes-validate does not look: check them as the
    # core PodTemplate objects they are (the CRD's copy of the pod schema is checked in the next test).
    templates = [
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": group["template"]}
        for name, group in _groups(cluster).items()
    ]
    assert [e for e in map(_core_errors, core + templates) if e] == []
    # ... and the RayCluster is not among what kubernetes-validate can check (hence the CRD schema).
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(cluster, KUBERNETES_VERSION, strict=True)


def test_core_validation_rejects_a_misspelt_field(objects, cluster):
    service = copy.deepcopy(next(o for o in objects if o["kind"] == "Service"))
    service["spec"]["selectr"] = service["spec"].pop("selector")
    assert _core_errors(service) is not None
    template = copy.deepcopy(_groups(cluster)["learner"]["template"])
    template["spec"]["containers"][0]["securityContext"]["runAsNonroot"] = True
    pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}, "template": template}
    assert "runAsNonroot" in (_core_errors(pod) or "")


def test_raycluster_matches_the_kuberay_v1_4_2_crd(cluster):
    assert cluster["apiVersion"] == "ray.io/v1"
    assert _crd_errors(cluster) == []


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("spec", "workerGroupSpecs", 1, "replicas"), "three", "'three' is not of type 'integer'"),
        (("spec", "headGroupSpec", "rayStartParam"), {}, "unknown field .spec.headGroupSpec.rayStartParam"),
        (
            ("spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "imagePullPolicy"),
            1,
            "not of type",
        ),
    ],
)
def test_crd_validation_rejects_broken_clusters(cluster, path, value, expected):
    broken = copy.deepcopy(cluster)
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    errors = _crd_errors(broken)
    assert any(expected in e for e in errors), errors


def test_replay_is_reachable_only_through_a_cluster_ip_service(objects, cluster):
    name = cluster["metadata"]["name"]
    services = [o for o in objects if o["kind"] == "Service"]
    assert all(s["spec"]["type"] == "ClusterIP" and "externalIPs" not in s["spec"] for s in services)
    assert cluster["spec"]["headGroupSpec"]["serviceType"] == "ClusterIP"
    assert not [o for o in objects if o["kind"] in ("Ingress", "Gateway", "HTTPRoute")]
    (replay,) = [s for s in services if s["metadata"]["name"] == "actorq-replay"]
    # KubeRay labels every pod with its cluster and group (labels a template cannot override).
    assert replay["spec"]["selector"] == {"ray.io/cluster": name, "ray.io/group": "learner"}
    (port,) = replay["spec"]["ports"]
    learner = _ray_container(_groups(cluster)["learner"])
    (target,) = [p for p in learner["ports"] if p["name"] == port["targetPort"]]
    assert target["containerPort"] == port["port"]
    assert not any(
        "hostPort" in p for g in _groups(cluster).values() for p in _ray_container(g).get("ports", [])
    )
    assert not any(g["template"]["spec"].get("hostNetwork") for g in _groups(cluster).values())


def test_only_the_ray_cluster_itself_may_connect_to_its_pods(objects, cluster):
    """Ray 2.48 has no authentication: the NetworkPolicy admits this cluster's pods and nothing else."""
    own = {"matchLabels": {"ray.io/cluster": cluster["metadata"]["name"]}}
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert policy["metadata"]["namespace"] == cluster["metadata"]["namespace"]
    assert policy["spec"]["podSelector"] == own and policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {"from": [{"podSelector": own}]}
    ]  # any port, but only from its own pods


def test_weights_key_is_a_mounted_secret_never_a_committed_value(cluster):
    for path in KUBERAY.iterdir():
        text = path.read_text()
        kinds = [d.get("kind") for d in yaml.safe_load_all(text) if d] if path.suffix == ".yaml" else []
        assert "Secret" not in kinds, f"{path.name}: the Secret is created by a command, never committed"
    for name, group in _groups(cluster).items():
        spec = group["template"]["spec"]
        container = _ray_container(group)
        env = {e["name"]: e["value"] for e in container["env"]}
        key_path = Path(env[KEY_ENV])
        (volume,) = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == SECRET_NAME]
        assert volume["secret"]["items"] == [{"key": "weights.key", "path": key_path.name}], name
        assert volume["secret"]["defaultMode"] & 0o007 == 0, f"{name}: the key must not be world-readable"
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        assert mount["readOnly"] is True and Path(mount["mountPath"]) == key_path.parent, name
        assert not any("KEY" in k and k != KEY_ENV for k in env), (
            f"{name}: no key material in the environment"
        )
        assert not any("valueFrom" in e for e in container["env"]), name


def test_every_container_runs_non_root_without_privileges(objects, cluster):
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {
        namespace["metadata"]["name"]
    }
    for name, group in _groups(cluster).items():
        spec = group["template"]["spec"]
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0 and pod["runAsGroup"] > 0, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is False, name
        assert not spec.get("initContainers"), f"{name}: KubeRay's injected init container copies the Ray one"
        for container in spec["containers"]:
            ctx = container["securityContext"]
            assert ctx["runAsNonRoot"] is True and ctx.get("runAsUser", 1) != 0, name
            assert ctx["allowPrivilegeEscalation"] is False and not ctx.get("privileged"), name
            assert ctx["capabilities"] == {"drop": ["ALL"]}, name


def test_the_learner_group_alone_has_a_gpu_and_the_learner_image(cluster):
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    built = {svc["image"] for svc in compose["services"].values()}  # the tags `docker compose build` makes
    for name, group in _groups(cluster).items():
        container = _ray_container(group)
        resources = container["resources"]
        assert resources["requests"] == resources["limits"], (
            f"{name}: requests = limits (Ray sizes from limits)"
        )
        assert {"cpu", "memory"} <= set(resources["limits"]), name
        gpus = int(resources["limits"].get("nvidia.com/gpu", 0))
        assert container["image"] in built, f"{name}: {container['image']} is not an image docker/ builds"
        assert container["imagePullPolicy"] == "IfNotPresent", name
        if name == "learner":
            assert gpus == 1 and container["image"].startswith("actorq-learner:"), name
            assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 1
        else:
            assert gpus == 0 and container["image"].startswith("actorq-worker:"), name
    assert _groups(cluster)["actors"]["replicas"] >= 2, "several actor nodes"


def test_nodes_advertise_the_placement_resources_the_ray_config_names(cluster):
    groups = _groups(cluster)
    assert groups["head"]["rayStartParams"]["num-cpus"] == "0", "no role runs on the head"
    assert _start_resources(groups["head"]) == {}
    learner, actors = _start_resources(groups["learner"]), _start_resources(groups["actors"])
    # Markers: each role asks a sliver of its side's resource (so any count > 0 admits them all); CPUs and the
    # GPU are what bound how many fit.
    assert learner.get("learner_host", 0) > 0 and actors.get("actor_host", 0) > 0
    ray_config = getattr(config_schema, "RayConfig", None)
    if ray_config is None:
        pytest.skip("actorq.config.schema.RayConfig (the ray launcher) is not on this branch yet")
    assert set(learner) == {ray_config().learner_resource} and set(actors) == {ray_config().actor_resource}


def test_dev_shm_holds_the_object_store_inside_the_memory_limit(cluster):
    for name, group in _groups(cluster).items():
        spec = group["template"]["spec"]
        container = _ray_container(group)
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
        shm = _quantity(volume["emptyDir"]["sizeLimit"])
        assert volume["emptyDir"]["medium"] == "Memory", name
        store = int(group["rayStartParams"]["object-store-memory"])
        # Ray falls back to a disk-backed store when /dev/shm is smaller; tmpfs pages count in the memory limit.
        assert store < shm < _quantity(container["resources"]["limits"]["memory"]), name


def test_ray_version_is_the_locked_one(cluster):
    pins = dict(
        line.split("==", 1) for line in (ROOT / "requirements.lock").read_text().splitlines() if "==" in line
    )
    assert cluster["spec"]["rayVersion"] == pins.get("ray", "2.48.0") == "2.48.0"


def _shell_commands(markdown: Path) -> list[list[str]]:
    """Every command line of the markdown's code blocks, continuation lines joined, split as a shell would."""
    found = re.findall(r"^ *```(\w*)\n(.*?)^ *```", markdown.read_text(), re.S | re.M)
    blocks = [body for language, body in found if language in ("", "bash", "sh")]
    lines = "\n".join(re.sub(r"\\\n\s*", " ", b) for b in blocks).splitlines()
    commands = []
    for line in lines:
        try:
            commands.append(shlex.split(line, comments=True))
        except ValueError:  # a diagram or prose in a plain code block, not a command
            continue
    return [c for c in commands if c]


def _flags(argv: list[str]) -> dict[str, str]:
    """Each argument mapped to the one after it (the value of a ``--flag VALUE`` pair)."""
    return dict(zip(argv, argv[1:], strict=False))


@pytest.mark.parametrize("markdown", ["docker/kuberay/README.md", "docs/scale-out.md"])
def test_documented_commands_match_the_manifest(markdown, objects, cluster):
    """The documented `kubectl exec ... actorq train` line uses the Secret's path, the Service's port, the learner
    group's GPU and the head's run volume; the documented Secret is the one the pods mount."""
    groups = _groups(cluster)
    head = _ray_container(groups["head"])
    key_file = next(e["value"] for e in head["env"] if e["name"] == KEY_ENV)
    (service,) = [o for o in objects if o["kind"] == "Service"]
    commands = _shell_commands(ROOT / markdown)
    trains = [  # the arguments of `actorq train` in `kubectl ... exec ... -- actorq train ARGS`
        c[i + 2 :]
        for c in commands
        if c[0] == "kubectl"
        for i in range(len(c) - 1)
        if c[i] == "actorq" and c[i + 1] == "train"
    ]
    (argv,) = [a for a in trains if "--resume" not in a and "..." not in a]
    flags = _flags(argv)
    overrides = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
    assert flags["--launcher"] == "ray" and flags["--weights-key-file"] == key_file
    assert int(overrides["replay.port"]) == service["spec"]["ports"][0]["port"]
    gpus = int(_ray_container(groups["learner"])["resources"]["limits"]["nvidia.com/gpu"])
    assert float(overrides["ray.learner_gpus"]) == gpus
    runs = next(m["mountPath"] for m in head["volumeMounts"] if m["name"] == "runs")
    assert Path(flags["--run-dir"]).parent == Path(runs)
    actor_cpus = groups["actors"]["replicas"] * int(
        _ray_container(groups["actors"])["resources"]["limits"]["cpu"]
    )
    assert int(flags["--actors"]) <= actor_cpus, "more actors than actor CPUs (actor.threads=1 each)"
    for resume in (a for a in trains if "--resume" in a):
        assert _flags(resume)["--weights-key-file"] == key_file
    secrets = [c for c in commands if c[:1] == ["kubectl"] and "secret" in c and "create" in c]
    assert secrets and all(
        SECRET_NAME in c and any(a.startswith("--from-file=weights.key=") for a in c) for c in secrets
    )
    # Once the ray launcher is merged, the real parser must accept the documented line.
    if "ray" in config_schema.LAUNCHERS:
        from actorq.cli import build_parser

        args, extra = build_parser().parse_known_args(["train", *argv])
        assert [e for e in extra if "=" not in e] == [], f"flags actorq train does not know: {extra}"
        assert args.launcher == "ray"
