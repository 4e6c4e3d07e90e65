"""A preregistered grid: a grid file whose ``preregistration`` block freezes, before the first run, how its runs are
made and read, and the runner that holds runs to it.

The block names the claim, the threshold, the evaluator rule, the stopping rule, the budget, the seeds, the order of
runs within a seed (shuffled by a committed seed), the statistic and the criterion by which the claim counts as
replicated (:class:`Preregistration`; :func:`load` checks it against the grid's own experiment, so the text cannot
say one thing while the runs do another). A run counts only when it was made from the frozen file:

* ``actorq grid`` on such a file refuses to start unless the file is committed and unchanged since its last commit
  (:func:`identity`), and refuses ``--budget-scale``, ``--experiments`` and ``--subset`` (each would change the
  frozen design);
* each run's record names the file, its last commit and its sha256 (``record["experiment"]``), with the run's own
  memory bandwidth in ``summary.hardware.dram_read_gbs`` as every record has it;
* a records folder holding a run made from another version of the file is refused before any run starts
  (:func:`check_records`), and the report counts only runs whose record names this file's sha256
  (:mod:`actorq.report.replication`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from actorq.config import ConfigError
from actorq.report.preregistration import EVALUATOR_RULES, Preregistration, made_from, sha256


def check_against(
    block: Preregistration,
    where: str,
    precisions: tuple[str, ...],
    seeds: int,
    experiments: list[tuple[str, tuple[str, ...], float]],
) -> None:
    """Refuse a block that says other than the grid runs: ``experiments`` as ``(name, overrides, max_minutes)``.

    Raises:
        ConfigError: Naming the first disagreement.
    """
    problems = []
    if set(precisions) != {block.base, block.other}:
        problems.append(f"precisions {list(precisions)} are not base {block.base} and other {block.other}")
    if seeds != block.seeds:
        problems.append(f"the grid runs {seeds} seeds, the preregistration says {block.seeds}")
    for name, overrides, minutes in experiments:
        if minutes != block.budget_minutes:
            problems.append(f"{name}: max_minutes {minutes:g}, preregistered {block.budget_minutes:g}")
        targets = [o.split("=", 1)[1] for o in overrides if o.startswith("target_return=")]
        if [float(t) for t in targets] != [block.threshold]:
            problems.append(f"{name}: target_return {targets or 'unset'}, preregistered {block.threshold:g}")
        absent = [o for o in EVALUATOR_RULES[block.evaluator] if o not in overrides]
        if absent:
            problems.append(
                f"{name}: evaluator rule {block.evaluator} needs the overrides {', '.join(absent)}"
            )
    if problems:
        raise ConfigError(f"{where}: the preregistration disagrees with the grid: {'; '.join(problems)}")


def _git(path: Path, *args: str, check: bool = True) -> str:
    """git's output in ``path``'s folder; with ``check`` False, empty where git fails (``log`` with no commit yet)."""
    done = subprocess.run(
        ["git", "-C", str(path.parent), *args], capture_output=True, text=True, check=check, timeout=20
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def identity(path: str | Path) -> dict[str, str]:
    """``{"grid_file", "grid_commit", "grid_sha256"}`` of a frozen grid file: its path in the repository, the last
    commit that changed it, and the sha256 of its bytes.

    Raises:
        ConfigError: The file is not in a git checkout, not committed, or changed since its last commit (a run must
            be made from the file as committed, before any run).
    """
    file = Path(path).resolve()
    try:
        status = _git(file, "status", "--porcelain", "--", file.name)
        commit = _git(file, "log", "-1", "--format=%H", "--", file.name, check=False)
        relative = _git(file, "ls-files", "--full-name", "--", file.name)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"{path}: a preregistered grid file must be in a git checkout ({exc})") from None
    if not commit or not relative or status:
        raise ConfigError(
            f"{path}: a preregistered grid file must be committed and unchanged before its runs "
            f"({'not committed' if not commit or not relative else 'changed since its last commit'}): commit it first"
        )
    return {"grid_file": relative, "grid_commit": commit, "grid_sha256": sha256(file)}


def check_records(records_dir: Path, digest: str) -> None:
    """Refuse a records folder holding a record made from another frozen file (or from none).

    Raises:
        ConfigError: Naming the first such record.
    """
    for path in sorted(records_dir.glob("*.json")) if records_dir.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and not made_from(record, digest):
            raise ConfigError(
                f"--records {records_dir}: {path.name} was not made from this preregistered grid file (sha256 "
                f"{digest[:12]}): a preregistered replication counts only its own runs; give it an empty folder"
            )
