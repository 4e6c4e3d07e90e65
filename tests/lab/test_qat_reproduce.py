"""``make reproduce-qat``: it reproduces issue 37's study by default, its commands resume (finished cells skipped,
each record written when its cell ends), its subset fits 90 minutes by the committed records' durations, and
``actorq qat-report`` renders what it wrote in ``QAT_PAIRS`` order.

The Makefile is read, never run (its venv rule rebuilds the environment): the workers' flags are taken from its
``QAT_*`` variables (their ``$(if ...)`` defaults evaluated here) and fed to the same ``actorq`` entry point. The cells
are fakes (no training): what is tested is the runner's bookkeeping, not the learning. Nothing here depends on how
many records the committed study holds (cells are still being added to it).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actorq import cli
from actorq.studies import qat_stats, qat_study

ROOT = Path(__file__).resolve().parents[2]
STUDY = "reports/studies/qat_recipe"  # issue 37's study, the default
OLD_STUDY = "reports/studies/qat_convergence"  # issue 22's
BUDGET_S = 90 * 60
REPORT_S = 6 * 60  # rendering: ~70 CPU-s for a 63-cell study, 5 min wall on a loaded 2-core machine


def _raw(name: str) -> str:
    m = re.search(rf"^{name} [?:]?=[ \t]*(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, f"Makefile has no {name}"
    return m.group(1).strip()


def _split_args(body: str) -> list[str]:
    """A make function's arguments: split at the commas outside parentheses."""
    args, depth, cur = [], 0, ""
    for ch in body:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            args.append(cur)
            cur = ""
        else:
            cur += ch
    return [*args, cur]


def _expand(text: str, env: dict[str, str]) -> str:
    """``text`` with ``$(VAR)``, ``$(if c,a,b)`` and ``$(filter p,x)`` expanded the way make does (VAR from ``env``,
    else from the Makefile; the ones these variables use)."""
    out, i = "", 0
    while i < len(text):
        if not text.startswith("$(", i):
            out, i = out + text[i], i + 1
            continue
        depth, j = 0, i + 1
        while True:  # the matching ")"
            depth += (text[j] == "(") - (text[j] == ")")
            if depth == 0:
                break
            j += 1
        inner, i = text[i + 2 : j], j + 1
        fn, _, body = inner.partition(" ")
        if fn == "if":
            cond, then, *other = _split_args(body)
            out += _expand(then if _expand(cond, env).strip() else "".join(other), env)
        elif fn == "filter":
            pat, words = _split_args(body)
            out += " ".join(w for w in _expand(words, env).split() if w in _expand(pat, env).split())
        else:
            out += env[inner] if inner in env else _expand(_raw(inner), env)
    return out


def _make_var(name: str, **env: str) -> list[str]:
    """A Makefile variable's words as make expands it with ``env`` set (``QAT_SUBSET="1"``, ``QAT_OUT=...``)."""
    return _expand(_raw(name), env).split()


def _flags(argv: list[str]) -> tuple[list[str], list[int], int]:
    args = cli.build_parser().parse_args(["qat-study", "--out", "x", *argv])
    return args.pairs.split(","), [int(b) for b in args.bits.split(",")], args.seeds


def _recipe() -> str:
    """The ``reproduce-qat`` rule: its line and the tab-indented recipe lines after it."""
    text = (ROOT / "Makefile").read_text()
    rule, *lines = text[text.index("\nreproduce-qat: ") + 1 :].split("\n")
    return "\n".join([rule, *itertools.takewhile(lambda line: line.startswith("\t"), lines)])


def test_reproduce_qat_target_calls_the_package_cli() -> None:
    recipe = _recipe()
    run = " ".join(_make_var("QAT_RUN", VENV="v", QAT_OUT="o", QAT_EPISODES="10"))
    assert run.endswith(" v/bin/actorq qat-study --out o --episodes 10")
    assert recipe.count("$(QAT_RUN)") == 3  # the pairs' worker function and the two zoo agents
    assert recipe.count('qat_worker "$(if $(QAT_SUBSET),$(QAT_SUBSET_') == 2  # worker A and worker B
    assert recipe.rstrip().endswith("$(VENV)/bin/actorq qat-report $(QAT_OUT) --pairs $(QAT_PAIRS)")
    assert "reports/" not in recipe.split("\n", 1)[1]  # nothing under reports/ is run


