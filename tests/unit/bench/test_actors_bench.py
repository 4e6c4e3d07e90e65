"""The actor benchmarks' pure parts (order, summaries, notes, plans) and the measurement loop on a stub role."""

from __future__ import annotations

import shutil
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

from actorq.bench.actors_summary import amdahl_notes, summarize
from actorq.bench.floors import batching_notes, gemm_rate_gmacs
from actorq.experiments import ablation
from actorq.experiments.orchestration import plan_runs
from actorq.measure.actors_worker import Variant, WorkerPool, bench_config, measure, reference_state
from actorq.measure.common import interleave
from actorq.timers import BREAKDOWN_COMPONENTS, Timers
from tests.conftest import tiny_config

FP32 = Variant("fp32", 32, 1000)
INT8 = Variant("int8", 8, 1000)


def test_blocks_interleave_and_rotate():
    order = interleave([FP32, INT8], repeats=3)
    assert [(r, v.precision) for r, v in order] == [
        (0, "fp32"), (0, "int8"), (1, "int8"), (1, "fp32"), (2, "fp32"), (2, "int8"),
    ]  # fmt: skip


def test_blocks_and_experiment_runs_share_one_rotation():
    # Fewer repeats than items: the shifts spread over the cycle (0 and 2 of 4), as in actorq experiment's plan.
    labels = ["a", "b", "c", "d"]
    order = [item for _, item in interleave(labels, repeats=2)]
    assert order == ["a", "b", "c", "d", "c", "d", "a", "b"]
    assert [r.label for r in plan_runs(labels, [0, 1])] == order


def _record(variant: Variant, repeat: int, rate: float, inference_ms: float, actor: int = 0) -> dict:
    seconds = 10.0
    steps = int(rate * seconds)
    comps = dict.fromkeys(BREAKDOWN_COMPONENTS, 0.0)
    comps["inference"] = steps * inference_ms / 1e3
    comps["env"] = steps * 0.5e-3
    comps["pull"] = 0.2
    comps["adder"] = steps * 0.4e-3
    return {
        "variant": variant.name, "precision": variant.precision, "comm_bits": variant.comm_bits,
        "update_period": variant.update_period, "repeat": repeat, "actor": actor, "steps": steps,
        "seconds": seconds, "steps_per_s": steps / seconds, "components": comps, "pulls": 3, "applied": 2,
        "message_bytes": 1000 * variant.comm_bits, "load_before": 1.0,
    }  # fmt: skip


def test_summary_medians_ratios_and_breakdown():
    records = [
        _record(FP32, 0, 100.0, 5.0), _record(INT8, 0, 160.0, 2.0),
        _record(FP32, 1, 120.0, 5.0), _record(INT8, 1, 150.0, 2.0),
        _record(FP32, 2, 110.0, 5.0), _record(INT8, 2, 170.0, 2.0),
    ]  # fmt: skip
    rows = {r["variant"]: r for r in summarize(records, learner_rate=4.0)}
    fp32, int8 = rows["fp32/c32"], rows["int8/c8"]
    assert fp32["steps_per_s"] == 110.0 and (fp32["steps_per_s_min"], fp32["steps_per_s_max"]) == (
        100.0,
        120.0,
    )
    assert int8["steps_per_s"] == 160.0 and int8["speedup"] == pytest.approx(160 / 110)
    assert int8["speedup_min"] == pytest.approx(150 / 120) and int8["speedup_max"] == pytest.approx(1.6)
    assert int8["ms_per_step"]["inference"] == pytest.approx(2.0)
    assert int8["ms_per_step"]["env"] == pytest.approx(0.5)
    # other = wall - timed components: 1/rate - (2 + 0.5 + 0.4) ms - pulls
    steps = sum(int(r * 10) for r in (160.0, 150.0, 170.0))
    expected_other = (30.0 - sum(s * 2.9e-3 + 0.2 for s in (1600, 1500, 1700))) / steps * 1e3
    assert int8["ms_per_step"]["other"] == pytest.approx(expected_other)
    assert int8["ms_per_broadcast"] == pytest.approx(1e3 * 0.6 / 6)
    assert int8["weight_age_s"] == pytest.approx(1000 / 320) and int8[
        "weight_age_learner_steps"
    ] == pytest.approx(4 * 1000 / 320)
    notes = amdahl_notes(list(rows.values()))
    assert len(notes) == 1 and "2.50x the speed" in notes[0] and "Amdahl" in notes[0]


