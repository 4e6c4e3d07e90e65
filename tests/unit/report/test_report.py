"""Report generation from synthetic run directories: numbers against hand-computed values, files written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actorq.report import stats
from actorq.report.analysis import WATTS_PER_CORE, build_tables
from actorq.report.cli import build_report
from actorq.report.records import load_runs
from actorq.report.runs import discover
from tests.unit.report.synthetic import EVAL_PERIOD, make_run, ramp_returns

N_EVALS = 40


@pytest.fixture
def experiment(tmp_path):
    """fp32 reaches the plateau at 200/210/220 s, int8 at 100/105/110 s (3 seeds each, +-10 noise)."""
    root = tmp_path / "exp"
    root.mkdir()
    for seed in range(3):
        make_run(
            root,
            "fp32",
            seed,
            ramp_returns(N_EVALS, 200 + 10 * seed, seed=seed),
            steps_per_s=100,
            adder_wait=0.02,
        )
        make_run(
            root,
            "int8",
            seed,
            ramp_returns(N_EVALS, 100 + 5 * seed, seed=10 + seed),
            steps_per_s=200,
            adder_wait=0.02,
        )
    make_run(root, "int8", 9, ramp_returns(5, 50), exit_reason="interrupted")  # must be left out
    return root


def _expected_time(returns: np.ndarray, threshold: float, k: int = 3) -> float:
    """Independent re-computation: first i with mean(returns[i-k+1:i+1]) >= threshold, at t = 10 * (i + 1)."""
    for i in range(k - 1, len(returns)):
        if returns[i - k + 1 : i + 1].mean() >= threshold:
            return EVAL_PERIOD * (i + 1)
    raise AssertionError("never reached")


def test_discovery_and_skipping(experiment):
    assert len(discover([experiment])) == 7
    runs, skipped = load_runs([experiment])
    assert len(runs) == 6
    assert [p.name for p, _ in skipped] == ["int8-s9"] and "interrupted" in skipped[0][1]
    run = next(r for r in runs if r.name == "fp32-s0")
    assert run.eval_t[0] == pytest.approx(10.0)  # time zero from summary.energy.started_at
    assert run.label == "fp32" and run.seed == 0 and run.task == "dmc:cartpole:balance"


def test_threshold_times_and_speedups_match_hand_computation(experiment):
    runs, _ = load_runs([experiment])
    (table,) = build_tables(runs, k=3)
    fp32 = [r for r in runs if r.label == "fp32"]
    best = max(max(np.convolve(r.eval_return, np.ones(3) / 3, mode="valid")) for r in fp32)
    assert table.best == pytest.approx(best)
    assert table.threshold == pytest.approx(0.95 * best)
    expected = {(r.label, r.seed): _expected_time(r.eval_return, table.threshold) for r in runs}
    for label in ("fp32", "int8"):
        for m in table.runs[label]:
            assert m.t_reach == pytest.approx(expected[(label, m.seed)])
            assert m.steps_reach == pytest.approx(m.t_reach * (100 if label == "fp32" else 200))
    t32 = sorted(expected[("fp32", s)] for s in range(3))[1]
    t8 = sorted(expected[("int8", s)] for s in range(3))[1]
    assert table.summary("fp32", "t_reach", censored=True).median == t32
    speed, paired = table.speedup("int8")
    assert speed == pytest.approx(t32 / t8)
    assert 1.5 < speed < 2.5  # int8 ramps twice as fast by construction
    assert len(paired) == 3 and all(1.3 < p < 2.7 for p in paired)


def test_regime_breakdown_staleness_and_energy(experiment):
    runs, _ = load_runs([experiment])
    (table,) = build_tables(runs)
    m = next(m for m in table.runs["fp32"] if m.seed == 0)
    # 10 ms/step of work (adder's own cost 1 ms) + 20 ms/step waiting after the first two rows.
    assert m.breakdown["inference"] == pytest.approx(0.004)
    assert m.wait_share == pytest.approx(0.64, abs=0.05)
    assert m.actor_free_rate == pytest.approx(100.0, rel=0.02)
    assert m.learner_rate == pytest.approx(4.0) and m.learner_insert_rate == pytest.approx(4 * 256 / 16)
    assert m.regime.label == "learner-bound"
    assert m.achieved_spi == pytest.approx(16.0, rel=0.01)
    assert m.acting_start == pytest.approx(3.5)  # between the replay rows at 1 s (0 inserts) and 6 s
    assert m.staleness == pytest.approx(40.0, abs=1.0)  # weights lag the learner by 10 s at 4 steps/s
    assert m.broadcast_cost["pull"] > 0
    assert m.cpu_to_reach == pytest.approx(1.8 * m.t_reach)
    assert m.energy_kwh(True) == pytest.approx(1.8 * m.t_reach * WATTS_PER_CORE / 3.6e6)
    # Projection: with k = inf the actors' own rate limits; T(inf) = start + N / A.
    assert m.projected(float("inf")) == pytest.approx(m.acting_start + m.steps_reach / m.actor_free_rate)
    assert m.projected(1.0) == pytest.approx(m.acting_start + m.steps_reach / m.learner_insert_rate)


def test_unreached_precision_is_censored(tmp_path):
    for seed in range(3):
        make_run(tmp_path, "fp32", seed, ramp_returns(20, 100, seed=seed))
        # fp16 reaches only 500 (never the ~950 threshold) in two seeds of three.
        peak = 1000.0 if seed == 0 else 500.0
        make_run(tmp_path, "fp16", seed, ramp_returns(20, 100, peak=peak, seed=seed))
    runs, _ = load_runs([tmp_path])
    (table,) = build_tables(runs)
    s = table.summary("fp16", "t_reach", censored=True)
    assert s.median is None and s.n_reached == 1 and s.n == 3
    assert table.speedup("fp16")[0] is None


def test_build_report_writes_markdown_figures_and_numbers(experiment, tmp_path):
    out = tmp_path / "report"
    bench = tmp_path / "bench.json"
    row = {
        "variant": "int8/c8",
        "update_period": 30,
        "actors": 1,
        "steps_per_s": 300.0,
        "steps_per_s_min": 290.0,
        "steps_per_s_max": 310.0,
        "speedup": 2.0,
        "message_bytes": 8.6e6,
        "ms_per_broadcast": 12.0,
        "ms_per_step": {
            "inference": 1.0,
            "env": 1.0,
            "pull": 0.5,
            "decode": 0.1,
            "apply": 0.1,
            "adder": 0.3,
            "other": 0.1,
        },
        "pulls_per_s": 10.0,
        "weight_age_s": 0.05,
        "weight_age_learner_steps": 0.2,
    }
    bench.write_text(
        json.dumps(
            {
                "kind": "ablation",
                "meta": {"fresh": True, "learner_rate": 4.0},
                "summary": [row, dict(row, variant="fp32/c32", speedup=1.0)],
                "sweep": [row],
            }
        )
    )
    path = build_report([str(experiment)], out, bench=[str(bench)])
    text = path.read_text()
    for heading in (
        "Time to threshold with 95% confidence intervals (Table 2 analogue)",
        "Throughput and CPU per role",
        "Reward at equal env steps, paired by seed",
        "Reward at equal learner steps, paired by seed",
        "Reward over whole runs, paired by seed",
        "Regime of each run",
        "Convergence",
        "Actor runtime breakdown",
        "Broadcasts",
        "Regime of each run: the model and its numbers",
        "Projection",
        "Energy and CO2",
        "Benchmark: ablation",
        "Pull-period sweep",
    ):
        assert heading in text, heading
    assert "int8-s9 (exit interrupted)" in text
    assert "Paper (Cartpole Balance)" in text and "3.12" in text  # the paper's Table 2 row beside ours
    assert "learner-bound" in text and "estimate" in text
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert (
        "convergence_steps_dmc_cartpole_balance.png" in pngs and "breakdown_dmc_cartpole_balance.png" in pngs
    )
    assert all((out / p).stat().st_size > 1000 for p in pngs)
    for p in pngs:
        assert f"({p})" in text  # every figure is linked from the markdown
    numbers = json.loads((out / "report.json").read_text())
    task = numbers["dmc:cartpole:balance"]
    assert task["labels"]["int8"]["speedup_vs_fp32"] > 1.5
    assert task["threshold"] == pytest.approx(0.95 * task["best"])


def test_report_cli(experiment, tmp_path):
    from actorq.cli import main

    assert main(["report", str(experiment), "--out", str(tmp_path / "r"), "--window", "2"]) == 0
    assert (tmp_path / "r" / "report.md").is_file()
    assert main(["report", str(experiment), "--out", str(tmp_path / "r"), "--window", "0"]) == 2
    # One input and no --out: the report goes to DIR/report, and a second report of DIR still sees only its runs.
    for _ in range(2):
        assert main(["report", str(experiment), "--window", "2"]) == 0
        assert (experiment / "report" / "report.md").read_text() == (tmp_path / "r" / "report.md").read_text()
    assert main(["report", str(experiment), str(experiment)]) == 2  # two inputs: where to is not guessed


def test_negative_rewards_threshold_is_reachable(tmp_path):
    # MountainCar-like: returns climb from -200 to -110; the threshold must sit below the best, not above it.
    for seed in range(2):
        r = -200.0 + ramp_returns(20, 100, peak=90.0, noise=2.0, seed=seed)
        make_run(tmp_path, "fp32", seed, r)
    runs, _ = load_runs([tmp_path])
    (table,) = build_tables(runs)
    assert table.threshold < table.best < 0
    assert table.threshold == pytest.approx(stats.reward_threshold(table.best))
    assert table.summary("fp32", "t_reach", censored=True).n_reached == 2


def test_config_differences_are_flagged(tmp_path):
    make_run(tmp_path, "fp32", 0, ramp_returns(10, 50))
    make_run(tmp_path, "int8", 0, ramp_returns(10, 50), spi=8.0)
    runs, _ = load_runs([tmp_path])
    (table,) = build_tables(runs)
    assert table.config_differences == {
        "replay.samples_per_insert": ["16.0", "8.0"]
    }  # precision/seed ignored
    text = build_report([str(tmp_path)], tmp_path / "r").read_text()
    assert "Caveat: these runs differ" in text and "replay.samples_per_insert" in text


def test_a_key_an_older_record_lacks_counts_as_its_default(tmp_path):
    # Runs made before evaluator.each_version_once existed ran as its default (False) does: not a difference.
    make_run(tmp_path / "old", "fp32", 0, ramp_returns(10, 50))
    make_run(
        tmp_path / "new",
        "int8",
        0,
        ramp_returns(10, 50),
        config_extra={"evaluator": {"each_version_once": False}},
    )
    runs, _ = load_runs([tmp_path / "old", tmp_path / "new"])
    assert build_tables(runs)[0].config_differences == {}
    # ... but a run that set it is one, and so is a key the schema does not have.
    make_run(
        tmp_path / "on",
        "int8",
        1,
        ramp_returns(10, 50),
        config_extra={"evaluator": {"each_version_once": True}},
    )
    make_run(
        tmp_path / "gone", "fp16", 0, ramp_returns(10, 50), config_extra={"evaluator": {"retired_option": 3}}
    )
    runs, _ = load_runs([tmp_path / d for d in ("old", "new", "on", "gone")])
    assert build_tables(runs)[0].config_differences == {
        "evaluator.each_version_once": ["False", "True"],
        "evaluator.retired_option": ["(unset)", "3"],
    }


def test_a_threshold_the_untrained_policy_reaches_is_flagged(tmp_path):
    # cartpole:balance-like: the initial policy scores ~690, learning first drops it, fp32 peaks at ~700.
    early = np.array([690.0, 692.0, 688.0, 135.0, 300.0, 500.0, 690.0, 700.0, 705.0, 698.0])
    make_run(tmp_path / "flat", "fp32", 0, early, untrained_evals=3)
    make_run(tmp_path / "flat", "int8", 0, early, untrained_evals=3)
    runs, _ = load_runs([tmp_path / "flat"])
    (table,) = build_tables(runs)
    assert table.untrained() == pytest.approx(690.0)
    assert table.threshold < table.untrained()
    text = build_report([str(tmp_path / "flat")], tmp_path / "r1").read_text()
    assert "Degenerate threshold" in text and "no speed-up is taken from it" in text
    assert "not used: threshold at or below an untrained score" in text  # the CI table claims nothing
    numbers = json.loads((tmp_path / "r1" / "report.json").read_text())["dmc:cartpole:balance"]
    assert numbers["threshold_degenerate"] and numbers["labels"]["int8"]["speedup_vs_fp32"] is None
    assert numbers["labels"]["int8"]["speedup_vs_fp32_ci"]["value"] is None
    assert table.speedup_ci("int8").value is None and table.speedup("int8") == (None, [])
    assert "2 of 2 runs start at or above it" in text and "Most runs start there" in text

    # One lucky initial network among four runs: named, and not blamed on fp32's learning.
    lucky = np.concatenate([[690.0, 692.0, 688.0], ramp_returns(12, 60, peak=700.0)])
    slow = np.concatenate([[10.0, 12.0, 8.0], ramp_returns(12, 60, peak=700.0)])
    for seed in (0, 1):
        make_run(tmp_path / "lucky", "fp32", seed, slow, untrained_evals=3)
        make_run(tmp_path / "lucky", "int8", seed, lucky if seed == 1 else slow, untrained_evals=3)
    text = build_report([str(tmp_path / "lucky")], tmp_path / "r3").read_text()
    assert "1 of 4 runs start at or above it: int8 seed 1 (690.0)" in text
    assert "A few initial networks were lucky" in text and "Most runs start there" not in text

    # A run that learns well past its initial policy: the note says reaching the reward takes learning.
    learned = np.concatenate([[690.0, 692.0, 688.0], ramp_returns(12, 60)])
    make_run(tmp_path / "learned", "fp32", 0, learned, untrained_evals=3)
    text = build_report([str(tmp_path / "learned")], tmp_path / "r2").read_text()
    assert "Degenerate threshold" not in text and "below the threshold: reaching it takes learning" in text


def test_budget_projection_does_not_need_the_threshold(tmp_path):
    # Two precisions whose actors differ 2x in speed, both learner-bound, on a 20,000-step budget.
    make_run(tmp_path, "fp32", 0, ramp_returns(10, 50), steps_per_s=100.0, max_actor_steps=20_000)
    make_run(
        tmp_path,
        "int8",
        0,
        ramp_returns(10, 50),
        steps_per_s=200.0,
        max_actor_steps=20_000,
        exit_reason="max_actor_steps",
    )
    runs, _ = load_runs([tmp_path])
    (table,) = build_tables(runs)
    fp32, int8 = table.runs["fp32"][0], table.runs["int8"][0]
    assert fp32.budget_steps == 20_000 and fp32.t_budget is None  # ran out of minutes first
    assert int8.t_budget == pytest.approx(int8.wall)
    for m in (fp32, int8):
        assert m.projected(float("inf"), budget=True) == pytest.approx(
            m.acting_start + 20_000 / m.actor_free_rate
        )
        assert m.projected(1.0, budget=True) == pytest.approx(
            m.acting_start + 20_000 / min(m.actor_free_rate, m.learner_insert_rate)
        )
    # With the learner out of the way the faster actors finish the budget ~2x sooner.
    ratio = fp32.projected(float("inf"), budget=True) / int8.projected(float("inf"), budget=True)
    assert 1.8 < ratio < 2.0
    text = build_report([str(tmp_path)], tmp_path / "r").read_text()
    assert "time to train 20,000 actor steps" in text


def test_actor_cpu_time_gives_the_unthrottled_rate_even_when_every_interval_waits(tmp_path):
    # The actor waits 20 ms/step on the rate limiter in every interval but spends only 2 ms/step of CPU.
    make_run(tmp_path, "fp32", 0, ramp_returns(10, 50), adder_wait=0.02, actor_cpu_per_step=0.002)
    make_run(tmp_path, "int8", 0, ramp_returns(10, 50), adder_wait=0.02)
    runs, _ = load_runs([tmp_path])
    (table,) = build_tables(runs)
    with_cpu, without = table.runs["fp32"][0], table.runs["int8"][0]
    # Not every run has CPU time: all of them use the wall-time estimate, so the precisions compare alike.
    assert with_cpu.actor_free_source == without.actor_free_source == "wall"
    assert with_cpu.actor_free_rate == pytest.approx(with_cpu.actor_wall_rate)
    text = build_report([str(tmp_path)], tmp_path / "r").read_text()
    assert "busy time without limiter waits, a lower bound" in text

    make_run(tmp_path / "cpu", "fp32", 0, ramp_returns(10, 50), adder_wait=0.02, actor_cpu_per_step=0.002)
    make_run(tmp_path / "cpu", "int8", 0, ramp_returns(10, 50), adder_wait=0.02, actor_cpu_per_step=0.001)
    (table,) = build_tables(load_runs([tmp_path / "cpu"])[0])
    fp32, int8 = table.runs["fp32"][0], table.runs["int8"][0]
    assert fp32.actor_free_source == int8.actor_free_source == "cpu"
    assert fp32.actor_free_rate == pytest.approx(500.0) and int8.actor_free_rate == pytest.approx(1000.0)
    assert fp32.actor_wall_rate == pytest.approx(100.0, rel=0.02)  # wall time per step, kept beside it


def test_report_names_the_machine_and_the_kernels_the_actors_verified(tmp_path):
    import json

    hardware = {
        "model": "AMD EPYC",
        "cores": 2,
        "flags": {"avx2": True, "avx512_vnni": False},
        "l3_bytes": 16777216,
        "weights_read_gbs": 40.1,
        "dram_read_gbs": 17.2,
    }
    for precision, kernel in (("fp32", "fp32/ort"), ("int8", "int8/ort-u8")):
        path = make_run(tmp_path, precision, 0, ramp_returns(10, 50))
        summary = json.loads((path / "summary.json").read_text())
        summary.update(hardware=hardware, kernel=kernel, kernel_error=0.0074)
        (path / "summary.json").write_text(json.dumps(summary))
    text = build_report([str(tmp_path)], tmp_path / "r").read_text()
    assert "Machine (2 runs): AMD EPYC, 2 cores (avx2)" in text and "40.10 GB/s" in text
    assert text.count("Machine (") == 1  # one line per machine, not one per run
    assert "int8: int8/ort-u8 (error 0.0074)" in text and "fp32: fp32/ort" in text


ZEN3 = {
    "model": "AMD EPYC",
    "arch": "x86_64",
    "cores": 2,
    "flags": {"avx2": True, "avx512_vnni": False},
    "l2_bytes": 524288,
    "l3_bytes": 33554432,
}


@pytest.mark.parametrize("mixed", [False, True])
def test_a_task_whose_runs_come_from_two_machines_says_so(tmp_path, mixed):
    """Speed-ups compare wall-clock times: a table mixing machines warns, naming its runs per machine; a table of
    one machine (even with records that list fewer flags as off) is as it was."""
    zen4 = {**ZEN3, "flags": {"avx2": True, "avx512_vnni": True}, "l2_bytes": 1048576}
    for seed in range(3):
        for precision in ("fp32", "int8"):
            other = mixed and seed == 2
            hardware = zen4 if other else ({**ZEN3, "flags": {"avx2": True}} if seed else ZEN3)
            make_run(tmp_path / "runs", precision, seed, ramp_returns(10, 50, seed=seed), hardware=hardware)
    text = build_report([str(tmp_path / "runs")], tmp_path / "r").read_text()
    if not mixed:
        assert "Caveat: these runs come from" not in text and text.count("Machine (6 runs): AMD EPYC") == 1
        return
    assert "**Caveat: these runs come from 2 machines**" in text
    assert "machine 1, AMD EPYC (x86_64, 2 cores; avx2): 4 runs (fp32 2, int8 2)" in text
    assert "machine 2, AMD EPYC (x86_64, 2 cores; avx2 avx512_vnni): 2 runs (fp32 1, int8 1)" in text
    assert "differing from machine 1 in flags: avx2 vs avx2 avx512_vnni, l2_bytes: 524288 vs 1048576)" in text
    assert "the speed-ups below mix them" in text
    assert "Machine 1 (4 runs): AMD EPYC" in text and "Machine 2 (2 runs): AMD EPYC" in text


def test_runs_given_a_target_are_measured_against_it_not_against_the_best_fp32_run(tmp_path, capsys):
    """A target fixed before the runs (``target_return``, at which each run stopped) is the task's threshold: the
    best fp32 run of runs that stopped there says nothing about returns above it."""
    from actorq.cli import main
    from actorq.report.analysis import TargetMismatchError

    curves = {}
    for precision, t_full in (("fp32", 200), ("int8", 100)):
        for seed in range(2):
            curves[precision, seed] = ramp_returns(N_EVALS, t_full + 10 * seed, seed=seed)
            make_run(
                tmp_path / "runs",
                precision,
                seed,
                curves[precision, seed],
                config_extra={"target_return": 500.0},
            )
    runs, _ = load_runs([tmp_path / "runs"])
    (table,) = build_tables(runs)
    assert table.fixed_threshold and table.threshold == 500.0
    assert table.best > 900.0  # the derived threshold would have been 0.95 * best
    for m in table.runs["fp32"] + table.runs["int8"]:
        curve = curves[m.label, m.seed]
        times = EVAL_PERIOD * np.arange(1, N_EVALS + 1)
        steps = np.ones(N_EVALS)  # every evaluation after the learner's first update
        assert m.t_reach == pytest.approx(stats.time_to_threshold(times, curve, steps, 500.0))
    text = build_report([str(tmp_path / "runs")], tmp_path / "r").read_text()
    assert "**Reward threshold 500.0**, fixed before the runs" in text
    assert "takes it as its reward threshold instead" in text

    # one threshold per task: runs stopped at different targets cannot share a time to threshold
    make_run(tmp_path / "runs", "int8", 7, ramp_returns(N_EVALS, 100), config_extra={"target_return": 400.0})
    with pytest.raises(TargetMismatchError, match=r"different target_return values \[400.0, 500.0\]"):
        build_tables(load_runs([tmp_path / "runs"])[0])
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "r2")]) == 2
    assert "error: the runs of" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()  # refused before anything was written
