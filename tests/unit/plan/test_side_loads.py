"""``actorq plan``'s side loads: the evaluator's and the quantizer's CPU on the learner's cores, and what the learner
keeps beside them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from actorq.config import load_config
from actorq.plan.model import Measurement, Split, capacity_notes
from actorq.plan.side_loads import PASSES, POLLS, SideLoadBench, SideLoads, step_limit

OWN = Split("learner [0] + actors [1]", (0,), (1,), 1)
CONFIG = "configs/dqn/gym_cartpole.yaml"


def loads(cores=1, load=0.1, step=0.002, steps=500, period=10.0, publish=1.0, poll=0.0):
    return SideLoads(cores, load, step, steps, period, {"fp32": publish, "int8": publish / 2}, 50, poll, 0.05)


def test_the_learner_keeps_the_share_of_its_cores_the_evaluator_and_the_quantizer_leave():
    # Issue 34's Zen 3 figures: 4.29 learner steps/s alone at batch 64, 500-step evaluations every 10 s at 2 ms
    # a step plus 0.1 s to load the weights, ~1 s per quantizer message every 50 learner steps.
    side = loads()
    assert side.evaluator_cores == pytest.approx(0.11)
    capacity, evaluator, quantizer = side.capacity(4.29 * 64, "fp32", 64)
    rate = capacity / 64
    assert rate == pytest.approx(4.29 * 0.89 / (1 + 4.29 / 50))
    assert (evaluator, quantizer) == (pytest.approx(0.11), pytest.approx(rate / 50))
    # What is left of the core at that rate is what the learner got: r' = r (1 - e - q).
    assert rate == pytest.approx(4.29 * (1 - evaluator - quantizer))
    # A cheaper message leaves more; two learner cores halve both shares.
    assert side.capacity(4.29 * 64, "int8", 64)[0] > capacity
    two = loads(cores=2).capacity(4.29 * 64, "fp32", 64)
    assert two[1] == pytest.approx(0.055) and two[0] > capacity


def test_the_quantizers_idle_polls_take_their_share_whatever_the_learners_rate():
    # 2.5 ms of CPU per poll, then 50 ms asleep: ~4.8% of a core (the Zen 3 runs' unexplained quantizer CPU).
    side = loads(poll=0.0025)
    assert side.poll_cores == pytest.approx(0.0025 / 0.0525)
    capacity, evaluator, quantizer = side.capacity(4.29 * 64, "fp32", 64)
    rate = capacity / 64
    assert rate == pytest.approx(4.29 * (0.89 - side.poll_cores) / (1 + 4.29 / 50))
    assert quantizer == pytest.approx(side.poll_cores + rate / 50)
    assert rate == pytest.approx(4.29 * (1 - evaluator - quantizer))
    assert loads(cores=2, poll=0.0025).capacity(4.29 * 64, "fp32", 64)[2] < quantizer


def test_an_evaluator_busier_than_its_period_takes_one_core_at_most():
    side = loads(step=0.05)  # 25 s of evaluation every 10 s: it evaluates back to back, on one thread
    assert side.evaluator_cores == 1.0
    assert side.capacity(256.0, "fp32", 64)[0] == 0.0  # alone on one core it leaves the learner nothing
    assert loads(cores=2, step=0.05).capacity(256.0, "fp32", 64)[1] == pytest.approx(0.5)


def test_measurements_take_the_capacity_beside_the_side_loads_and_keep_the_learners_own():
    from actorq.plan.measure import measurements

    records = [
        {"split": OWN.name, "precision": "fp32", "envs": 8, "supply": s, "capacity": c, "inference_ms": 1.0,
         "step_ms": 2.0, "kernel": "fp32/ort"}
        for s, c in ((1000.0, 250.0), (1200.0, 300.0))
    ]  # fmt: skip
    (m,) = measurements(records, {OWN.name: OWN}, {OWN.name: loads()}, 64)
    expected = loads().capacity(275.0, "fp32", 64)
    assert m.capacity_alone == 275.0 and m.capacity == pytest.approx(expected[0]) and m.capacity < 275.0
    assert (m.evaluator_share, m.quantizer_share) == (pytest.approx(expected[1]), pytest.approx(expected[2]))
    assert "evaluator" in m.capacity_source


def test_side_loads_that_take_a_tenth_of_the_learner_are_pointed_out():
    def cell(evaluator, quantizer):
        return Measurement(OWN, "fp32", 1, 300.0, 200.0, "hand-made", "fp32/ort", None, None, 250.0, evaluator,
                           quantizer)  # fmt: skip

    assert capacity_notes([cell(0.05, 0.04)]) == []
    (note,) = capacity_notes([cell(0.11, 0.07)])
    assert "take 18% of the learner's cores" in note and "200 samples/s instead of 250" in note


def test_step_limit_comes_from_the_config_or_the_task():
    assert step_limit(load_config(CONFIG)) == 500
    assert step_limit(load_config(CONFIG, ["env.max_episode_steps=123"])) == 123
    # dm_control keeps its time limit private: one episode of zero actions finds it (10 s at 0.01 s a step).
    assert step_limit(load_config("configs/d4pg/dmc_cartpole_balance.yaml")) == 1000


def test_a_task_without_a_step_limit_is_a_config_error(monkeypatch):
    """An episode that terminates says nothing of the limit: the plan stops before any timing and names the fix."""
    import dm_env

    import actorq.envs
    from actorq.config import ConfigError

    class Terminates:
        step_limit = None

        def action_spec(self):
            return dm_env.specs.Array((1,), np.float32)

        def reset(self):
            return dm_env.restart(np.zeros(1, np.float32))

        def step(self, action):
            return dm_env.termination(0.0, np.zeros(1, np.float32))

        def close(self):
            pass

    monkeypatch.setattr(actorq.envs, "make_environment", lambda env: Terminates())
    with pytest.raises(ConfigError, match="set env.max_episode_steps"):
        step_limit(load_config(CONFIG))


class FakeClient:
    """Takes the inserts a ReverbWeightPublisher makes, and answers a ReverbWeightSubscriber as a server would."""

    def __init__(self):
        self.inserted: list[np.ndarray] = []
        self.tables: dict[str, list[np.ndarray]] = {}
        self.infos = 0

    def insert(self, data, priorities):
        (table,) = priorities
        self.tables.setdefault(table, []).append(data[0])
        if table == "policy":
            self.inserted.append(data[0])

    def server_info(self, timeout=None):
        from types import SimpleNamespace

        self.infos += 1
        return {
            t: SimpleNamespace(
                current_size=min(1, len(m)),
                rate_limiter_info=SimpleNamespace(insert_stats=SimpleNamespace(completed=len(m))),
            )
            for t, m in self.tables.items()
        }

    def sample(self, table, num_samples):
        from types import SimpleNamespace

        yield [SimpleNamespace(data=[self.tables[table][-1]])]


def test_side_load_bench_times_the_evaluators_and_the_quantizers_real_work(tmp_path):
    from actorq.quantize.codec import decode_message
    from actorq.weights_key import ensure_run_key, load_key_file

    config = load_config(CONFIG, ["network.policy_layers=[64,64]", "evaluator.episodes=3"])
    key = load_key_file(ensure_run_key(tmp_path))
    client = FakeClient()
    with SideLoadBench(config, ["fp32", "int8"], client, key, step_limit(config)) as bench:
        poll = bench.idle_poll()
        side = bench.measure(learner_cores=1, until=time.monotonic() + 0.3, poll_cpu_s=poll)
    assert side.eval_steps == 500 and side.eval_period_s == 10.0 and side.publish_period == 50
    # The quantizer's polls: one download of the learner's message, then POLLS idle server_info calls.
    assert (
        client.infos == POLLS + 1
        and side.poll_cpu_s == poll
        and 0 < poll < 0.01
        and side.poll_interval_s == 0.05
    )
    assert 0 < side.eval_step_cpu_s < 0.05 and 0 < side.eval_load_cpu_s < 1.0
    assert set(side.publish_cpu_s) == {"fp32", "int8"} and all(
        0 < t < 2.0 for t in side.publish_cpu_s.values()
    )
    # Every pass published a signed message the actors of that precision accept, at its natural wire width.
    precisions = [decode_message(m, key=key) for m in client.inserted]
    assert {(m.precision, m.comm_bits) for m in precisions} == {("fp32", 32), ("int8", 8)}
    assert len(client.inserted) == 2 * PASSES
