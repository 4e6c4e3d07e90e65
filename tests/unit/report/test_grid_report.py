"""Experiment grids in the report: the speed-up's bootstrap CI with censoring, sweep cells, regimes, curated records."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest

from actorq.report import bootstrap, intervals, projection_md
from actorq.report import markdown as md
from actorq.report.analysis import build_tables
from actorq.report.cli import build_report
from actorq.report.grid_md import best_vs_best, is_faster
from actorq.report.records import (
    CENSORED,
    RECORDS_DIR,
    describe_paths,
    load_records,
    load_runs,
    write_record,
)
from actorq.status import LearnerStatus, ReplayStatus, write_status
from tests.unit.report.synthetic import BYTES, START, make_run, ramp_returns

SPI = "replay.samples_per_insert"


# -- bootstrap ------------------------------------------------------------------------------------------------
def test_speedup_ci_decides_only_when_the_lower_bound_is_above_one():
    fp32 = [200, 210, 220, 230, 240]
    clear = bootstrap.speedup_ci(fp32, [100, 105, 110, 115, 120])
    assert clear.value == pytest.approx(2.0) and clear.low > 1.0
    noisy = bootstrap.speedup_ci(fp32, [150, 400, 190, 260, 205])
    assert noisy.low < 1.0 < noisy.high
    never = bootstrap.speedup_ci([None, None, None], [None, None, None])
    assert never.value is None and never.low is None and never.high is None


def test_paired_speedup_ci_separates_the_machine_from_the_ratio():
    # Seeds ran on machines up to 8x apart (a grid that goes on across sessions), int8 1.5x faster on each one:
    # resampled as pairs the ratio is clear; resampled run by run, the machines' spread swamps it.
    fp32 = [100.0, 200.0, 400.0, 800.0, 160.0, 300.0]
    int8 = [t / 1.5 for t in fp32]
    paired = bootstrap.speedup_ci(fp32, int8, paired=True)
    independent = bootstrap.speedup_ci(fp32, int8)
    assert paired.value == independent.value == pytest.approx(1.5)
    assert paired.low == pytest.approx(1.5) and paired.high == pytest.approx(1.5)
    assert independent.low < 1.0 < independent.high
    # Censoring is kept per pair: the seed int8 never finished stays in every resample that draws it.
    censored = bootstrap.speedup_ci(fp32, [*int8[:-1], None], paired=True)
    assert censored.n_reached == 5 and censored.low < 1.5
    with pytest.raises(ValueError, match="one run per seed"):
        bootstrap.speedup_ci(fp32, int8[:3], paired=True)


def test_resamples_where_both_medians_are_unreached_count_as_bounding_nothing():
    # fp32 never reached the threshold in 9 seeds (480 s each); int8 did in 7 of them. About 3% of the paired
    # resamples draw int8's two unreached seeds five times or more, and there both medians are unreached: the
    # ratio could be anything. Dropping those 3% made the lower end > 1 (a claim 95% of resamples do not back).
    fp32 = [None] * 9
    int8 = [300.0, 310.0, 320.0, 330.0, 340.0, 350.0, 360.0, None, None]
    ci = bootstrap.speedup_ci(
        fp32, int8, paired=True, base_censored_at=[480.0] * 9, other_censored_at=[480.0] * 9
    )
    assert ci.bound == ">=" and ci.value == pytest.approx(480 / 340)
    assert ci.low == 0.0 and math.isinf(ci.high) and not is_faster(ci)
    # With every int8 seed reached there is nothing to drop, and the claim stands.
    sure = bootstrap.speedup_ci(fp32[:7], int8[:7], paired=True, base_censored_at=[480.0] * 7)
    assert sure.low == pytest.approx(480 / 350) and is_faster(sure)


def test_the_speed_up_divides_the_medians_the_time_column_shows():
    # The Zen 4's CartPole 8-env cell: fp16 reached 300 in 5 of 10 runs, fp32 in 4 (the rest cut at 480 s).
    # Kaplan-Meier's median for fp16 is its 5th time; the speed-up must divide by that time, not call fp16's median
    # unreached (the mean of its 5th and its unreached 6th) and give no estimate beside a median of 444 s.
    fp32 = [180.0, 260.0, 300.0, 410.0, *[None] * 6]
    fp16 = [150.0, 250.0, 330.0, 380.0, 444.0, *[None] * 5]
    at = [480.0] * 10
    assert intervals.km_median(fp16, at).value == 444.0 and math.isinf(intervals.km_median(fp32, at).value)
    ci = bootstrap.speedup_ci(fp32, fp16, paired=True, base_censored_at=at, other_censored_at=at)
    assert ci.bound == ">=" and ci.value == pytest.approx(480 / 444)
    # All reached, an even count: the 5th of 10 each, as Kaplan-Meier reads them.
    fp32_all = [float(t) for t in range(100, 200, 10)]
    int8_all = [50.0, 55.0, 60.0, 65.0, 70.0, 90.0, 95.0, 96.0, 97.0, 98.0]  # mean of the middle two: 80
    assert intervals.km_median(fp32_all).value == 140.0 and intervals.km_median(int8_all).value == 70.0
    assert bootstrap.speedup_ci(fp32_all, int8_all, paired=True).value == pytest.approx(2.0)


def test_one_or_two_seeds_have_no_interval_and_claim_nothing():
    # The first seed of a task: fp32 never reached the threshold, int8 did. One run resampled is itself, so a
    # bootstrap "interval" would be [inf, inf] and claim a speed-up from one seed.
    first = bootstrap.speedup_ci([None], [376.0], paired=True, base_censored_at=[480.0])
    assert first.value == pytest.approx(480 / 376) and first.bound == ">="
    assert first.low is None and first.high is None
    assert not is_faster(first) and "CI undefined" in first.fmt(2, "x", inf="inf")
    two = bootstrap.speedup_ci([None, None], [376.0, 380.0], paired=True, base_censored_at=[480.0, 480.0])
    assert two.low is None
    three = bootstrap.speedup_ci([None] * 3, [376.0, 380.0, 390.0], paired=True, base_censored_at=[480.0] * 3)
    assert three.low == pytest.approx(480 / 390) and is_faster(three)
    assert intervals.km_median([366.0, 400.0]).low is None
    assert intervals.km_median([366.0, 400.0, 410.0]).low is not None
    single = intervals.mean_ci([-240.4, None])
    assert (
        single.value == pytest.approx(-240.4)
        and single.low is None
        and (single.n, single.n_reached) == (2, 1)
    )
    assert (
        intervals.iqm_ci([1.0, 2.0]).low is None
        and intervals.improvement_ci([1.0, 2.0], [0.0] * 5).low is None
    )


# -- regime -----------------------------------------------------------------------------------------------------
def test_limiter_shares_find_the_blocked_side():
    spi, min_size, buffer, batch = 8.0, 100, 800.0, 32
    offset = spi * min_size
    inserts = np.arange(200.0, 1200.0, 100.0)
    at_top = spi * inserts - (offset + buffer - 5)  # d within a batch of max_diff: actors blocked
    at_bottom = spi * inserts - (offset - buffer + 5)  # near min_diff: the learner is blocked
    middle = spi * inserts - offset
    assert bootstrap.limiter_blocked_shares(inserts, at_top, spi, min_size, buffer, batch) == (0.0, 1.0)
    assert bootstrap.limiter_blocked_shares(inserts, at_bottom, spi, min_size, buffer, batch) == (1.0, 0.0)
    assert bootstrap.limiter_blocked_shares(inserts, middle, spi, min_size, buffer, batch) == (0.0, 0.0)
    # Before min_size inserts the learner cannot sample at all.
    assert bootstrap.limiter_blocked_shares([10, 50], [0, 0], spi, min_size, buffer, batch) == (1.0, 0.0)


# -- sweep cells and records ------------------------------------------------------------------------------------
def _grid(tmp_path, fp32_peak_at_8: float = 1000.0):
    """fp32 and int8 at two samples-per-insert values, 3 seeds, laid out as `actorq experiment --sweep` does;
    fp32's runs at samples-per-insert 8 level off at ``fp32_peak_at_8``."""
    out = tmp_path / "exp"
    scratch = tmp_path / "scratch"
    runs = {}
    for spi, fp32_t, int8_t in (("1", 200, 100), ("8", 150, 140)):
        for seed in range(3):
            for precision, t_full in (("fp32", fp32_t), ("int8", int8_t)):
                peak = fp32_peak_at_8 if (precision, spi) == ("fp32", "8") else 1000.0
                path = make_run(
                    scratch / f"{spi}", precision, seed, ramp_returns(40, t_full + 5 * seed, peak, seed=seed),
                    spi=float(spi), batch=32, untrained_evals=1,
                )  # fmt: skip
                name = f"{precision}-{SPI}={spi}-s{seed}"
                out.mkdir(exist_ok=True)
                shutil.move(str(path), str(out / name))
                runs[name] = {"sweep": {SPI: spi}}
                write_status(
                    out / name / "learner", LearnerStatus(role="learner", label="learner", cpu_s=50.0 + seed)
                )
                write_status(
                    out / name / "replay",
                    ReplayStatus(role="replay", label="replay", cpu_s=5.0, time=START + 9),
                )
    (out / "experiment.json").write_text(json.dumps({"runs": runs}))
    return out, runs


