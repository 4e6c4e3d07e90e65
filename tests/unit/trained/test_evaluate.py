"""``actorq evaluate``: the learner checkpoint read back is the learner's own function (the online policy, not its
target copy), the figures it prints, its video, and its errors (one line, exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from actorq import algorithms
from actorq.cli import main
from tests.unit.trained.fake_runs import LEARNER_STEP, make_run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    return {a: make_run(base / a, a) for a in ("dqn", "d4pg", "ddpg", "dqn_conv")}


@pytest.mark.parametrize("algorithm", ["dqn", "d4pg", "ddpg", "dqn_conv"])
def test_the_checkpoint_read_back_is_the_learners_online_policy(runs, algorithm):
    import tensorflow as tf

    from actorq.actors.kernels import probe_inputs
    from actorq.trained.weights import fp32_reference, load_weights

    run_dir, net = runs[algorithm]
    weights = load_weights(run_dir)
    assert (weights.checkpoint, weights.learner_step) == (1, LEARNER_STEP)
    policy = fp32_reference(weights, batch=16)
    obs = probe_inputs(policy.spec, n=16, seed=0)  # vectors, or frames for the conv torso
    want = net(tf.constant(obs)).numpy()
    np.testing.assert_allclose(policy(obs), want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("algorithm", ["dqn", "d4pg", "dqn_conv"])
def test_evaluate_reports_returns_intervals_and_agreement(runs, algorithm):
    from actorq.trained.evaluate import describe, evaluate
    from actorq.trained.weights import load_weights

    result = evaluate(load_weights(runs[algorithm][0]), "int8", episodes=3, seed=5)
    assert result["precision"] == "int8" and result["compared_with"] == "fp32"
    assert len(result["returns"]) == 3
    assert result["mean"]["value"] == pytest.approx(np.mean(result["returns"]))
    assert result["mean"]["low"] <= result["mean"]["value"] <= result["mean"]["high"]
    assert result["iqm"]["low"] <= result["iqm"]["value"] <= result["iqm"]["high"]
    assert "BCa bootstrap" in result["method"]
    assert result["agreement_states"] > 0
    measure = result["agreement"] if algorithms.get(result["algorithm"]).discrete else result["action_error"]
    assert measure is not None and 0.0 <= measure <= 1.0
    assert "IQM" in describe(result) and "int8 vs fp32" in describe(result)


@pytest.mark.parametrize("asked", ["fp32", "auto"])
def test_fp32_is_compared_with_int8_and_auto_resolves_to_a_precision(runs, asked):
    from actorq.trained.evaluate import evaluate
    from actorq.trained.weights import load_weights

    result = evaluate(load_weights(runs["dqn"][0]), asked, episodes=2, seed=5)
    assert result["precision"] in ("fp32", "fp16", "int8")
    assert result["compared_with"] == ("int8" if result["precision"] == "fp32" else "fp32")
    assert result["kernel"].startswith(result["precision"] + "/")


def test_json_to_stdout_and_the_gym_video(runs, tmp_path, capsys):
    video = tmp_path / "cartpole.mp4"
    status = main(["evaluate", str(runs["dqn"][0]), "--episodes", "2", "--json", "-", "--video", str(video)])
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    assert result["video"]["frames"] >= 2
    assert decoded_frames(video) == result["video"]["frames"]


@pytest.mark.subprocess
def test_the_dm_control_video_renders_headless(runs, tmp_path):
    """A fresh process (dm_control picks its GL backend when it loads): MuJoCo's EGL without a display."""
    video = tmp_path / "dmc.mp4"
    out = subprocess.run(
        [sys.executable, "-m", "actorq.cli", "evaluate", str(runs["d4pg"][0]), "--episodes", "1"]
        + ["--precision", "fp32", "--video", str(video)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    frames = decoded_frames(video)
    assert frames == 41  # 40 steps (env.max_episode_steps) and the last state


def decoded_frames(path: Path) -> int:
    import imageio

    reader = imageio.get_reader(str(path))
    try:
        frames = [frame for frame in reader]
    finally:
        reader.close()
    assert frames and frames[0].ndim == 3 and frames[0].std() > 0  # a picture, not a blank
    return len(frames)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["evaluate", "/nonexistent/run"], "run directory /nonexistent/run does not exist"),
        (["export", "/nonexistent/run", "--out", "/tmp/x.onnx"], "does not exist"),
        (["evaluate", "RUN", "--checkpoint", "7"], "has no learner checkpoint 7; it keeps 1"),
        (["evaluate", "RUN", "--video", "/tmp/v.avi"], "write an .mp4 file"),
        (
            ["export", "RUN", "--precision", "fp16", "--format", "onnx", "--out", "OUT"],
            "no fp16 ONNX Runtime",
        ),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(runs, tmp_path, capsys, argv, message):
    argv = [a.replace("RUN", str(runs["dqn"][0])).replace("OUT", str(tmp_path / "p.onnx")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