def test_measure_counts_a_window_and_makes_every_pull_a_new_broadcast():
    class OnlyNewSubscriber:
        """Like the actors' Reverb subscriber: the one message in the table is downloaded once, again only after
        ``refetch``."""

        def __init__(self):
            self.fetched = True

        def refetch(self):
            self.fetched = False

        def latest(self):
            message, self.fetched = (None if self.fetched else 1), True
            return message

    class StubRole:
        """Pulls every 3 steps; a pull 'applies' only a downloaded message newer than the version it knows."""

        def __init__(self):
            self.timers = Timers(totals=defaultdict(float), counts=defaultdict(int))
            self.steps = 0
            self.actor = SimpleNamespace(
                weights=SimpleNamespace(version=1, received=1, rejected=0),
                policy=SimpleNamespace(kernel_name="int8/x", selection=SimpleNamespace(time_us=1.0)),
                subscriber=OnlyNewSubscriber(),
            )

        def step(self):
            self.steps += 1
            self.timers.add("inference", 1e-4)
            if self.steps % 3 == 0:
                self.timers.add("pull", 1e-4)
                version = self.actor.subscriber.latest()
                if version is not None and self.actor.weights.version < version:
                    self.actor.weights.version = version
                    self.actor.weights.received += 1

    fresh = measure(StubRole(), seconds=0.05, fresh=True)
    stale = measure(StubRole(), seconds=0.05, fresh=False)
    assert fresh["steps"] > 0 and fresh["pulls"] == fresh["steps"] // 3
    assert fresh["applied"] in (
        fresh["pulls"] - 1,
        fresh["pulls"],
    )  # every pull after the first applies again
    assert stale["applied"] == 0 and stale["pulls"] > 0
    assert fresh["components"]["inference"] == pytest.approx(fresh["steps"] * 1e-4)
    assert fresh["steps_per_s"] == pytest.approx(fresh["steps"] / fresh["seconds"])


def test_bench_config_and_reference_weights_fit_the_actor_policy():
    from actorq.actors.policy import ActorPolicy
    from actorq.envs import environment_spec
    from actorq.quantize.codec import decode_message, encode_message

    config = tiny_config("d4pg", **{"replay.samples_per_insert": 8.0})
    cfg = bench_config(config, Variant("int8", 8, 30), actors=3)
    assert cfg.replay.samples_per_insert == 0 and cfg.actor.update_period == 30 and cfg.actor.num_actors == 3
    assert cfg.actor.precision == "int8" and cfg.comm_bits == 8
    state = reference_state(cfg, seed=1)
    spec = environment_spec(cfg.env)
    policy = ActorPolicy("d4pg", spec.obs_dim, spec.num_actions, (32, 32), "int8", spec.action_low,
                             spec.action_high)  # fmt: skip
    buf = encode_message(state, version=1, learner_step=0, precision="int8", comm_bits=8)
    policy.apply(decode_message(buf, expected=policy.expected_shapes()))
    out = policy(np.zeros(spec.obs_dim, np.float32))
    assert out.shape == (spec.num_actions,) and np.all(np.isfinite(out))
    assert np.array_equal(reference_state(cfg, seed=1)["torso.0.weight"], state["torso.0.weight"])


def test_the_pool_publishes_the_policy_signed_with_its_key_at_the_blocks_precision():
    # Every bench that starts actor workers (actors, ablation, learner --actors) publishes through this one call;
    # the workers verify with the pool's key, so an unsigned or foreign message would leave them without weights.
    from actorq.quantize.codec import decode_message
    from actorq.quantize.message import UnauthenticatedMessageError
    from actorq.quantize.signing import generate_key

    config = tiny_config("d4pg")
    cfg = bench_config(config, Variant("int8", 8, 30), actors=1)
    pool = WorkerPool(cfg, 1)
    published = []
    pool._publisher = SimpleNamespace(publish=published.append)
    try:
        message = pool.publish_policy(reference_state(cfg), cfg)
    finally:
        shutil.rmtree(pool.workdir)
    assert published == [message]
    decoded = decode_message(message, key=pool.key)
    assert (decoded.precision, decoded.comm_bits) == ("int8", 8)
    with pytest.raises(UnauthenticatedMessageError):  # another run's key: what the workers' check rejects
        decode_message(message, key=generate_key())


def test_ablation_plan_covers_the_paper_grid_and_dedupes_the_sweep():
    grid, sweep, measured = ablation.plan([30, 1000], [30, 100], ["int8"])
    assert {(v.precision, v.comm_bits, v.update_period) for v in grid} == {
        (p, b, k) for p in ("fp32", "int8") for b in (32, 8) for k in (30, 1000)
    }
    assert sweep == [Variant("int8", 8, 30), Variant("int8", 8, 100)]
    # int8/c8 at K=30 is in both: measured once, every other cell of either list measured too, grid first.
    assert measured == grid + [Variant("int8", 8, 100)]