def test_sweep_cells_group_and_compare_within_the_cell(tmp_path):
    out, _ = _grid(tmp_path)
    runs, skipped = load_runs([out])
    assert not skipped and len(runs) == 12
    (t,) = build_tables(runs)
    assert t.labels() == [f"fp32 [{SPI}=1]", f"int8 [{SPI}=1]", f"fp32 [{SPI}=8]", f"int8 [{SPI}=8]"]
    assert t.base_of(f"int8 [{SPI}=8]") == f"fp32 [{SPI}=8]"
    fast = t.speedup_ci(f"int8 [{SPI}=1]")
    close = t.speedup_ci(f"int8 [{SPI}=8]")
    assert fast.low > 1.0 and fast.value > close.value
    # The same seeds ran in every cell, so the CI is paired by seed: a seed slower in fp32 is slower in int8 too.
    fp32_1, int8_1 = (t.runs[f"{p} [{SPI}=1]"] for p in ("fp32", "int8"))
    assert sorted(m.seed for m in fp32_1) == sorted(m.seed for m in int8_1)
    paired = bootstrap.speedup_ci(
        [{m.seed: m.t_reach for m in fp32_1}[m.seed] for m in int8_1],
        [m.t_reach for m in int8_1],
        paired=True,
    )
    assert (fast.low, fast.high) == (paired.low, paired.high)
    # A cell missing a seed cannot pair: run by run.
    t.runs[f"int8 [{SPI}=1]"] = int8_1[:-1]
    unpaired = t.speedup_ci(f"int8 [{SPI}=1]")
    alone = bootstrap.speedup_ci([m.t_reach for m in fp32_1], [m.t_reach for m in int8_1[:-1]])
    assert (unpaired.low, unpaired.high) == (alone.low, alone.high)
    # best against best: each precision's fastest cell
    assert t.best_cell("int8") == f"int8 [{SPI}=1]" and t.best_cell("fp32") == f"fp32 [{SPI}=8]"
    assert t.config_differences == {}  # the swept key is what is supposed to differ
    m = t.runs[f"fp32 [{SPI}=1]"][1]
    assert m.role_cpu_seconds == {"learner": 51.0, "replay": 5.0}
    assert m.learner_steps_per_s is not None and m.actor_rate is not None
    assert m.learner_blocked_share is not None and m.regime.label != "unknown"


