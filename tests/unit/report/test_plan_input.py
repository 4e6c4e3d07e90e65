"""``actorq report --plan``: C and S_p from ``actorq plan`` for an actor-bound grid, and the plans it refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from actorq.hardware import machine_differences
from actorq.plan import regime as model
from actorq.plan.model import network_sizes
from actorq.report import regime
from actorq.report.analysis import build_tables
from actorq.report.cli import build_report
from actorq.report.grid_md import ci_table
from actorq.report.plan_input import PlanError, check_plans, load_plan
from actorq.report.records import load_runs
from tests.unit.report.synthetic import make_run, ramp_returns

TASK = "dmc:cartpole:balance"
LAYERS = [2048, 2048, 2048]
SPI = 0.25
ZEN4 = {
    "model": "AMD EPYC", "arch": "x86_64", "cores": 2, "l2_bytes": 1048576, "l3_bytes": 33554432, "isa_limit": {},
    "flags": {"avx2": True, "fma": True, "f16c": True, "avx512f": True, "avx512_vnni": True, "amx_tile": False},
}  # fmt: skip
ZEN3 = {**ZEN4, "l2_bytes": 524288, "flags": {"avx2": True, "fma": True, "f16c": True, "avx512f": False}}
PINNED = {"name": "learner [0] + actors [1]", "learner_cpus": [0], "actor_cpus": [1], "actors": 1}
SHARED = {"name": "shared [0,1]", "learner_cpus": [0, 1], "actor_cpus": [0, 1], "actors": 2}
# (split, precision, envs per actor): (S_p env steps/s, C samples/s), as `actorq plan` measured them on a Zen 4.
MEASURED = {
    (PINNED["name"], "fp32", 1): (476.0, 679.0),
    (PINNED["name"], "int8", 1): (2144.0, 629.0),
    (PINNED["name"], "fp32", 8): (1950.0, 644.0),
    (PINNED["name"], "int8", 8): (3891.0, 562.0),
    (SHARED["name"], "fp32", 1): (716.0, 357.0),
}
SPLITS = {s["name"]: s for s in (PINNED, SHARED)}


def write_plan(path: Path, **meta) -> Path:
    """An ``actorq plan --json`` document with :data:`MEASURED` (only the fields the report reads, and a few)."""
    base = {
        "config": "configs/x.yaml", "task": TASK, "algorithm": "d4pg", "policy_layers": LAYERS, "batch_size": 64,
        "cores": [0, 1], "machine": ZEN4,
        "measurements": [
            {"split": {**SPLITS[split], "learner_elsewhere": False}, "precision": p, "envs_per_actor": envs,
             "supply": supply, "capacity": capacity, "capacity_source": "measured beside the actors"}
            for (split, p, envs), (supply, capacity) in MEASURED.items()
        ],
    }  # fmt: skip
    base.update(meta)
    path.write_text(json.dumps({"kind": "plan", "meta": base, "records": [], "summary": [], "notes": []}))
    return path


def grid(root: Path, seeds: int = 3, hardware: dict | None = ZEN4, **config) -> Path:
    """An actor-bound grid on the plan's setting: fp32 and int8, the learner starved in every run (so no run gives
    C), the learner on core 0 and one actor on core 1, 1 env per actor, spi 0.25."""
    extra = {
        "network": {"policy_layers": LAYERS},
        "d4pg": {"critic_layers": [512, 512, 256]},
        "affinity": {"learner": [0], "replay": [0], "quantizer": [0], "evaluator": [0], "actor": [1]},
        "actor": {"envs_per_actor": 1},
        # A small error buffer puts the limiter's lower bound above the snapshots' samples-per-insert debt: the
        # learner is held back at every snapshot (starved), as in an actor-bound run.
        "replay": {"error_buffer": 10.0},
    }
    for section, values in config.items():
        extra[section] = {**extra.get(section, {}), **values}
    for seed in range(seeds):
        for precision, rate, t_full in (("fp32", 400.0, 300.0), ("int8", 1600.0, 100.0)):
            make_run(
                root, precision, seed, ramp_returns(40, t_full, seed=seed), steps_per_s=rate, spi=SPI, batch=64,
                learner_rate=rate * SPI / 64, config_extra=extra, hardware=hardware,
            )  # fmt: skip
    return root


def tables(runs_dir: Path, *plans: Path):
    runs, _ = load_runs([runs_dir])
    loaded = tuple(load_plan(p) for p in plans)
    check_plans(loaded, runs)
    (table,) = build_tables(runs, plans=loaded)
    return table


def expected(precision: str, envs: int = 1) -> float:
    """The predicted speed-up over fp32 from the plan's figures, through the regime model's one formula."""

    def delivered(p: str) -> float:
        supply, capacity = MEASURED[(PINNED["name"], p, envs)]
        return model.delivered_rate(supply, capacity, SPI)

    return delivered(precision) / delivered("fp32")


def test_an_actor_bound_grid_has_no_capacity_without_a_plan(tmp_path):
    t = tables(grid(tmp_path / "runs"))
    runs = [m for ms in t.runs.values() for m in ms]
    assert all(m.regime.label == regime.ACTOR_BOUND for m in runs)  # every learner starved: C unknown
    assert all(m.regime.capacity is None for m in runs)
    assert t.predicted_speedup("int8") is None
    assert "C from" not in ci_table(t)  # unchanged tables without --plan


def test_the_plan_gives_c_and_s_p_and_the_predicted_speedup(tmp_path):
    plan = write_plan(tmp_path / "plan.json")
    t = tables(grid(tmp_path / "runs"), plan)
    # int8: 2144 env steps/s vs 629 / 0.25 = 2516 allowed; fp32: 476 vs 2716: actor-bound both, 4.5x.
    assert t.predicted_speedup("int8") == pytest.approx(expected("int8"))
    assert t.predicted_speedup("int8") == pytest.approx(2144.0 / 476.0)
    int8 = t.runs["int8"][0].regime
    assert int8.capacity.value == 629.0 and int8.supply.value == 2144.0  # the plan's, not the run's 1600
    assert int8.capacity.plan.startswith(
        f"plan {plan}, AMD EPYC (2 cores; avx2 fma f16c avx512f avx512_vnni)"
    )
    assert "beside int8 actors, 1 env(s)/actor" in int8.capacity.source
    assert t.capacity_from("int8") == int8.capacity.plan
    table = ci_table(t)
    assert "C from (model)" in table and int8.capacity.plan in table


def test_the_report_names_where_c_came_from_per_cell(tmp_path):
    plan = write_plan(tmp_path / "plan.json")
    runs = grid(tmp_path / "runs")
    report = build_report([str(runs)], tmp_path / "out", plans=[str(plan)])
    text = report.read_text()
    assert f"from plan {plan}, AMD EPYC" in text and "C from (model)" in text
    numbers = json.loads((tmp_path / "out" / "report.json").read_text())[TASK]["labels"]["int8"]
    assert numbers["predicted_speedup"] == pytest.approx(expected("int8"))
    assert numbers["capacity_from"].startswith(f"plan {plan}")
    # Without --plan: no column, no key (committed reports re-render unchanged).
    build_report([str(runs)], tmp_path / "bare")
    assert "C from" not in (tmp_path / "bare" / "report.md").read_text()
    assert "capacity_from" not in (tmp_path / "bare" / "report.json").read_text()


def _set_dram(runs: Path, gbs: dict[str, float], fp32_bytes: int = 33_628_160) -> None:
    """Give the named runs (``fp32-s0``...) their actors' measured DRAM bandwidth and weight bytes (default: the
    3x2048 policy's, 32.1 MiB in fp32, over the 32 MiB L3 of :data:`ZEN4`)."""
    for name, value in gbs.items():
        path = runs / name / "summary.json"
        summary = json.loads(path.read_text())
        precision = summary["precision"]
        summary["hardware"] = {
            **summary["hardware"], "dram_read_gbs": value,
            "weights_read_bytes": fp32_bytes // (1 if precision == "fp32" else 4),
        }  # fmt: skip
        path.write_text(json.dumps(summary))