def _cells_by_kind(out: Path) -> dict[str, dict[str, set[int]]]:
    """``{pair: {"fp32" | "ft32" | "qat<b>": seeds}}`` of a study's committed records."""
    return {p: {k: set(s) for k, s in by.items()} for p, by in qat_stats.load(out).items()}


def _sections(report: str) -> list[str]:
    """The pairs a ``qat-report`` report.md has a section for, in order."""
    return re.findall(r"^### (\S+)", report, re.M)


def test_defaults_reproduce_the_issue_37_study() -> None:
    assert _make_var("QAT_OUT") == [STUDY] and _make_var("QAT_OUT", QAT_SUBSET="1") == ["runs/qat-subset"]
    assert _make_var("QAT_SCHEDULE") == ["finetune"] and _make_var("QAT_SEEDS") == ["10"]
    # the committed issue-22 study stays reproducible: `make reproduce-qat QAT_OUT=<it>` (its 3 seeds, not 10)
    assert _make_var("QAT_SCHEDULE", QAT_OUT=OLD_STUDY) == ["from-scratch"]
    assert f"make reproduce-qat QAT_OUT={OLD_STUDY}" in (ROOT / "Makefile").read_text()
    for study, env in ((STUDY, {}), (OLD_STUDY, {"QAT_OUT": OLD_STUDY})):
        recs = qat_stats.load(ROOT / study)
        episodes = {r["episodes"] for by in recs.values() for s in by.values() for r in s.values()}
        assert episodes == {int(*_make_var("QAT_EPISODES", **env))}, study
        seeds = {seed for by in recs.values() for s in by.values() for seed in s}
        assert seeds == set(range(int(*_make_var("QAT_SEEDS", **env)))), study  # more would train new seeds
    cells = _cells_by_kind(ROOT / STUDY)
    seeds = int(*_make_var("QAT_SEEDS"))
    assert all(s <= set(range(seeds)) for by in cells.values() for s in by.values())
    assert any(s == set(range(seeds)) for by in cells.values() for s in by.values())
    # every pair the workers and zoo agents write, reported in the committed report's order
    pairs = _make_var("QAT_PAIRS")[0].split(",")
    ran = {*_flags(_make_var("QAT_WORKER_A"))[0], *_flags(_make_var("QAT_WORKER_B"))[0]}
    ran |= {f"zoo_{a.replace('/', '_')}" for a in _make_var("QAT_ZOO_AGENTS")}
    assert set(pairs) == ran == set(cells)
    report = (ROOT / STUDY / "report.md").read_text()
    assert _sections(report) == pairs


def _mean_seconds() -> dict[tuple[str, str], float]:
    """Mean ``cell_seconds`` of the issue-37 study's records per (pair, "fp32" | "ft32" | "qat<bits>")."""
    recs = qat_stats.load(ROOT / STUDY)
    return {
        (pair, name): float(np.mean([r["cell_seconds"] for r in by_seed.values()]))
        for pair, by_name in recs.items()
        for name, by_seed in by_name.items()
    }


def _subset_worker(w: str) -> list[tuple[list[str], tuple[int, int]]]:
    """Worker ``w``'s commands in the subset: (grid flags, shard) per ``actorq qat-study`` it runs in turn."""
    grid = _make_var("QAT_SUBSET_GRID")
    return [(grid, (int(i), int(n))) for i, n in (s.split("/") for s in _make_var(f"QAT_SUBSET_{w}"))]


def _shard_cells(grid: list[str], shard: tuple[int, int]) -> list[qat_study.Cell]:
    pairs, bits, seeds = _flags(grid)
    order = qat_study.cells([qat_study.PAIRS[p] for p in pairs], bits, seeds, control=True)
    return qat_study.shard_cells(order, shard)