def _rows(markdown_table: str) -> dict[str, list[str]]:
    """``{first cell: cells}`` of a markdown table's body rows."""
    lines = [line.strip("|").split(" | ") for line in markdown_table.splitlines()[2:]]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in lines}


def test_broadcast_projection_and_energy_compare_int8_with_fp32_of_its_own_cell(tmp_path):
    # A sweep labels every run with its cell ("fp32 [spi=8]"); these three tables once looked up a plain "fp32"
    # and printed "-" for every ratio of every swept report, the 4x smaller broadcasts included.
    out, _ = _grid(tmp_path)
    (t,) = build_tables(load_runs([out])[0])
    broadcast = _rows(md.broadcast_table(t))
    for spi in ("1", "8"):
        assert broadcast[f"int8 [{SPI}={spi}]"][3] == f"{BYTES['int8'] / BYTES['fp32']:.2f}x"
        assert broadcast[f"fp32 [{SPI}={spi}]"][3] == "1.00x"
    projection = _rows(projection_md.projection_table(t))
    for spi in ("1", "8"):
        speedups = projection[f"int8 [{SPI}={spi}]"][-4:]
        assert all(s.endswith("x") for s in speedups), speedups
    _, text = md.energy_table(t)
    for spi in ("1", "8"):
        assert f"[{SPI}={spi}]: " in text
    # Every cell's runs reached the reward, so each cell has both ratios.
    assert text.count(" per run") >= 2 and "- to the reward" not in text and "- per run" not in text


