"""The container tests skip, with the numbers, where Docker's disk cannot hold the worker image's build.

Unit tier (no marker, no daemon): the images present and the disk are stood in for, so the rule itself is tested.
"""

from __future__ import annotations

import shutil
from collections import namedtuple

import pytest

from tests.containers import engine, stand_in_base

Usage = namedtuple("Usage", "total used free")
MIB = 2**20


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A daemon whose data root is ``tmp_path``; the test sets what is built and how much disk is free."""
    state = {"images": set(), "free_mib": 0, "root": str(tmp_path), "asked": []}

    def fake_usage(path):
        state["asked"].append(str(path))
        return Usage(10**12, 0, state["free_mib"] * MIB)

    monkeypatch.setattr(stand_in_base, "image_exists", lambda tag=stand_in_base.TAG: tag in state["images"])
    monkeypatch.setattr(shutil, "disk_usage", fake_usage)
    return state


def test_too_little_disk_for_a_first_build_is_a_skip_reason_with_the_numbers(machine):
    machine["free_mib"] = engine.BUILD_NEED_MIB - 1
    reason = engine.disk_shortfall(machine["root"])
    assert reason is not None
    assert f"{engine.BUILD_NEED_MIB} MiB" in reason and f"{engine.BUILD_NEED_MIB - 1} MiB" in reason
    assert machine["root"] in reason and "docker system prune" in reason
    assert machine["asked"] == [machine["root"]]


def test_enough_disk_is_no_reason(machine):
    machine["free_mib"] = engine.BUILD_NEED_MIB
    assert engine.disk_shortfall(machine["root"]) is None


def test_a_built_image_needs_no_disk_check(machine):
    machine["images"].add(engine.WORKER_IMAGE)
    machine["free_mib"] = 1
    assert engine.disk_shortfall(machine["root"]) is None
    assert machine["asked"] == []


def test_a_data_root_that_is_not_on_this_machine_is_not_measured(machine, tmp_path):
    machine["root"] = str(tmp_path / "on-a-remote-daemon")
    machine["free_mib"] = 1
    assert engine.disk_shortfall(machine["root"]) is None
    assert machine["asked"] == []
