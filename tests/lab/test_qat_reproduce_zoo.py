"""``make reproduce-qat ZOO=...`` finds the zoo agents in the zoo's own layout (``sac/Hopper-v3_1``, as
DLR-RM/rl-trained-agents and docs/usage.md have it; ``sac/Hopper-v3`` too) and never skips them silently: with
``ZOO`` unset it says so, with ``ZOO`` set but an agent missing it fails naming the folders it looked for.

make runs the recipe with ``STAMP=`` (no venv prerequisite: nothing is built) and ``VENV`` pointing at a fake
``actorq`` that prints its arguments instead of training."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.subprocess


def make(tmp_path: Path, zoo: str) -> subprocess.CompletedProcess:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    fake = venv / "bin" / "actorq"
    fake.write_text('#!/bin/sh\necho actorq "$@"\n')
    fake.chmod(0o755)
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "reproduce-qat", f"ZOO={zoo}", f"VENV={venv}", "STAMP=",
         f"QAT_OUT={tmp_path / 'study'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("suffix", ["_1", ""])
def test_the_zoo_layout_is_found(tmp_path, suffix):
    zoo = tmp_path / "zoo"
    for agent in ("sac/Hopper-v3", "ddpg/MountainCarContinuous-v0"):
        (zoo / f"{agent}{suffix}").mkdir(parents=True)
    done = make(tmp_path, str(zoo))
    assert done.returncode == 0, done.stderr
    assert f"--zoo {zoo}/sac/Hopper-v3{suffix} " in done.stdout
    assert f"--zoo {zoo}/ddpg/MountainCarContinuous-v0{suffix} " in done.stdout


def test_a_missing_agent_fails_naming_where_it_looked(tmp_path):
    zoo = tmp_path / "zoo"
    (zoo / "sac" / "Hopper-v3_1").mkdir(parents=True)
    done = make(tmp_path, str(zoo))
    assert done.returncode != 0
    assert (
        "has no ddpg/MountainCarContinuous-v0_1 (the zoo's layout) nor ddpg/MountainCarContinuous-v0"
        in done.stderr
    )
    assert "--zoo" not in done.stdout


def test_no_zoo_says_the_cells_are_skipped(tmp_path):
    done = make(tmp_path, "")
    assert done.returncode == 0, done.stderr
    assert "zoo agents skipped: ZOO is not set" in done.stdout