def test_a_plan_timed_at_another_memory_bandwidth_than_its_runs_is_named(tmp_path):
    runs = grid(tmp_path / "runs", seeds=2)
    names = [f"{p}-s{s}" for p in ("fp32", "int8") for s in range(2)]
    _set_dram(runs, dict.fromkeys(names, 17.6))
    # The plan read 9.0 GB/s: every run is ~2x away from it, and fp32's 32.1 MiB of weights exceed the 32 MiB L3.
    slow = write_plan(tmp_path / "slow.json", machine={**ZEN4, "dram_read_gbs": 9.0})
    text = build_report([str(runs)], tmp_path / "out", plans=[str(slow)]).read_text()
    assert "**Caveat: memory bandwidth.**" in text
    assert f"{slow} timed its actors at a DRAM read bandwidth of 9.0 GB/s, and 4 of the 4 runs" in text
    assert "(17.6-17.6 GB/s, median 17.6, over 4 runs)" in text
    assert (
        "fp32 actors' weights (32.07 MiB) do not fit in the L3 (32.00 MiB), so each batch-1 forward reads them "
        "from memory" in text
    )
    # A plan at the runs' bandwidth (within 1.25x of every run): nothing to say.
    near = write_plan(tmp_path / "near.json", machine={**ZEN4, "dram_read_gbs": 15.0})
    assert (
        "Caveat: memory bandwidth"
        not in build_report([str(runs)], tmp_path / "o2", plans=[str(near)]).read_text()
    )
    # A plan that recorded none (made before plans measured it): named where the bandwidth matters to the runs,
    # i.e. fp32's weights exceed the L3 or the runs' own bandwidths differ by more than 1.25x.
    old = write_plan(tmp_path / "old.json")
    text = build_report([str(runs)], tmp_path / "o3", plans=[str(old)]).read_text()
    assert f"{old} recorded no memory bandwidth (plans measure it since 2026-11-29)" in text
    assert "fp32 actors' weights (32.07 MiB)" in text
    _set_dram(runs, dict.fromkeys(names, 17.6), fp32_bytes=1_000_000)  # a policy the L3 holds, one bandwidth
    text = build_report([str(runs)], tmp_path / "o6", plans=[str(old)]).read_text()
    assert "Caveat: memory bandwidth" not in text
    _set_dram(runs, {"fp32-s1": 9.3, "int8-s1": 9.3}, fp32_bytes=1_000_000)
    text = build_report([str(runs)], tmp_path / "o4", plans=[str(old)]).read_text()
    assert "cannot be checked" in text and "(9.3-17.6 GB/s, median 13.5, over 4 runs)" in text
    assert "fp32 actors' weights" not in text
    assert "DRAM 9.30-17.60 GB/s" in text  # the machine line gives the runs' range beside the median
    # Without --plan the range is still on the machine line, and no caveat (there is no prediction to qualify).
    bare = build_report([str(runs)], tmp_path / "o5").read_text()
    assert "DRAM 9.30-17.60 GB/s" in bare and "Caveat: memory bandwidth" not in bare


