"""``actorq bench comm``: its arithmetic on recorded timelines (staleness, time to reach the actors, skipped
versions, the summary) and its argument checks. The run over namespace hosts is
``tests/faults/test_comm_bench.py``."""

from __future__ import annotations

import pytest

from actorq.bench.comm import bench_config, parse_rates
from actorq.bench.comm_summary import (
    block_record,
    format_table,
    notes,
    reach_times,
    skipped,
    staleness_samples,
    summarize,
    version_at,
)
from actorq.bench.netns import check_rate, rate_bits_per_s
from actorq.config import ConfigError
from tests.conftest import tiny_config


def _publish(version: int, t_insert: float, t_done: float) -> dict:
    return {"version": version, "t_insert": t_insert, "t_done": t_done, "late_s": 0.0, "quantize_ms": 1.0}


def test_version_at_is_the_last_entry_at_or_before_the_time():
    timeline = [(1.0, 5), (2.0, 6), (4.0, 8)]
    assert [version_at(timeline, t, before=3) for t in (0.5, 1.0, 1.5, 2.0, 3.9, 4.0, 9.0)] == [
        3,
        5,
        5,
        6,
        6,
        8,
        8,
    ]


def test_staleness_counts_versions_the_publisher_is_ahead_on_the_grid():
    # The actor starts on v1; v2 and v3 become fetchable at t=1 and t=2; the actor runs v3 from t=3 on (v2 skipped).
    published = [(1.0, 2), (2.0, 3)]
    installed = [(0.0, 1), (3.0, 3)]
    samples = staleness_samples(published, installed, start=0.0, end=4.0, interval_s=0.5)
    # t: 0 .5 | 1 1.5 | 2 2.5 | 3 3.5
    assert samples == [0, 0, 1, 1, 2, 2, 0, 0]
    with pytest.raises(ValueError, match="version it started with"):
        staleness_samples(published, [], 0.0, 1.0)


def test_reach_times_pair_each_install_with_its_versions_insert_and_skip_older_versions():
    publishes = [_publish(2, 1.0, 1.1), _publish(3, 2.0, 2.1), _publish(4, 3.0, 3.1)]
    installed = [(0.0, 1), (1.5, 2), (3.25, 4)]  # v1 from before the block; v3 never ran
    assert reach_times(publishes, installed) == pytest.approx([0.5, 0.25])
    assert skipped(publishes, installed) == 1
    # A version published after the actor's newest is not skipped: it may still be on its way.
    assert skipped(publishes, [(0.0, 1), (1.5, 2)]) == 0


def test_block_record_pools_the_actors_and_the_summary_takes_medians_per_rate_and_bits():
    def block(rate, bits, steps, delay, repeat):
        publisher = {
            "publishes": [_publish(2, 1.0, 1.0), _publish(3, 3.0, 3.0)],
            "message_bytes": 4_000_000 if bits == 32 else 1_000_000,
        }
        actors = [
            {
                "installed": [[0.0, 1], [1.0 + delay, 2], [3.0 + delay, 3]],
                "steps": steps,
                "seconds": 4.0,
                "pulls": 8,
            }
        ]
        record = block_record(publisher, actors, start=0.0, end=4.0)
        bps = rate_bits_per_s(rate) if rate else None
        record.update(rate=rate, rate_bits_per_s=bps, comm_bits=bits, repeat=repeat)
        return record

    records = [
        block("8mbit", 32, 400, 0.5, 0),
        block("8mbit", 32, 800, 1.5, 1),
        block("8mbit", 32, 600, 1.0, 2),
        block("8mbit", 8, 1000, 0.25, 0),
        block(None, 32, 2000, 0.1, 0),
    ]
    assert records[0]["reach_s"] == pytest.approx(0.5) and records[0]["installs"] == 2
    # 0.5 s behind after each of the two publishes on a 50 ms grid over 4 s: 20 of 80 samples are 1 version.
    assert records[0]["staleness_mean"] == pytest.approx(0.25) and records[0]["staleness_max"] == 1
    rows = summarize(records)
    assert [(r["rate"], r["comm_bits"]) for r in rows] == [("8mbit", 32), ("8mbit", 8), (None, 32)]
    r32 = rows[0]
    assert r32["repeats"] == 3 and r32["reach_s"] == pytest.approx(1.0)
    assert (r32["reach_s_min"], r32["reach_s_max"]) == pytest.approx((0.5, 1.5))
    assert r32["steps_per_s"] == pytest.approx(150.0) and r32["poll_s"] == pytest.approx(0.5)
    assert r32["wire_s"] == pytest.approx(4.0)  # 32 Mbit of message on an 8 Mbit/s link
    assert rows[2]["wire_s"] is None
    table = format_table(rows)
    assert "8mbit" in table and "none" in table
    text = notes(rows, actors=2, period_s=3.0)  # 32-bit: 2 x 4 s of wire; 8-bit: 2 x 1 s
    assert any("8mbit, 32-bit (baseline)" in line and "cannot carry every version" in line for line in text)
    assert any(
        line.startswith("8mbit, 8-bit: reach 4.00x faster") and "carries every version" in line
        for line in text
    )


def test_rates_are_tc_rates_and_need_netns():
    assert parse_rates("100mbit,1gbit,none", netns=True) == ["100mbit", "1gbit", None]
    assert parse_rates(None, netns=False) == [None]
    with pytest.raises(ConfigError, match="add --netns"):
        parse_rates("100mbit", netns=False)
    with pytest.raises(ConfigError, match="tc unit"):
        parse_rates("100mb", netns=True)
    assert rate_bits_per_s("100mbit") == 1e8 and rate_bits_per_s("1.5gbit") == 1.5e9
    assert rate_bits_per_s("1mbps") == 8e6
    with pytest.raises(ValueError, match="e.g. 100mbit"):
        check_rate("fast")


def test_bench_config_sets_the_wire_bits_and_actors_and_disables_the_rate_limiter():
    config = tiny_config("dqn", **{"replay.samples_per_insert": 8.0, "quantizer.comm_bits": 0})
    cfg = bench_config(config, 4, 3)
    assert cfg.comm_bits == 4 and cfg.actor.num_actors == 3
    assert cfg.replay.samples_per_insert == 0 and cfg.learner.checkpoint_period_s == 0
    assert cfg.network == config.network and cfg.actor.precision == config.actor.precision


@pytest.mark.parametrize("algorithm", ["dqn", "d4pg"])
def test_the_published_learner_weights_map_back_to_the_policys_own(algorithm):
    # The publisher hands the quantizer what the learner publishes: TF names and layout, which the quantizer maps
    # to torch; the actors must end up with the policy's weights, not transposed or renamed ones.
    import numpy as np

    from actorq.bench.comm_worker import learner_variables
    from actorq.measure.actors_worker import reference_state
    from actorq.networks.mapping import tf_to_torch_state

    config = tiny_config(algorithm, **{"network.policy_layers": [32, 16]})
    state = tf_to_torch_state(algorithm, learner_variables(config), (32, 16))
    want = reference_state(config)
    assert state.keys() == want.keys()
    assert all(np.array_equal(state[k], want[k]) for k in want)