def test_a_key_with_one_value_per_cell_is_a_caveat_for_best_against_best_only(tmp_path):
    # Each experiment of a grid can give its cell its own budget: inside a cell every run has the same, so the
    # per-cell comparison needs no caveat, but one between cells does. A key that varies inside a cell is the
    # per-cell caveat, and is not repeated as a cell one.
    out = tmp_path / "exp"
    runs = {}
    for spi, minutes in (("1", 20.0), ("8", 8.0)):
        for seed in range(2):
            for precision in ("fp32", "int8"):
                extra = {"max_minutes": minutes, "learner": {"batch_size": 64 if seed == 0 else 128}}
                path = make_run(
                    tmp_path / "scratch" / spi, precision, seed, ramp_returns(30, 150, seed=seed),
                    spi=float(spi), config_extra=extra,
                )  # fmt: skip
                name = f"{precision}-{SPI}={spi}-s{seed}"
                out.mkdir(exist_ok=True)
                shutil.move(str(path), str(out / name))
                runs[name] = {"sweep": {SPI: spi}}
    (out / "experiment.json").write_text(json.dumps({"runs": runs}))
    (t,) = build_tables(load_runs([out])[0])
    assert t.config_differences == {"learner.batch_size": ["128", "64"]}
    assert t.cell_differences == {"max_minutes": ["20.0", "8.0"]}
    assert "the cells differ in more than their sweep** (`max_minutes`: 20.0, 8.0;" in best_vs_best(t)
    text = build_report([str(out)], tmp_path / "r").read_text()
    caveat = next(line for line in text.splitlines() if line.startswith("**Caveat: these runs differ"))
    assert "learner.batch_size" in caveat and "max_minutes" not in caveat