def test_runs_the_plan_did_not_time_keep_c_from_the_runs(tmp_path):
    plan = write_plan(tmp_path / "plan.json")
    # 4 envs per actor: the plan timed 1 and 8, so C is the median of its split's measurements beside the same
    # precision, and S_p the run's own.
    t = tables(grid(tmp_path / "four", actor={"envs_per_actor": 4}), plan)
    r = t.runs["int8"][0].regime
    assert r.capacity.value == pytest.approx((629.0 + 562.0) / 2)
    assert "median of 2 measurements beside int8 actors (none of int8 at 4" in r.capacity.source
    assert r.supply.value == pytest.approx(1600.0) and r.supply.plan == ""
    # Actors on core 0 too: a split the plan did not time, so nothing from it (and no run gives C either).
    t = tables(grid(tmp_path / "other", affinity={"actor": [0, 1]}), plan)
    assert all(m.regime.capacity is None for ms in t.runs.values() for m in ms)
    assert t.predicted_speedup("int8") is None and t.capacity_from("int8").startswith("none for 6 of 6 runs")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"batch_size": 128}, "config differs .*learner.batch_size: 128 vs 64"),
        (
            {"policy_layers": [256, 256]},
            r"config differs .*policy_layers: \[256, 256\] vs \[2048, 2048, 2048\]",
        ),
        ({"algorithm": "dqn"}, "config differs .*algorithm: dqn vs d4pg"),
        (
            {"layers": {"policy_layers": LAYERS, "critic_layers": [512]}},
            r"config differs .*critic_layers: \[512\] vs \[512, 512, 256\]",
        ),
        ({"task": "gym:CartPole-v1"}, "no run is of that task"),
        (
            {"machine": ZEN3},
            "machine differs .*flags: avx2 f16c fma vs avx2 avx512_vnni avx512f f16c fma .*l2_bytes: 524288 vs 1048576",
        ),
    ],
)
def test_a_plan_of_another_config_or_machine_is_refused(tmp_path, change, message):
    runs = grid(tmp_path / "runs", seeds=1)
    plan = write_plan(tmp_path / "plan.json", **change)
    with pytest.raises(PlanError, match=message) as caught:
        build_report([str(runs)], tmp_path / "out", plans=[str(plan)])
    assert "leave --plan out" in str(caught.value) or "no run is of that task" in str(caught.value)
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_runs_without_a_recorded_cpu_two_plans_of_a_task_and_other_files_are_refused(tmp_path):
    plan = write_plan(tmp_path / "plan.json")
    with pytest.raises(PlanError, match="recorded no CPU"):
        tables(grid(tmp_path / "old", seeds=1, hardware=None), plan)
    with pytest.raises(PlanError, match="both plans of dmc:cartpole:balance: give one plan per task"):
        tables(grid(tmp_path / "runs", seeds=1), plan, plan)
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"kind": "actors", "meta": {}}))
    with pytest.raises(PlanError, match="not an `actorq plan --json` file"):
        load_plan(bench)
    broken = write_plan(tmp_path / "broken.json", measurements=[{"precision": "fp32"}])
    with pytest.raises(PlanError, match="missing or malformed field"):
        load_plan(broken)


