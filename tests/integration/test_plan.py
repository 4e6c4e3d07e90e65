"""``actorq plan --quick`` end to end: kernels verified, learner and actors timed beside each other on every split
of this machine's cores (and the evaluator's and quantizer's work on the learner's), predictions written as JSON and
a plot, and a named setting the config system accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actorq.config import load_config
from actorq.plan.model import make_splits
from actorq.report.plan_input import load_plan

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "configs/dqn/gym_cartpole.yaml"


@pytest.mark.slow
def test_plan_quick_times_every_split_and_names_a_setting_the_config_accepts(tmp_path):
    out, png = tmp_path / "plan.json", tmp_path / "plan.png"
    result = subprocess.run(
        [sys.executable, "-m", "actorq.cli", "plan", CONFIG, "network.policy_layers=[64,64]", "--quick"]
        + ["--precisions", "fp32,int8", "--spi", "0.25,8", "--seconds", "1"]
        + ["--json", str(out), "--plot", str(png)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, ACTORQ_KERNEL_CACHE="none"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads(out.read_text())
    meta = doc["meta"]
    assert doc["kind"] == "plan" and meta["quick"] is True and set(meta["kernels"]) == {"fp32", "int8"}
    # 2 cores: the learner on one and the actors on the other, then both sharing both.
    assert meta["splits"] == [s.name for s in make_splits(sorted(os.sched_getaffinity(0)))]
    cells = {(m["split"]["name"], m["precision"]) for m in meta["measurements"]}
    assert cells == {(s, p) for s in meta["splits"] for p in ("fp32", "int8")}
    assert all(m["supply"] > 0 and m["capacity"] > 0 and m["kernel"] for m in meta["measurements"])
    # The evaluator's and the quantizer's work was timed on each split's learner cores, and the learner's
    # capacity is what they leave of the one measured without them.
    assert set(meta["side_loads"]) == set(meta["splits"])
    for loads in meta["side_loads"].values():
        assert loads["eval_steps"] == 500 and loads["eval_step_cpu_s"] > 0 and loads["eval_load_cpu_s"] > 0
        assert set(loads["publish_cpu_s"]) == {"fp32", "int8"} and min(loads["publish_cpu_s"].values()) > 0
        assert 0 < loads["poll_cpu_s"] < 0.05 and 0 < loads["poll_cores"] < 0.5
    for m in meta["measurements"]:
        assert 0 < m["evaluator_share"] < 1 and 0 < m["quantizer_share"] < 1
        assert m["capacity"] == pytest.approx(
            m["capacity_alone"] * (1 - m["evaluator_share"] - m["quantizer_share"]), rel=1e-6
        )
    # What `actorq report --plan` reads: the network sizes the runs must match, every measurement.
    assert meta["layers"] == {"policy_layers": [64, 64]}
    # The memory bandwidth the actors were timed at (the report compares it with the runs'): CartPole's 4 inputs,
    # 64x64 and 2 outputs are 4,480 fp32 weights.
    assert meta["machine"]["dram_read_gbs"] > 0 and meta["machine"]["weights_read_bytes"] == 4480 * 4
    assert "read bandwidth: DRAM" in result.stdout
    plan = load_plan(out)
    assert plan.machine["dram_read_gbs"] == meta["machine"]["dram_read_gbs"]
    assert plan.task == "gym:CartPole-v1" and len(plan.cells) == len(meta["measurements"])
    # Every measurement at every spi (the config's 8 is in the list), each against fp32 at its own setting.
    assert len(doc["summary"]) == len(cells) * 2
    assert all(r["speedup_vs_fp32"] == 1.0 for r in doc["summary"] if r["precision"] == "fp32")
    setting = meta["recommendation"]["setting"]
    load_config(ROOT / CONFIG, setting["overrides"])  # the named setting is a valid run of this config
    assert ("best setting:" in result.stdout) or ("will not help" in result.stdout)
    assert png.read_bytes()[:4] == b"\x89PNG"