def test_the_seed_table_and_the_paper_comparison_bound_a_speed_up_over_a_base_that_never_got_there(tmp_path):
    # fp32 at samples-per-insert 8 levels off at half the reward; int8 reaches it in every seed. The older seed
    # table printed "-" here and the paper comparison "no speedup measurable"; both now carry the bound that the
    # fp32 runs' last evaluations (t = 400 s) give.
    out, _ = _grid(tmp_path, fp32_peak_at_8=500.0)
    (t,) = build_tables(load_runs([out])[0])
    cell = f"int8 [{SPI}=8]"
    ci = t.speedup_ci(cell)
    assert ci.bound == ">=" and 2.0 < ci.value < 4.0
    row = next(line for line in md.time_table(t).splitlines() if line.startswith(f"| {cell} |"))
    assert f"| >= {ci.value:.2f}x |" in row
    reached = next(line for line in md.time_table(t).splitlines() if line.startswith(f"| int8 [{SPI}=1] |"))
    assert f"| {t.speedup_ci(f'int8 [{SPI}=1]').value:.2f}x |" in reached
    # int8's best cell (spi 1) against the paper's 3.12x: the sentence quotes the interval, over the runs there are.
    fast = t.speedup_ci(f"int8 [{SPI}=1]").fmt(2, "x", inf="inf")
    assert f"interval over 3 runs ({fast}) shows" in md.paper_comparison(t)
    del t.runs[f"int8 [{SPI}=1]"]  # int8's best cell is now the one whose fp32 never got there
    assert f"{cell}: >= {ci.value:.2f}x here" in md.paper_comparison(t)


def test_the_paper_comparison_names_the_regime_of_each_compared_precision_not_of_the_whole_task(tmp_path):
    # int8 actors can turn an actor-bound cell learner-bound (the Zen 4's Acrobot 8-env cell: fp32 10/10
    # actor-bound, int8 9/10 learner-bound). One regime counted over every run of the task called the int8 runs
    # "mostly actor-bound"; the sentence takes each side's regime from its own runs.
    out, _ = _grid(tmp_path)
    (t,) = build_tables(load_runs([out])[0])
    fast, fast_base = f"int8 [{SPI}=1]", f"fp32 [{SPI}=1]"
    for label, regime in ((fast, "learner-bound"), (fast_base, "actor-bound")):
        for m in t.runs[label]:
            m.regime = dataclasses.replace(m.regime, label=regime)
    t.runs[fast][0].regime = dataclasses.replace(t.runs[fast][0].regime, label="balanced")
    text = md.paper_comparison(t)
    assert (
        f"Why they differ: here {fast_base} actor-bound in 3 of 3 runs and {fast} learner-bound in 2, balanced in 1 "
        "of 3 runs (see" in text
    )
    for m in t.runs[fast]:
        m.regime = dataclasses.replace(m.regime, label="balanced")
    text = md.paper_comparison(t)
    assert (
        f"(less speedup). Here {fast_base} actor-bound in 3 of 3 runs and {fast} balanced in 3 of 3 runs,"
        in text
    )
    # No regime holds more than half of int8's runs: the learner-bound reading is not given by whichever came first.
    for m, regime in zip(t.runs[fast], ("learner-bound", "balanced", "actor-bound"), strict=True):
        m.regime = dataclasses.replace(m.regime, label=regime)
    text = md.paper_comparison(t)
    assert "Why they differ" not in text
    assert f"and {fast} learner-bound in 1, balanced in 1, actor-bound in 1 of 3 runs," in text


def test_report_from_records_alone_equals_report_from_run_dirs(tmp_path):
    out, runs = _grid(tmp_path)
    for name, entry in runs.items():
        write_record(out / name, out / RECORDS_DIR, entry["sweep"])
    records = out / RECORDS_DIR
    sizes = [p.stat().st_size for p in records.iterdir()]
    assert len(sizes) == 12 and max(sizes) < 64_000  # curated: kB, not the run directory
    # From the run directories (no records), then from a copy of the records alone.
    dirs_only = tmp_path / "dirs"
    dirs_only.mkdir()
    for name in runs:
        shutil.copytree(out / name, dirs_only / name)
    shutil.copy(out / "experiment.json", dirs_only / "experiment.json")
    alone = tmp_path / "alone" / RECORDS_DIR
    shutil.copytree(records, alone)
    build_report([str(dirs_only)], tmp_path / "from_dirs")
    build_report([str(alone.parent)], tmp_path / "from_records")
    a = json.loads((tmp_path / "from_dirs" / "report.json").read_text())
    b = json.loads((tmp_path / "from_records" / "report.json").read_text())
    assert a == b
    md_a = (tmp_path / "from_dirs" / "report.md").read_text().split("\n", 3)[3]
    md_b = (tmp_path / "from_records" / "report.md").read_text().split("\n", 3)[3]
    assert md_a == md_b
    assert "95% CI" in md_a and "learner blocked" in md_a and "CPU s learner" in md_a
    # An experiment directory whose run directories were deleted reads its records.
    for name in runs:
        shutil.rmtree(out / name)
    loaded, skipped = load_runs([out])
    assert len(loaded) == 12 and not skipped