def test_network_sizes_are_found_in_either_section():
    old = {"algorithm": "d4pg", "network": {"policy_layers": [64], "critic_layers": [32, 32], "vmin": -1.0}}
    new = {"algorithm": "d4pg", "network": {"policy_layers": [64]}, "d4pg": {"critic_layers": [32, 32]}}
    assert network_sizes(old) == network_sizes(new) == {"policy_layers": [64], "critic_layers": [32, 32]}


def test_machine_differences_compare_the_flags_that_are_on():
    assert machine_differences(ZEN4, copy.deepcopy(ZEN4)) == []
    fewer_listed = {**ZEN4, "flags": {f: on for f, on in ZEN4["flags"].items() if on}}
    assert machine_differences(ZEN4, fewer_listed) == []  # an older record lists fewer flags as off
    assert machine_differences(ZEN4, {**ZEN4, "cores": 4}) == ["cores: 2 vs 4"]
    assert machine_differences(ZEN4, {k: v for k, v in ZEN4.items() if k != "l2_bytes"}) == [
        "l2_bytes: 1048576 vs not recorded"
    ]


def test_given_parameters_replace_the_runs_and_must_be_one_per_run():
    run = regime.RunRates(
        name="a", group=("t",), precision="int8", cell="", samples_per_insert=SPI, batch_size=64,
        learner_steps_per_s=1.0, env_steps_per_s=300.0, actor_free_rate=500.0, actor_free_source="cpu",
        learner_blocked_share=0.0, actor_blocked_share=0.9,
    )  # fmt: skip
    given = regime.Given(regime.Estimate(629.0, "plan", plan="plan p"), regime.Estimate(2144.0, "plan"))
    (r,) = regime.assess([run], [given])
    assert (r.capacity.value, r.supply.value) == (629.0, 2144.0)
    assert r.delivered == model.delivered_rate(2144.0, 629.0, SPI)
    (r,) = regime.assess([run], [None])  # the run's own: never starved, 64 samples/s
    assert r.capacity.value == 64.0 and r.capacity.runs == ("a",)
    with pytest.raises(ValueError, match="one entry per run"):
        regime.assess([run], [])
