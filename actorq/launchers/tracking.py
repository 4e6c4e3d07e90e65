"""``--track wandb|mlflow``: the run's metrics, config and summary sent to an experiment tracker by its launcher.

The roles write their metrics rows to ``RUN_DIR/<role>/metrics.csv`` and TensorBoard (:mod:`actorq.metrics`); the
launcher, one process whatever the placement, reads the rows each role has added since its last look and sends
their numeric values, the same scalars TensorBoard gets, as ``<role>/<column>`` stepped by the role's ``step``
(``<role>/step``). At the start it sends the resolved config, at the end ``summary.json``. The roles never import
a tracker, and a tracker that fails (no network, a full disk) is logged and dropped: it never stops the run.

W&B runs offline unless ``tracking.online``: the run is written under ``RUN_DIR/wandb`` (``wandb sync`` uploads it
later), so a run needs no network and no account. MLflow logs to ``MLFLOW_TRACKING_URI``, by default a file store
in ``RUN_DIR/mlruns`` (``mlflow ui --backend-store-uri RUN_DIR/mlruns``).
"""

from __future__ import annotations

import importlib
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from actorq.config import ExperimentConfig, flat_keys, to_dict
from actorq.errors import UsageError
from actorq.metrics import read_metrics

log = logging.getLogger(__name__)

PACKAGES = {"wandb": "wandb", "mlflow": "mlflow"}
"""The module each backend needs (``pip install ".[track]"``)."""
STEP = "step"
SKIPPED = ("time", STEP)


def check_tracker(config: ExperimentConfig) -> None:
    """The configured tracker's package is installed (before any process starts).

    Raises:
        UsageError: It is not; the message says what to install.
    """
    backend = config.tracking.backend
    if not backend:
        return
    try:
        importlib.import_module(PACKAGES[backend])
    except ImportError:
        raise UsageError(
            f"--track {backend} needs the {backend} package: pip install -c requirements.lock '.[track]'"
        ) from None


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """A metrics row's values TensorBoard gets: finite numbers, not its time or step."""
    return {
        key: float(value)
        for key, value in row.items()
        if key not in SKIPPED and isinstance(value, float) and math.isfinite(value)
    }


class _Backend:
    def start(self, run_dir: Path, name: str, config: dict[str, Any]) -> None: ...
    def log_role(self, role: str, step: int, values: Mapping[str, float]) -> None: ...
    def finish(self, summary: Mapping[str, Any]) -> None: ...


class _Wandb(_Backend):
    def __init__(self, project: str, online: bool):
        self._project, self._online = project, online
        self._defined: set[str] = set()

    def start(self, run_dir: Path, name: str, config: dict[str, Any]) -> None:
        import wandb

        self._wandb = wandb
        self._run = wandb.init(
            project=self._project,
            name=name,
            dir=str(run_dir),
            config=config,
            mode="online" if self._online else "offline",
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
            reinit="create_new",
        )

    def log_role(self, role: str, step: int, values: Mapping[str, float]) -> None:
        if role not in self._defined:  # each role's scalars on its own step axis, as in TensorBoard
            self._run.define_metric(f"{role}/{STEP}")
            self._run.define_metric(f"{role}/*", step_metric=f"{role}/{STEP}")
            self._defined.add(role)
        self._run.log({f"{role}/{STEP}": step, **{f"{role}/{k}": v for k, v in values.items()}})

    def finish(self, summary: Mapping[str, Any]) -> None:
        self._run.summary.update({f"summary/{k}": v for k, v in flat_keys(summary).items()})
        self._run.finish()
        self._wandb.teardown()  # ends wandb's service process: nothing of the tracker outlives the run


class _Mlflow(_Backend):
    def __init__(self, project: str):
        self._project = project

    def start(self, run_dir: Path, name: str, config: dict[str, Any]) -> None:
        import mlflow

        self._mlflow = mlflow
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            # A store of the run's own, readable without a server; MLflow 3 keeps file stores working only when asked.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            mlflow.set_tracking_uri((run_dir / "mlruns").resolve().as_uri())
        mlflow.set_experiment(self._project)
        self._run = mlflow.start_run(run_name=name)
        params = {k: str(v)[:500] for k, v in flat_keys(config).items()}
        mlflow.log_params(params)
        mlflow.log_dict(config, "config.json")

    def log_role(self, role: str, step: int, values: Mapping[str, float]) -> None:
        self._mlflow.log_metrics({f"{role}/{k}": v for k, v in values.items()}, step=step)

    def finish(self, summary: Mapping[str, Any]) -> None:
        self._mlflow.log_dict(dict(summary), "summary.json")
        self._mlflow.end_run(status="FINISHED" if summary.get("exit") != "role_failed" else "FAILED")


class Tracker:
    """Sends a run's metrics rows (as they come), config and summary to ``config.tracking.backend``.

    Args:
        config: The run's config.
        run_dir: The run directory (the roles' metrics are under it).
        roles: The roles' labels (``learner``, ``actor_0``, ...): their directories.
    """

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, roles: Iterable[str]):
        self.run_dir = Path(run_dir)
        self.roles = list(roles)
        self._sent = dict.fromkeys(self.roles, 0)
        tracking = config.tracking
        self._backend: _Backend | None = (
            _Wandb(tracking.project, tracking.online)
            if tracking.backend == "wandb"
            else _Mlflow(tracking.project)
        )
        self._guard("start", self._backend.start, self.run_dir, self.run_dir.name, to_dict(config))

    @property
    def active(self) -> bool:
        """False once the tracker failed (the run goes on without it)."""
        return self._backend is not None

    def _guard(self, what: str, call, *args) -> None:
        if self._backend is None:
            return
        try:
            call(*args)
        except Exception as exc:  # noqa: BLE001  (a tracker must never stop a run)
            log.warning(
                "tracker %s failed (%s: %s); the run goes on without it", what, type(exc).__name__, exc
            )
            self._backend = None

    def poll(self) -> int:
        """Send every role's rows added since the last poll; returns how many were sent."""
        sent = 0
        for role in self.roles:
            rows = read_metrics(self.run_dir / role / "metrics.csv")
            for row in rows[self._sent[role] :]:
                if self._backend is None:
                    return sent
                values = scalars(row)
                if values:
                    step = int(row.get(STEP) or 0)
                    self._guard("log", self._backend.log_role, role, step, values)
                    sent += self._backend is not None
            self._sent[role] = len(rows)
        return sent

    def finish(self, summary: Mapping[str, Any]) -> None:
        """Send the last rows and the summary, and close the tracker's run."""
        self.poll()
        if self._backend is not None:
            self._guard("finish", self._backend.finish, summary)
