"""The chunked n-step writer stores exactly the transitions Acme's NStepTransitionAdder stores.

Each episode is recorded once, then written both ways into two queue tables (insertion order) of one in-process
Reverb server, both with the experience table's signature, and read back through Reverb's TF dataset as the
learner reads them: every field, dtype and shape of every item must be identical.
"""

from __future__ import annotations

import dm_env
import numpy as np
import pytest

from actorq.config import replace
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb

ACME, OURS = "acme_queue", "ours_queue"


def record(env, actions, seed: int = 0) -> list:
    """[first timestep, (action, timestep), ...] of one episode, acting with ``actions(rng)``."""
    rng = np.random.default_rng(seed)
    episode = [env.reset()]
    while True:
        action = actions(rng)
        ts = env.step(action)
        episode.append((action, ts))
        if ts.last():
            return episode


def synthetic(spec, steps: int, terminal: bool, seed: int) -> list:
    """An episode with random rewards and mid-episode discounts (exercises the return arithmetic)."""
    rng = np.random.default_rng(seed)
    obs = lambda: rng.standard_normal(spec.observations.shape).astype(np.float32)  # noqa: E731
    episode = [dm_env.restart(obs())]
    for t in range(steps):
        action = rng.uniform(-1, 1, spec.actions.shape).astype(np.float32)
        reward = np.float32(rng.standard_normal())
        if t == steps - 1:
            ts = dm_env.TimeStep(dm_env.StepType.LAST, reward, np.float32(0.0 if terminal else 1.0), obs())
        else:
            ts = dm_env.TimeStep(dm_env.StepType.MID, reward, np.float32(rng.choice([1.0, 0.9, 0.5])), obs())
        episode.append((action, ts))
    return episode


def write_both(config, spec, episodes):
    """Write ``episodes`` with Acme's adder and ours; return both tables' items in insertion order."""
    import reverb
    from acme.adders import reverb as acme_adders

    from actorq.replay.experience import make_acme_adder
    from actorq.replay.nstep import ChunkedTransitionWriter, NStepAdder

    signature = acme_adders.NStepTransitionAdder.signature(spec)
    tables = [reverb.Table.queue(name, 10_000, signature=signature) for name in (ACME, OURS)]
    server = reverb.Server(tables)
    try:
        client = reverb.Client(f"localhost:{server.port}")
        acme = make_acme_adder(client, config, table=ACME)
        writer = ChunkedTransitionWriter(client, OURS)
        ours = NStepAdder(writer, config.replay.n_step, config.replay.discount)
        for episode in episodes:
            for adder in (acme, ours):
                adder.add_first(episode[0])
                for action, ts in episode[1:]:
                    adder.add(action, ts)
        acme.reset()
        ours.reset()
        writer.close()
        info = client.server_info()
        counts = {name: info[name].current_size for name in (ACME, OURS)}
        return counts, {name: read_all(server.port, name, counts[name]) for name in (ACME, OURS)}
    finally:
        server.stop()


def read_all(port: int, table: str, count: int) -> list:
    import reverb

    dataset = reverb.TrajectoryDataset.from_table_signature(
        server_address=f"localhost:{port}", table=table, max_in_flight_samples_per_worker=1
    )
    return [sample.data for sample in dataset.take(count)]


def assert_same(acme_items, our_items):
    import tree

    assert len(our_items) == len(acme_items)
    for i, (a, b) in enumerate(zip(acme_items, our_items, strict=True)):
        assert type(a).__name__ == type(b).__name__ == "Transition"
        for path, x, y in zip(
            [p for p, _ in tree.flatten_with_path(a)], tree.flatten(a), tree.flatten(b), strict=True
        ):
            x, y = x.numpy(), y.numpy()
            assert x.dtype == y.dtype and x.shape == y.shape, (i, path, x.dtype, y.dtype, x.shape, y.shape)
            np.testing.assert_array_equal(y, x, err_msg=f"item {i} field {path}")


def expected_count(episodes, n: int) -> int:
    # One transition per step plus the n - 1 (or fewer) shortened ones at each episode's end.
    return sum(len(e) - 1 + min(n, len(e) - 1) - 1 for e in episodes)


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_dqn_cartpole_termination_and_truncation(n_step):
    from actorq.envs import make_environment
    from actorq.replay.tables import environment_spec_for

    config = replace(tiny_config("dqn"), **{"replay.n_step": n_step})
    env = make_environment(config.env, seed=1)
    spec = environment_spec_for(env)
    terminated = record(
        env, lambda rng: np.int32(rng.integers(2))
    )  # random CartPole falls within ~10-40 steps
    short = make_environment(replace(config, **{"env.max_episode_steps": 3}).env, seed=2)
    truncated = record(short, lambda rng: np.int32(rng.integers(2)))  # 3 steps: shorter than n
    assert terminated[-1][1].discount == 0 and truncated[-1][1].discount == 1
    episodes = [terminated, truncated, terminated]
    counts, items = write_both(config, spec, episodes)
    assert counts[ACME] == counts[OURS] == expected_count(episodes, n_step)
    assert_same(items[ACME], items[OURS])


def test_d4pg_dmc_truncation_and_synthetic_discounts():
    from actorq.envs import make_environment
    from actorq.replay.tables import environment_spec_for

    config = replace(tiny_config("d4pg"), **{"replay.n_step": 5, "env.max_episode_steps": 12})
    env = make_environment(config.env, seed=3)
    spec = environment_spec_for(env)
    truncated = record(env, lambda rng: rng.uniform(-1, 1, (1,)).astype(np.float32))
    assert truncated[-1][1].discount == 1 and len(truncated) == 13
    episodes = [
        truncated,
        synthetic(spec, 9, terminal=True, seed=4),
        synthetic(spec, 2, terminal=False, seed=5),
    ]
    counts, items = write_both(config, spec, episodes)
    assert counts[ACME] == counts[OURS] == expected_count(episodes, 5)
    assert_same(items[ACME], items[OURS])


def test_float32_scalar_fast_path_matches_acmes_in_place_arithmetic():
    from actorq.replay.nstep import NStepAdder

    class Capture:
        def __init__(self):
            self.items = []

        def write(self, transition):
            self.items.append(transition)

    rng = np.random.default_rng(7)
    rewards = rng.standard_normal(12).astype(np.float32)
    discounts = rng.choice(np.float32([1.0, 0.97, 0.5]), 12)
    runs = []
    for as_array in (False, True):  # 0-d arrays take Acme's in-place path, numpy scalars the fast one
        capture = Capture()
        adder = NStepAdder(capture, n_step=4, discount=0.99)
        adder.add_first(dm_env.restart(np.zeros(2, np.float32)))
        for t in range(12):
            wrap = np.asarray if as_array else (lambda x: x)
            step = dm_env.StepType.LAST if t == 11 else dm_env.StepType.MID
            adder.add(
                np.float32(t),
                dm_env.TimeStep(step, wrap(rewards[t]), wrap(discounts[t]), np.ones(2, np.float32)),
            )
        runs.append([(np.float32(x.reward), np.float32(x.discount)) for x in capture.items])
    assert len(runs[0]) == 12 + 3
    assert np.array_equal(np.array(runs[0]), np.array(runs[1]))