def estimate_seconds(
    worker: list[tuple[list[str], tuple[int, int]]], means: dict[tuple[str, str], float]
) -> float:
    """One worker's wall time: the cells of its shards (the subset runs the ``finetune`` schedule, so with its
    controls), each at the committed mean for its pair and kind."""
    name = lambda b: "fp32" if b is None else qat_study.CONTROL if b == qat_study.CONTROL else f"qat{b}"  # noqa: E731
    return sum(means[(p.key, name(b))] for grid, shard in worker for p, b, _ in _shard_cells(grid, shard))


def test_subset_fits_90_minutes_by_the_committed_durations() -> None:
    means = _mean_seconds()
    workers = [_subset_worker(w) for w in "AB"]
    shards = [s for w in workers for _, s in w]
    assert len({n for _, n in shards}) == 1 and sorted(i for i, _ in shards) == list(range(shards[0][1]))
    for grid, shard in (c for w in workers for c in w):
        cells = _shard_cells(grid, shard)
        fp32 = {(p.key, s) for p, b, s in cells if b is None}
        assert {(p.key, s) for p, b, s in cells} == fp32  # a seed's fine-tunes run where its fp32 policy is
    a, b = (estimate_seconds(w, means) for w in workers)
    assert max(a, b) + REPORT_S <= BUDGET_S, f"subset workers {a / 60:.0f} and {b / 60:.0f} min"
    # 3 and 2 of 5 shards, each 2 PPO seeds x (177 s fp32 + 7 s control + 63 s QAT-8) and 2 Pendulum seeds x
    # (196 + 62 + 267) s = 26 min: A 77 min, B 51 min (the Makefile comment's figures)
    assert 75 * 60 < a < 80 * 60 and 49 * 60 < b < 54 * 60
    _, _, seeds = _flags(_make_var("QAT_SUBSET_GRID"))
    assert seeds >= qat_stats.MIN_CLAIM_SEEDS  # the subset's 8-bit cells can carry a claim