def test_ablation_gains_sentence():
    rows = [
        {"variant": v, "update_period": 30, "steps_per_s": s,
         "ms_per_step": {"inference": 1.0, "env": 1.0, "pull": 2.0, "decode": 0.0, "apply": 0.0, "adder": 0.0}}
        for v, s in (("fp32/c32", 100.0), ("fp32/c8", 130.0), ("int8/c32", 110.0), ("int8/c8", 150.0))
    ]  # fmt: skip
    (note,) = ablation.gains(rows)
    assert (
        "communication (fp32/c8) 1.30x" in note and "both (int8/c8) 1.50x" in note and "50% in pull" in note
    )


def test_acme_baseline_plan_rotates_systems():
    runs = plan_runs(
        ["acme-fp32", "fp32", "int8"], [0, 1]
    )  # the Acme baseline plans with actorq experiment's plan
    assert [r.name for r in runs] == [
        "acme-fp32-s0",
        "fp32-s0",
        "int8-s0",
        "fp32-s1",
        "int8-s1",
        "acme-fp32-s1",
    ]


def test_summary_compares_each_env_count_with_fp32_at_the_same_count_and_with_one_env():
    fp32_8, int8_8 = Variant("fp32", 32, 1000, 8), Variant("int8", 8, 1000, 8)
    records = []
    for rep in range(2):
        records += [_record(FP32, rep, 100.0, 5.0), _record(INT8, rep, 150.0, 2.0)]
        records += [_record(fp32_8, rep, 180.0, 1.5), _record(int8_8, rep, 360.0, 0.5)]
    for r in records:
        r["envs"] = 8 if r["variant"].endswith("/n8") else 1
        r["cpu_s"] = r["seconds"] / 2
    rows = {r["variant"]: r for r in summarize(records)}
    assert set(rows) == {"fp32/c32", "int8/c8", "fp32/c32/n8", "int8/c8/n8"}
    n8 = rows["int8/c8/n8"]
    assert n8["envs"] == 8 and n8["baseline"] == "fp32/c32/n8" and n8["speedup"] == pytest.approx(2.0)
    assert n8["vs_one_env"] == pytest.approx(360 / 150) and rows["fp32/c32/n8"][
        "vs_one_env"
    ] == pytest.approx(1.8)
    assert n8["inference_vs_one_env"] == pytest.approx(0.25)
    assert n8["steps_per_cpu_s"] == pytest.approx(720.0)  # steps over half the wall time in CPU seconds
    assert rows["int8/c8"]["baseline"] == "fp32/c32" and rows["fp32/c32"]["vs_one_env"] == pytest.approx(1.0)
    notes = batching_notes(list(rows.values()), {"w1": np.zeros((64, 64)), "b1": np.zeros(64)}, 64)
    assert len(notes) == 2 and notes[0].startswith("fp32/c32/n8") and notes[1].startswith("int8/c8/n8")
    assert "inference_floor_ms" not in rows["int8/c8"]  # N=1 rows have no batching floor
    assert n8["inference_floor_ms"] == pytest.approx(64 * 64 / n8["gemm_gmacs"] / 1e6)
    # N=1's inference per env step was 2 ms (n8 / inference_vs_one_env), so the floor is compared with that
    assert n8["inference_floor_vs_one_env"] == pytest.approx(n8["inference_floor_ms"] / 2.0)
    # the step bound keeps env, writer and pulls as measured and puts inference at the floor
    best = 1e3 / n8["steps_per_s"] - n8["ms_per_step"]["inference"] + n8["inference_floor_ms"]
    assert n8["steps_bound_vs_one_env"] == pytest.approx(1e3 / rows["int8/c8"]["steps_per_s"] / best)
    assert n8["steps_bound_vs_one_env"] > n8["vs_one_env"]  # the floor is below the 0.5 ms measured
    assert "at most" in notes[1] and f"{n8['steps_bound_vs_one_env']:.2f}x N=1's" in notes[1]
    # A conv torso's multiply-adds (each weight reused at every output position) count on top of the matrices'.
    batching_notes(list(rows.values()), {"w1": np.zeros((64, 64)), "c": np.zeros((8, 4, 3, 3))}, 64, 1000)
    assert n8["inference_floor_ms"] == pytest.approx((64 * 64 + 1000) / n8["gemm_gmacs"] / 1e6)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_gemm_rate_is_measured_per_batch(precision):
    """A real measurement: finite, and more multiply-adds per second at batch 16 than at batch 1 (a batch-1
    GEMM reads each weight for one multiply-add; every CPU reuses it across rows)."""
    one, many = gemm_rate_gmacs(precision, 1, 512, 0.05), gemm_rate_gmacs(precision, 16, 512, 0.05)
    assert 0 < one < many < 1e4
    with pytest.raises(ValueError, match="fp16"):
        gemm_rate_gmacs("fp16", 1, 64)