def test_record_files_given_as_paths_are_read_without_a_warning_and_a_missing_path_is_named(tmp_path, caplog):
    # `actorq report records/*envs_per_actor=1*.json` picks one cell out of a shared records folder.
    out, runs = _grid(tmp_path)
    for name, entry in runs.items():
        write_record(out / name, out / RECORDS_DIR, entry["sweep"])
        shutil.rmtree(out / name)
    files = sorted((out / RECORDS_DIR).glob("int8*.json"))
    assert files
    with caplog.at_level("WARNING", logger="actorq.report.runs"):
        loaded, skipped = load_runs(files)
    assert len(loaded) == len(files) and not skipped
    assert not caplog.records
    with caplog.at_level("WARNING", logger="actorq.report.runs"):
        load_runs([tmp_path / "no-such-run"])
    assert any("no-such-run is neither a run directory" in r.getMessage() for r in caplog.records)
    # The report names the folder once, not each file of the glob; a directory or a pair of files is named as given.
    named = describe_paths(files)
    assert named == f"{len(files)} record files in {files[0].parent} ({files[0].name} ... {files[-1].name})"
    assert len(files) >= 3 and str(files[1]) not in named
    assert describe_paths([out, *files[:2]]) == ", ".join(map(str, [out, *files[:2]]))


def test_a_malformed_record_is_left_out_with_a_reason(tmp_path):
    records = tmp_path / RECORDS_DIR
    records.mkdir()
    (records / "x.json").write_text(json.dumps({"schema": "something-else"}))
    (records / "y.json").write_text("{broken")
    runs, skipped = load_records([tmp_path])
    assert runs == [] and len(skipped) == 2
    assert any("not an ActorQ run record" in why for _, why in skipped)


def test_an_unreached_base_bounds_the_speed_up_by_its_censoring_time_not_infinity():
    # fp32 never reached the threshold in its 480 s runs; int8 took 376-452 s: int8 is faster by at least
    # 485/444 (the median seed), and the interval's lower end is what the slowest resampled medians allow.
    fp32, int8 = [None, None, None], [376.0, 452.0, 444.0]
    ci = bootstrap.speedup_ci(fp32, int8, paired=True, base_censored_at=[480.0, 490.0, 485.0])
    assert ci.bound == ">=" and ci.value == pytest.approx(485 / 444)
    assert ci.low == pytest.approx(490 / 452) and math.isinf(ci.high) and is_faster(ci)  # seed 1 thrice
    assert ci.fmt(2, "x", inf="inf").startswith(">= 1.09x [1.08x, inf]")
    # Runs that stopped well before int8's times bound nothing: no claim.
    short = bootstrap.speedup_ci(fp32, int8, paired=True, base_censored_at=[300.0] * 3)
    assert short.value == pytest.approx(300 / 444) and not is_faster(short)
    # Without censoring times an unreached run is known only to be unreached: no lower bound at all.
    unknown = bootstrap.speedup_ci(fp32, int8, paired=True)
    assert unknown.value is None and unknown.low == 0 and not is_faster(unknown)
    # The other way round (int8 unreached, fp32 at 300 s): at most 300/480, a slow-down.
    slower = bootstrap.speedup_ci([300.0] * 3, fp32, paired=True, other_censored_at=[480.0] * 3)
    assert slower.bound == "<=" and slower.value == pytest.approx(300 / 480) and slower.high < 1
    with pytest.raises(ValueError, match="censoring times"):
        bootstrap.speedup_ci(fp32, int8, base_censored_at=[480.0])


