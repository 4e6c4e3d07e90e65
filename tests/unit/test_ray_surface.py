"""The Ray 2.48 names the ray launcher uses beyond ray.init/ray.remote (actorq/launchers/ray_connect.py SURFACE):
present in the installed Ray (each entry its own test, so a failure names it), and the check fails on a Ray that
lost or reshaped one (a missing attribute, a parameter, a message field, a stub method)."""

from __future__ import annotations

import sys
import types

import pytest

from actorq.launchers import ray_connect

pytest.importorskip("ray")


@pytest.mark.parametrize("entry", ray_connect.SURFACE, ids=lambda e: f"{e[0]}.{e[1]}:{e[2]}")
def test_installed_ray_has_member(entry: tuple[str, str, str]) -> None:
    assert ray_connect.missing_surface((entry,)) == []


def _fake_ray_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module ``fake_ray`` shaped like a Ray that renamed things."""
    module = types.ModuleType("fake_ray")

    def init(address=None, **kwargs):
        return kwargs.pop("_temp_dir", None)  # reads _temp_dir by name, nothing else

    class Stub:
        def __init__(self, channel):
            self.GetClusterInfo = channel  # renamed from GetClusterId

    class Strategy:
        def __init__(self, node, soft):  # renamed from node_id
            pass

    module.init, module.Stub, module.Strategy = init, Stub, Strategy
    monkeypatch.setitem(sys.modules, "fake_ray", module)


def test_check_names_what_a_reshaped_ray_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_ray_module(monkeypatch)
    surface = (
        ("fake_ray", "init", "_temp_dir"),
        ("fake_ray", "init", "_node_ip_address"),
        ("fake_ray", "get_actor", "name"),
        ("fake_ray", "Stub", "GetClusterId"),
        ("fake_ray", "Strategy", "node_id"),
        ("ray.core.generated.gcs_service_pb2", "GetClusterIdReply", "cluster_ids"),
    )
    problems = ray_connect.missing_surface(surface)
    assert problems == [
        "fake_ray.init: no parameter or member '_node_ip_address'",
        "fake_ray.get_actor: missing (module 'fake_ray' has no attribute 'get_actor')",
        "fake_ray.Stub: no parameter or member 'GetClusterId'",
        "fake_ray.Strategy: no parameter or member 'node_id'",
        "ray.core.generated.gcs_service_pb2.GetClusterIdReply: no field 'cluster_ids'",
    ]
