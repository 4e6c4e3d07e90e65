"""The ``ray:`` config section and what the ray placement hands Ray, without a cluster.

What the placement passes to Ray (actor options, constructor arguments) is recorded by a stand-in for the remote
class, so these tests see exactly what would cross into Ray's object store and dashboard; the real cluster is the
``ray`` tier (tests/ray).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from actorq.config import ConfigError, config_from_dict, replace
from actorq.launchers.placement import RunContext
from actorq.launchers.ray_placement import SLIVER, RayPlacement
from actorq.launchers.topology import RoleSpec, topology
from actorq.weights_key import ensure_run_key
from tests.conftest import tiny_config


def test_ray_section_defaults_and_launcher_choice():
    config = config_from_dict({"launcher": "ray"})
    assert config.ray.address == "" and config.ray.learner_gpus == 0.0 and config.ray.max_restarts == 5
    assert (config.ray.learner_resource, config.ray.actor_resource) == ("learner_host", "actor_host")
    assert config_from_dict({"ray": {"address": "10.0.0.5:6379"}}).ray.address == "10.0.0.5:6379"
    assert config_from_dict({"ray": {"address": "auto"}}).ray.address == "auto"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"address": "head"}, "ray.address='head' is not a Ray address: give HOST:PORT"),
        ({"address": "ray://head:10001"}, "ray:// is not supported"),
        ({"learner_gpus": -1}, "ray.learner_gpus=-1.0 must be >= 0"),
        ({"max_restarts": -2}, "ray.max_restarts=-2 must be >= 0"),
        ({"actor_resource": "CPU"}, "ray.actor_resource='CPU' must be a custom resource name"),
        ({"learner_resource": "two words"}, "must be a custom resource name"),
        ({"learner_resource": "host", "actor_resource": "host"}, "both 'host': name two resources"),
    ],
)
def test_bad_ray_settings_say_what_to_fix(section, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        config_from_dict({"ray": section})


class _Recorder:
    """Stands in for ``ray.remote(RoleActor)``: records each ``.options(...).remote(...)`` call."""

    def __init__(self):
        self.calls: list[tuple[dict, tuple]] = []

    def options(self, **options):
        recorder = self

        class _Bound:
            def remote(self, *args):
                recorder.calls.append((options, args))
                return _Handle(len(recorder.calls))

        return _Bound()


class _Handle:
    def __init__(self, n: int):
        self._actor_id = type("_Id", (), {"hex": lambda _self: f"{n:032x}"})()


def _placement(tmp_path, advertised: dict[str, float], **changes) -> tuple[RayPlacement, _Recorder]:
    config = tiny_config("dqn", launcher="ray", **changes)
    key_file = ensure_run_key(tmp_path)
    placement = RayPlacement(RunContext(config, tmp_path, tmp_path / "config.yaml", 0, key_file))
    placement._placing = {
        side: ({name: SLIVER} if advertised.get(name) else {})
        for side, name in (("learner", config.ray.learner_resource), ("actor", config.ray.actor_resource))
    }
    placement._actor_class = _Recorder()
    return placement, placement._actor_class


def test_role_resources_restarts_and_environment(tmp_path):
    placement, recorder = _placement(
        tmp_path,
        {"learner_host": 1, "actor_host": 2},
        **{"ray.learner_gpus": 0.5, "actor.threads": 2, "ray.max_restarts": 3, "learner.onednn": False},
    )
    for spec in topology(placement.run.config):
        placement.start(spec, address="" if spec.role == "replay" else "10.0.0.5:4000")
    options = {args[1]: opts for opts, args in recorder.calls}
    assert options["learner"]["num_gpus"] == 0.5 and options["learner"]["num_cpus"] == 1
    assert options["learner"]["runtime_env"]["env_vars"]["TF_ENABLE_ONEDNN_OPTS"] == "0"
    for label in ("actor_0", "actor_1"):
        assert options[label]["num_cpus"] == 2 and options[label]["resources"] == {"actor_host": SLIVER}
        assert options[label]["max_restarts"] == 3
    for label in ("replay", "learner", "quantizer", "evaluator"):
        assert options[label]["resources"] == {"learner_host": SLIVER}
        assert options[label]["max_concurrency"] >= 2  # status/stop must reach a role whose loop runs
    assert options["quantizer"]["max_restarts"] == options["evaluator"]["max_restarts"] == 3
    assert options["replay"]["max_restarts"] == options["learner"]["max_restarts"] == 0


def test_roles_place_freely_when_no_node_advertises_the_resources(tmp_path):
    placement, recorder = _placement(tmp_path, {})
    placement.start(RoleSpec("actor", 0), address="h:1")
    placement.start(RoleSpec("learner"), address="h:1")
    assert all(opts["resources"] == {} for opts, _ in recorder.calls)


def test_the_weights_key_never_crosses_into_ray(tmp_path):
    placement, recorder = _placement(tmp_path, {"learner_host": 1, "actor_host": 1})
    key_text = placement.run.weights_key_file.read_text().strip()
    for spec in topology(placement.run.config):
        placement.start(spec, address="h:1")
    for options, args in recorder.calls:
        assert key_text not in repr(options) and key_text not in repr(args)
        # Only the key file's path travels; each role reads the file on its own host.
        assert str(placement.run.weights_key_file.resolve()) in args
        # The config crosses as plain values (no pickled dataclass).
        assert isinstance(args[2], dict) and config_from_dict(args[2]) == placement.run.config


def test_insecure_runs_pass_no_key_file(tmp_path):
    config = tiny_config("dqn", launcher="ray")
    placement = RayPlacement(RunContext(config, tmp_path, tmp_path / "config.yaml", 0, None))
    placement._placing, placement._actor_class = {}, _Recorder()
    placement.start(RoleSpec("actor", 0), address="h:1")
    (_, args) = placement._actor_class.calls[0]
    assert args[-2:] == (None, True)


@pytest.mark.subprocess
def test_launchers_import_without_ray():
    code = (
        "import sys, actorq.launchers.ray_placement, actorq.launchers.ray_role, actorq.launchers.train\n"
        "assert 'ray' not in sys.modules, 'ray imported at module level'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_replace_keeps_ray_section():
    config = replace(tiny_config("dqn"), **{"ray.address": "127.0.0.1:6379", "launcher": "ray"})
    assert config.ray.address == "127.0.0.1:6379" and config.launcher == "ray"


def test_a_status_record_a_ray_role_answers_that_does_not_parse_is_an_error_not_ignored():
    """A node running another ActorQ version answers records with other fields: the supervisor must hear of it (a
    placement that kept its last record would leave the run's stop conditions unmet until its time limit)."""
    from types import SimpleNamespace

    from actorq.launchers.ray_placement import _Role
    from actorq.status import LearnerStatus, StatusError
    from actorq.status import to_dict as status_to_dict

    class RayActorError(Exception):
        pass

    fake = SimpleNamespace(
        ray=SimpleNamespace(get=lambda ref: ref, exceptions=SimpleNamespace(RayActorError=RayActorError)),
        _ask_where=lambda role: None,
    )
    role = _Role(spec=RoleSpec("learner"), handle=None, actor_id="a1")
    record = LearnerStatus(role="learner", label="learner", step=5)
    RayPlacement._take_record(fake, role, status_to_dict(record))
    assert role.last == record
    old = status_to_dict(record)
    del old["published"]
    with pytest.raises(StatusError, match="learner's status record .*missing field\\(s\\) published"):
        RayPlacement._take_record(fake, role, old)
    assert role.last == record