def _fake_fp32(pair: qat_study.Pair, seed: int, bits: list[int], episodes: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    ret = lambda mu: list(np.round(rng.normal(mu, 5.0, episodes), 2))  # noqa: E731
    return {
        "kind": "fp32", "pair": pair.key, "seed": seed, "steps": pair.steps, "curve": [[10, 1.0], [20, 2.0]],
        "fp32": ret(500.0), "ptq_w": {str(b): ret(500.0 - 10 * (8 - b)) for b in bits},
        "ptq_wa": {str(b): ret(500.0 - 40 * (8 - b)) for b in bits},
    }  # fmt: skip


def _fake_control(pair: qat_study.Pair, seed: int, episodes: int) -> dict[str, Any]:
    rng = np.random.default_rng(200 + seed)
    ret = list(np.round(rng.normal(500.0, 5.0, episodes), 2))
    return {
        "kind": qat_study.CONTROL_KIND, "pair": pair.key, "seed": seed, "steps": pair.steps,
        "curve": [[10, 1.0], [20, 2.0]], qat_study.CONTROL_KIND: ret,
    }  # fmt: skip


def _fake_qat(pair: qat_study.Pair, bits: int, seed: int, episodes: int) -> dict[str, Any]:
    rng = np.random.default_rng(100 + seed)
    ret = list(np.round(rng.normal(500.0 - 5 * (8 - bits), 5.0, episodes), 2))
    check = {"layers": {"l0": {"max_diff_over_bound": 0.1}}, "action_agreement": 1.0}
    return {
        "kind": "qat", "pair": pair.key, "seed": seed, "bits": bits, "steps": pair.steps, "quant_delay": 5,
        "curve": [[10, 1.0], [20, 2.0]], "qat_deployed": ret, "qat_fake_quant": ret, "deploy_check": check,
    }  # fmt: skip


def test_workers_resume_and_the_report_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[str, int | str | None, int]] = []
    crash_at = {"n": 18}

    def fp32(pair: qat_study.Pair, seed: int, bits: list[int], episodes: int, out: Path) -> dict[str, Any]:
        if len(ran) == crash_at["n"]:
            raise KeyboardInterrupt  # the worker killed mid-grid
        ran.append((pair.key, None, seed))
        return _fake_fp32(pair, seed, bits, episodes)

    def qat(
        pair: qat_study.Pair, bits: int, seed: int, episodes: int, schedule: str, out: Path
    ) -> dict[str, Any]:
        ran.append((pair.key, bits, seed))
        return _fake_qat(pair, bits, seed, episodes)

    def control(pair: qat_study.Pair, seed: int, episodes: int, out: Path) -> dict[str, Any]:
        ran.append((pair.key, qat_study.CONTROL, seed))
        return _fake_control(pair, seed, episodes)

    monkeypatch.setattr(qat_study, "run_fp32_cell", fp32)
    monkeypatch.setattr(qat_study, "run_qat_cell", qat)
    monkeypatch.setattr(qat_study, "run_control_cell", control)

    def worker(w: str) -> None:
        """Worker ``w``'s commands, as the recipe's qat_worker runs them, at bits 8,4 and 4 episodes: 2 pairs x
        10 seeds x (fp32 + control + 2 QAT) = 80 cells between the two workers."""
        for grid, (i, n) in _subset_worker(w):
            argv = ["qat-study", "--out", str(tmp_path), *grid, "--bits", "8,4", "--episodes", "4"]
            assert cli.main([*argv, "--shard", f"{i}/{n}"]) == 0

    with pytest.raises(KeyboardInterrupt):
        worker("A")
    records = sorted((tmp_path / "records").rglob("*.json"))
    assert (
        len(records) == 18 == len(ran)
    )  # shard 0, then 2 cells of shard 1: every finished cell wrote its record before the next started
    crash_at["n"] = -1
    worker("A")
    worker("B")
    assert len(ran) == 80 and len(set(ran)) == 80  # the rerun ran only the missing cells
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "records").rglob("*.json")}
    worker("A")
    worker("B")
    assert len(ran) == 80  # a finished grid reruns nothing
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "records").rglob("*.json")} == before

    (tmp_path / "README.md").write_text(
        "x\n<!-- qat-report:status -->\nstale 21\n<!-- /qat-report:status -->\ny\n"
    )
    # the recipe's last command: QAT_PAIRS lists pairs the subset has no records of; they are left out
    pairs = _make_var("QAT_PAIRS")
    assert cli.main(["qat-report", str(tmp_path), "--pairs", *pairs]) == 0
    report = (tmp_path / "report.md").read_text()
    for pair in ("ppo_CartPole-v1", "ddpg_Pendulum-v1"):
        assert f"| {pair} | 10/10 | 10/10 | 10/10 | 10/10 |" in report  # fp32, ft32, qat8, qat4
    assert _sections(report) == ["ppo_CartPole-v1", "ddpg_Pendulum-v1"]  # in QAT_PAIRS order
    assert "| a2c_CartPole-v1 |" not in report  # a listed pair without records has no row either
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = {r["bits"]: r for r in summary["pairs"]["ppo_CartPole-v1"]["rows"]}
    # fake QAT at 4 bits loses 20, PTQ W+A 160: ten seeds each, fully separated, a claim survives Holm (m = 8)
    assert rows[4]["qat_vs_ptq_wa"]["verdict"] == "QAT better" and summary["family"] == 8
    assert rows[8]["qat_vs_ptq_wa"]["verdict"] == qat_stats.NO_DIFFERENCE
    readme = (tmp_path / "README.md").read_text()
    assert "stale 21" not in readme and "80 cells in 2 pairs " in readme and readme.endswith("y\n")


def test_qat_report_refuses_pairs_that_all_lack_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = qat_study.PAIRS["ppo_CartPole-v1"]
    qat_study.write_record(qat_study.record_path(tmp_path, pair, None, 0), _fake_fp32(pair, 0, [8], 4))
    assert cli.main(["qat-report", str(tmp_path), "--pairs", "a2c_CartPole-v1,zoo_x"]) == 2
    err = capsys.readouterr().err
    assert "a2c_CartPole-v1" in err and "['ppo_CartPole-v1']" in err  # what was asked, and what there is
    assert not (tmp_path / "report.md").exists()
