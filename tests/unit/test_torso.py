"""``network.torso``: which torso each observation gets, and every bad choice refused at config time (exit 2).

``actorq.cli.main`` runs in this process with the launch replaced by a stub, so a refusal that came too late (or
never) would show as a started run, not as a training run on this machine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import actorq.cli as cli
import actorq.launchers.train
from actorq import algorithms
from actorq.algorithms.torso import MIN_IMAGE_SIDE, Torso
from actorq.config import ConfigError, load_config
from actorq.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs/dqn/gym_cartpole.yaml")
D4PG_CONFIG = str(ROOT / "configs/d4pg/dmc_cartpole_balance.yaml")
DQN = algorithms.get("dqn")
D4PG = algorithms.get("d4pg")


@pytest.mark.parametrize(
    ("algorithm", "shape", "dtype", "kind", "channels_first"),
    [
        ("dqn", (84, 84, 4), np.uint8, "nature_cnn", False),  # Acme's AtariWrapper
        ("dqn", (4, 84, 84), np.uint8, "nature_cnn", True),  # Gymnasium's FrameStackObservation
        ("dqn", (210, 160, 3), np.uint8, "nature_cnn", False),  # raw ALE frames
        ("dqn", (4,), np.float32, "mlp", False),  # CartPole
        ("dqn", (10, 10, 4), np.float32, "mlp", False),  # MinAtar: too small for the Nature CNN
        ("d4pg", (84, 84, 3), np.uint8, "mlp", False),  # no conv torso: the flattened pixels
    ],
)
def test_auto_picks_the_conv_torso_for_images_the_algorithm_can_read(
    algorithm, shape, dtype, kind, channels_first
):
    torso = algorithms.get(algorithm).torso("auto", shape, dtype)
    assert (torso.kind, torso.channels_first, torso.obs_shape) == (kind, channels_first, shape)
    assert torso.pixels == (dtype == np.uint8)


def test_nature_cnn_geometry():
    torso = Torso("nature_cnn", (84, 84, 4), True)
    assert torso.conv_weight_shapes() == [(32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3)]
    assert [g[3:] for g in torso.conv_geometry()] == [(20, 20), (9, 9), (7, 7)]
    assert torso.features == 3136 and MIN_IMAGE_SIDE == 36
    assert torso.multiply_adds() == [20 * 20 * 32 * 256, 9 * 9 * 64 * 512, 7 * 7 * 64 * 576]
    assert Torso("nature_cnn", (4, 84, 84)).hwc == (84, 84, 4)


@pytest.mark.parametrize(
    ("algorithm", "requested", "shape", "message"),
    [
        (
            "dqn",
            "nature_cnn",
            (4,),
            r"network.torso=nature_cnn: the nature_cnn torso reads images .*shape \(4,\)",
        ),
        (
            "dqn",
            "nature_cnn",
            (10, 10, 4),
            r"at least 36x36 pixels .*\(10, 10, 4\); use network.torso=auto or mlp",
        ),
        ("d4pg", "nature_cnn", (84, 84, 3), r"algorithm d4pg has no nature_cnn torso \(it has: mlp\)"),
        (
            "dqn",
            "resnet",
            (84, 84, 4),
            r"network.torso='resnet' is not valid; choose one of: auto, mlp, nature_cnn",
        ),
    ],
)
def test_a_torso_that_cannot_read_the_observations_is_refused(algorithm, requested, shape, message):
    with pytest.raises(ValueError, match=message):
        algorithms.get(algorithm).torso(requested, shape, np.uint8)


@pytest.mark.parametrize(
    ("path", "override", "message"),
    [
        (
            CARTPOLE,
            "network.torso=cnn",
            r"network.torso='cnn' is not valid; choose one of: auto, mlp, nature_cnn",
        ),
        (
            D4PG_CONFIG,
            "network.torso=nature_cnn",
            r"network.torso=nature_cnn: algorithm d4pg has no such torso",
        ),
    ],
)
def test_config_refuses_unknown_torsos_and_ones_the_algorithm_lacks(path, override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(path, [override])


def test_train_refuses_a_conv_torso_on_a_flat_task_before_anything_starts(tmp_path, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(actorq.launchers.train, "launch", lambda *a, **k: started.append(a) or 0)
    run_dir = tmp_path / "run"
    code = cli.main(["train", CARTPOLE, "network.torso=nature_cnn", "--run-dir", str(run_dir), "--quiet"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == ExitCode.USAGE and not started and not run_dir.exists()
    assert len(errors) == 1 and "network.torso=nature_cnn" in errors[0] and "shape (4,)" in errors[0], errors
    # The same task with the default (auto) is accepted: an MLP.
    assert cli.main(["train", CARTPOLE, "--run-dir", str(run_dir), "--quiet"]) == 0 and len(started) == 1


@pytest.mark.parametrize(
    ("config", "kind", "features"),
    [("configs/dqn/atari_pong.yaml", "nature_cnn", 3136), ("configs/dqn/minatar_breakout.yaml", "mlp", 400)],
)
def test_the_pixel_configs_get_the_torso_their_frames_call_for(config, kind, features):
    from actorq.roles.torso import run_torso

    torso = run_torso(load_config(str(ROOT / config)))
    assert torso.kind == kind and torso.features == features and torso.pixels
    assert torso.channels_first == (kind == "nature_cnn")  # ALE frames come [4, 84, 84]
