"""Add the outside-load figure to records made before runs measured it, from their run directories.

Records made by code older than the launcher's own measurement (``summary.energy.outside_cpu_seconds``) lack the
``outside_share``/``outside_source`` aggregates. Where the run directory still exists, this computes them the way
the record writer does (:func:`actorq.report.disturbance.outside_share`: codecarbon's machine-wide load in
``RUN_DIR/emissions.csv`` minus the run's own CPU) and adds them to the record; nothing else in it changes. Then it
lists every run's figure, the disturbed ones (above ``actorq.metrics.OUTSIDE_LOAD_LIMIT``) marked.

    python reports/experiments/table2-cpu/outside_share.py runs/reproduce-cpu

(``RUNS``: the folder holding one experiment folder per task, named like the task folders here.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from actorq.report.disturbance import disturbed, outside_share
from actorq.report.runs import load_run

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", type=Path, help="folder of the experiments' run directories, one folder per task"
    )
    args = parser.parse_args()
    for records in sorted(HERE.glob("*/records")):
        task = records.parent.name
        for path in sorted(records.glob("*.json")):
            record = json.loads(path.read_text())
            aggregates = record["aggregates"]
            run_dir = args.runs / task / path.stem
            if aggregates.get("outside_share") is None and run_dir.is_dir():
                share, source = outside_share(load_run(run_dir, record.get("sweep") or {}))
                if share is not None:
                    aggregates.update(outside_share=share, outside_source=source)
                    path.write_text(json.dumps(record, indent=1))
            share, source = aggregates.get("outside_share"), aggregates.get("outside_source")
            mark = "  DISTURBED" if disturbed(share) else ""
            figure = "-" if share is None else f"{share:6.1%} ({source})"
            print(f"{task:20s} {path.stem:45s} {figure}{mark}")


if __name__ == "__main__":
    main()