def test_a_run_cut_off_and_counted_is_read_censored_at_its_last_evaluation(tmp_path):
    # A session's end cut fp32 s0 off part-way. Its record marked censored (`--interruptions censor`) counts: the
    # run is unreached, censored where it was last evaluated, and bounds the speed-up; a plain interrupted record
    # (the default, rerun) is left out with its exit.
    out, runs = _grid(tmp_path)
    cut, plain = f"fp32-{SPI}=1-s0", f"fp32-{SPI}=1-s1"
    for name in (cut, plain):
        summary_path = out / name / "summary.json"
        summary = json.loads(summary_path.read_text())
        summary_path.write_text(json.dumps(dict(summary, exit="interrupted")))
    for name, entry in runs.items():
        write_record(out / name, out / RECORDS_DIR, entry["sweep"], CENSORED if name == cut else None)
    loaded, skipped = load_records([out])
    assert len(loaded) == 11 and [(p.stem, why) for p, why in skipped] == [(plain, "exit interrupted")]
    assert json.loads((out / RECORDS_DIR / f"{cut}.json").read_text())["interruption"] == CENSORED
    # Cut at half its evaluations, short of the threshold: the run's time is censored at its last one.
    record = out / RECORDS_DIR / f"{cut}.json"
    data = json.loads(record.read_text())
    keep = len(data["evaluations"]["time_s"]) // 4
    data["evaluations"] = {key: values[:keep] for key, values in data["evaluations"].items()}
    record.write_text(json.dumps(data))
    loaded, _ = load_records([out])
    (t,) = build_tables(loaded)
    (m,) = [m for m in t.runs[f"fp32 [{SPI}=1]"] if m.seed == 0]
    assert m.t_reach is None and m.t_censored == pytest.approx(data["evaluations"]["time_s"][-1])
    # It stopped mid-learning, at neither its threshold nor its budget's end: no final or best reward, and the
    # cell's reward figures say they cover 1 of its 2 runs (s1's plain interrupted record was left out above).
    assert m.cut_off and m.final_return is None and m.best_smoothed is None and m.best_raw is not None
    others = [o for ms in t.runs.values() for o in ms if o is not m]
    assert not any(o.cut_off for o in others) and all(o.final_return is not None for o in others)
    assert intervals.iqm_ci([o.final_return for o in t.runs[f"fp32 [{SPI}=1]"]]).fmt(1).endswith("(1/2)")


def test_each_comparison_gets_finite_ratios_a_log_rank_p_and_the_unbounded_count(tmp_path):
    out, _ = _grid(tmp_path, fp32_peak_at_8=500.0)
    text = build_report([str(out)], tmp_path / "r").read_text()
    section = text.split("### Speed-ups that stay finite")[1].split("\n### ")[0]
    rows = _rows(section.split("\n\n")[1])
    # fp32 at spi 8 never reached the threshold: its medians' ratio is unbounded, the RMST ratio is not.
    assert rows[f"int8 [{SPI}=8] vs fp32 [{SPI}=8]"][3].endswith("inf]")
    rmst = rows[f"int8 [{SPI}=8] vs fp32 [{SPI}=8]"][5]
    assert "inf" not in rmst and "0.00x" not in rmst
    assert f"int8 [{SPI}=1] vs fp32 [{SPI}=1]" in rows
    assert any(name.endswith("(best against best)") for name in rows)
    assert "**Unbounded intervals: 1 of" in section
    numbers = json.loads((tmp_path / "r" / "report.json").read_text())
    found = next(iter(numbers.values()))["comparisons"]
    assert {c["kind"] for c in found} == {"same setting", "best against best"}
    assert all(c["rmst_ratio"]["low"] is not None for c in found)
    assert [c["paired"] for c in found if c["kind"] == "best against best"] == [False]
