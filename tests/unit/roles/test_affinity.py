"""affinity.<role>: a role's process is pinned to its cores before TensorFlow or torch load; bad cores are errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from actorq.config import ConfigError, load_config
from actorq.roles.process_setup import AffinityError, pin_role_cpus
from tests.conftest import tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.subprocess
def test_a_role_process_runs_only_on_its_cores():
    cpu = min(os.sched_getaffinity(0))
    code = (
        "import os; from tests.conftest import tiny_config; from actorq.roles.process_setup import pin_role_cpus; "
        f"c = tiny_config('dqn', **{{'affinity.learner': ({cpu},)}}); "
        "print(pin_role_cpus(c, 'learner'), sorted(os.sched_getaffinity(0)), pin_role_cpus(c, 'actor'))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"({cpu},)", f"[{cpu}]", "()"]  # pinned; the actor (empty) keeps any core


def test_cores_this_host_lacks_are_a_clear_error_before_the_role_starts():
    config = tiny_config("dqn", **{"affinity.actor": (4095,)})
    before = os.sched_getaffinity(0)
    with pytest.raises(AffinityError, match=r"affinity.actor=\[4095\].*not available on this host"):
        pin_role_cpus(config, "actor")
    assert os.sched_getaffinity(0) == before  # nothing was changed


def test_negative_or_repeated_cores_are_config_errors():
    for bad in ("[-1]", "[0, 0]"):
        with pytest.raises(ConfigError, match="affinity.learner"):
            load_config("configs/dqn/gym_cartpole.yaml", [f"affinity.learner={bad}"])
