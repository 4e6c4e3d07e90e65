"""Frames stay uint8 from the environment through the actors' adders and Reverb to the learner, which casts them;
and what replay costs per transition of frames, against the figure docs/usage.md gives (measured here, on a small
table: the replay server's own resident memory per transition, its chunks compressed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import psutil
import pytest

from actorq.config import config_from_dict, save_config
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb

REPLAY_BYTES_PER_TRANSITION = {"ALE/Pong-v5": 9_500, "MinAtar/Breakout-v1": 6_400}
"""Replay server memory per n-step transition (docs/usage.md#pixels): ALE's [4, 84, 84] uint8 frame stacks (both
observations of a transition, zstd-compressed by Reverb: ~3.7 KB of them) and MinAtar's [10, 10, 4] frames; the rest
is Reverb's own bookkeeping per item and chunk (~5.6 KB, the same for any observation)."""


@pytest.mark.parametrize(
    ("task", "algorithm", "shape"),
    [
        ("MinAtar/Breakout-v1", "dqn", (10, 10, 4)),
        ("ALE/Pong-v5", "dqn", (4, 84, 84)),
        ("tests.user_env:Frames", "d4pg", (2, 6, 6)),
    ],
)
def test_frames_stay_uint8_into_the_learners_batches_and_the_learner_steps_on_them(
    reverb_server, task, algorithm, shape
):
    import tensorflow as tf

    from actorq.bench.learner import prefill
    from actorq.envs import environment_spec, make_environment
    from actorq.learners import make_learner
    from actorq.replay.experience import make_dataset
    from actorq.replay.tables import environment_spec_for

    config = tiny_config(algorithm, **{"env.suite": "gym", "env.task": task, "env.max_episode_steps": 0})
    spec = environment_spec(config.env)
    assert spec.obs_shape == shape and spec.obs_dtype == np.uint8 and spec.obs_dim == int(np.prod(shape))
    server = reverb_server(config)
    address = f"localhost:{server.port}"
    prefill(server.localhost_client(), config, config.replay.min_size + 20)
    batch = next(iter(make_dataset(address, config))).data
    for observation in (batch.observation, batch.next_observation):
        assert observation.dtype == tf.uint8 and tuple(observation.shape[1:]) == shape
    env = make_environment(config.env)
    learner = make_learner(config, environment_spec_for(env), address)
    env.close()
    before = learner.get_variables()
    learner.step()  # the learner casts and flattens the frames (actorq.networks.tf_nets.FlatObservation)
    after = learner.get_variables()
    assert learner.steps == 1 and set(after) == set(before)
    assert all(np.isfinite(v).all() for v in after.values())
    assert any(not np.array_equal(before[k], after[k]) for k in after)


def _server_process(config_path) -> subprocess.Popen:
    code = (
        "import sys\n"
        "from actorq.config import load_config\n"
        "from actorq.envs import make_environment\n"
        "from actorq.replay.tables import environment_spec_for, make_server\n"
        f"config = load_config({str(config_path)!r})\n"
        "server = make_server(config, environment_spec_for(make_environment(config.env)), port=None)\n"
        "print(server.port, flush=True)\n"
        "sys.stdin.read()\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


@pytest.mark.subprocess  # the replay server runs in its own process, whose memory is measured
@pytest.mark.parametrize("task", sorted(REPLAY_BYTES_PER_TRANSITION))
def test_replay_memory_per_transition_is_the_documented_figure(tmp_path, task):
    import reverb

    from actorq.bench.learner import prefill
    from actorq.replay.tables import EXPERIENCE_TABLE

    config = config_from_dict(
        {
            "algorithm": "dqn",
            "env": {"suite": "gym", "task": task},
            "replay": {"min_size": 1, "max_size": 100_000, "samples_per_insert": 0, "n_step": 3},
        }
    )
    save_config(config, tmp_path / "config.yaml")
    child = _server_process(tmp_path / "config.yaml")
    try:
        port = int(child.stdout.readline())
        client = reverb.Client(f"localhost:{port}")
        server = psutil.Process(child.pid)
        prefill(client, config, 500)  # the server's first allocations are not per transition
        before = (client.server_info()[EXPERIENCE_TABLE].current_size, server.memory_info().rss)
        prefill(client, config, 3000, seed=1)
        after = (client.server_info()[EXPERIENCE_TABLE].current_size, server.memory_info().rss)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    per_transition = (after[1] - before[1]) / (after[0] - before[0])
    documented = REPLAY_BYTES_PER_TRANSITION[task]
    assert 0.8 * documented <= per_transition <= 1.2 * documented, (task, per_transition)
