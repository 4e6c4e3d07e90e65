"""The ``ray`` placement: every role a Ray actor on a cluster (``actorq train --launcher ray``).

:meth:`RayPlacement.open` joins ``ray.address`` (``--ray-address``, else ``$RAY_ADDRESS``) once its head answers
(:func:`~actorq.launchers.ray_connect.probe_cluster`), or starts a local cluster listening on ``ray.bind`` (loopback
by default) that :meth:`RayPlacement.close` stops. Each role is one :class:`~actorq.launchers.ray_role.RoleActor` with declared
resources: the learner 1 CPU plus ``ray.learner_gpus`` GPUs, each actor ``actor.threads`` CPUs, replay, quantizer
and evaluator none (they mostly wait). When some node advertises ``ray.learner_resource`` (``learner_host``),
replay, learner, quantizer and evaluator ask a sliver of it and so land on such nodes; actors likewise on
``ray.actor_resource`` (``actor_host``) nodes; with no such node Ray places freely. Replay shards
(``replay.shards``) each ask 1 of ``ray.replay_resource`` (``replay_host``) when some node advertises it: one
shard per replay host.

Ray restarts actors, the quantizer and the evaluator (``ray.max_restarts``) on any node that fits; replay and the
learner are never restarted (a dead one ends the run, as with the local launcher's learner; continue it with
``actorq train --resume``). Restarts are the starts each role actor records itself
(:mod:`~actorq.launchers.ray_starts`), or the worker pid changes seen when more, so ``summary.json`` counts them as
the local launcher counts its own; when the start log cannot be read, summary.json says the count is unknown. Stopping kills every actor this placement made (``no_restart``) and
shuts down a cluster it started: nothing of the run is left.

Ray is imported only here and in the role actors, lazily: ``import actorq.launchers`` works without it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from actorq.config import to_dict
from actorq.config.shards import shard_port
from actorq.errors import ExitCode
from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.ray_connect import (
    RayLauncherError,
    RayUnreachableError,
    import_ray,
    join_address,
    local_cluster_options,
    probe_cluster,
)
from actorq.launchers.ray_starts import StartCounts
from actorq.launchers.topology import RoleSpec
from actorq.roles.process_setup import learner_environment
from actorq.status import RoleStatus, from_dict
from actorq.usage import CHILD_ENV
from actorq.weights_key import describe, load_key_file

log = logging.getLogger(__name__)

RESTARTED_BY_RAY = ("actor", "quantizer", "evaluator")
"""Roles Ray restarts (``ray.max_restarts``). Replay keeps no fixed node or port under Ray, and a dead learner ends
every launcher's run."""
SLIVER = 0.001
"""How much of a placement resource (learner_host, actor_host) one role asks: any number of roles fit a node that
advertises 1, and only such nodes."""
LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024
"""Object store of a local cluster the run starts: roles pass only small records through Ray."""
EXIT_KILLED = -9
"""Exit status reported for a role that had to be killed (it did not stop within the grace period)."""
CALL_TIMEOUT_S = 10.0
"""How long a question to a role actor (address, where) may take before the placement gives up on it."""
STATUS_WAIT_S = 0.05
"""How long :meth:`RayPlacement.status` waits for a role's answer to a new question (a live role answers in about a
millisecond) before returning the last record it has."""


@dataclass
class _Role:
    """A role actor this placement made, and what the placement last learned about it."""

    spec: RoleSpec
    handle: Any
    actor_id: str
    final: int | None = None
    exit_ref: Any = None
    status_ref: Any = None
    last: RoleStatus | None = None
    where: dict[str, Any] | None = None
    pids: tuple[int, ...] = ()


class RayPlacement(Placement):
    """Roles as Ray actors; Ray restarts the restartable ones itself."""

    name: ClassVar[str] = "ray"

    def __init__(self, run: RunContext):
        super().__init__(run)
        self.ray = None
        self.roles: dict[str, _Role] = {}
        self.started_cluster = False
        self.cluster_address = ""
        self._actor_class = None
        self._placing: dict[str, dict[str, float]] = {}
        self._starts: StartCounts | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> None:
        """Join ``ray.address`` / ``$RAY_ADDRESS``, or start a local cluster for this run.

        Raises:
            RayLauncherError: Ray is not installed, or the cluster cannot be reached or started.
        """
        ray = self.ray = import_ray()
        config = self.run.config
        address = join_address(config.ray.address)
        # The driver's and the roles' logs stay in their files; Ray streaming worker output here would interleave
        # with the live view.
        common = {"log_to_driver": False, "namespace": f"actorq-{os.getpid()}"}
        # ray.init replaces SIGTERM's handler with sys.exit; the supervisor's (stop the roles in order) must stay.
        sigterm = signal.getsignal(signal.SIGTERM)
        try:
            if address:
                # ray.init retries a silent or wrong address for minutes: ask the head first, with a deadline.
                address = probe_cluster(address, config.ray.connect_timeout_s)
                log.info("joining the Ray cluster at %s", address)
                context = ray.init(address=address, **common)
            else:
                needed = 1 + config.actor.num_actors * config.actor.threads
                temp_dir = config.ray.temp_dir or None
                context = ray.init(
                    # "local": a new cluster even when another runs on this host (no address would join that)
                    address="local",
                    num_cpus=max(os.cpu_count() or 1, needed),
                    object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                    _temp_dir=temp_dir,
                    **local_cluster_options(config.ray.bind),
                    **common,
                )
                self.started_cluster = True
                log.info("started a local Ray cluster for this run, node IP %s", config.ray.bind)
        except RayUnreachableError:
            raise
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayLauncherError(
                f"cannot {'join the Ray cluster at ' + address if address else 'start a local Ray cluster'}: "
                f"{exc}; check the address (ray status on the head) or leave --ray-address out for a local one"
            ) from None
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, sigterm)
        self.cluster_address = getattr(context, "address_info", {}).get("gcs_address", address)
        self._actor_class = ray.remote(_role_actor_class())
        self._placing = self._placement_resources()
        self._starts = StartCounts(ray)

    def _placement_resources(self) -> dict[str, dict[str, float]]:
        """Custom resources each side asks, for the placement resources some node of the cluster advertises."""
        advertised = self.ray.cluster_resources()
        out: dict[str, dict[str, float]] = {"learner": {}, "actor": {}}
        replay, shards = self.run.config.ray.replay_resource, self.run.config.replay.shards
        if advertised.get(replay, 0) > 0:  # one unit per shard: a node advertising 1 holds one shard
            if advertised[replay] < shards:
                raise RayLauncherError(
                    f"replay.shards={shards} but the cluster advertises {advertised[replay]:g} {replay}: start more "
                    f"replay hosts (ray start --resources '{{\"{replay}\": 1}}') or use fewer shards"
                )
            out["replay"] = {replay: 1.0}
        for side, name in (
            ("learner", self.run.config.ray.learner_resource),
            ("actor", self.run.config.ray.actor_resource),
        ):
            if advertised.get(name, 0) > 0:
                out[side] = {name: SLIVER}
            else:
                log.info("no node advertises %s: Ray places the %s side's roles freely", name, side)
        return out

    def _options(self, spec: RoleSpec) -> dict[str, Any]:
        """Ray actor options for one role: resources, restarts, environment (never the weights key)."""
        config = self.run.config
        env = dict(CHILD_ENV)  # only these variables: runtime_env is shown by Ray's dashboard
        side = "actor" if spec.role == "actor" else "learner"
        if spec.role == "replay" and "replay" in self._placing:
            side = "replay"
        options: dict[str, Any] = {
            "max_concurrency": 4,  # status/stop/where answer while the loop runs
            "max_restarts": config.ray.max_restarts if spec.role in RESTARTED_BY_RAY else 0,
            "resources": dict(self._placing.get(side, {})),
            "num_cpus": 0,
        }
        if spec.role == "actor":
            options["num_cpus"] = config.actor.threads
        elif spec.role == "learner":
            env.update(learner_environment(config))  # TF reads it when it loads: before the worker imports it
            options["num_cpus"] = 1
            options["num_gpus"] = config.ray.learner_gpus
        options["runtime_env"] = {"env_vars": env}
        return options

    def start(self, spec: RoleSpec, address: str) -> None:
        if spec.label in self.roles and self.roles[spec.label].final is None:
            raise RuntimeError(f"{spec.label} is already running under Ray")
        run = self.run
        port = shard_port(run.config.replay.port, spec.index) if spec.role == "replay" else 0
        handle = self._actor_class.options(**self._options(spec)).remote(
            spec.role,
            spec.label,
            to_dict(run.config),
            str(run.run_dir.resolve()),
            address or None,
            spec.index,
            port,
            str(run.weights_key_file.resolve()) if run.weights_key_file else None,
            run.weights_key_file is None,
        )
        self.roles[spec.label] = _Role(spec, handle, handle._actor_id.hex())
        log.debug("started %s as Ray actor %s", spec.label, self.roles[spec.label].actor_id)

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        """Replay's NODE_IP:PORT, asked of the replay actor once its server serves (its constructor returned)."""
        ray = self.ray
        role = self.roles[spec.label]
        try:
            return ray.get(role.handle.address.remote(), timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"replay did not serve within {timeout_s:.0f}s under Ray (no node with the resources it asks, or "
                f"a slow start): see `ray status` and {self.run.run_dir / 'logs' / f'{spec.label}.log'}"
            ) from None
        except ray.exceptions.RayActorError as exc:
            role.final = ExitCode.FAILED
            raise RuntimeError(f"replay failed to start under Ray: {exc}") from None

    def exit_code(self, label: str) -> int | None:
        role = self.roles[label]
        if role.final is not None:
            return role.final
        ray = self.ray
        if role.exit_ref is None:
            role.exit_ref = role.handle.exit_status.remote()
        ready, _ = ray.wait([role.exit_ref], timeout=0)
        if not ready:
            return None
        ref, role.exit_ref = role.exit_ref, None
        try:
            code = ray.get(ref)
        except ray.exceptions.ActorUnavailableError:
            return None  # being restarted by Ray
        except ray.exceptions.RayActorError as exc:  # ActorDiedError: out of restarts, or not restartable
            log.warning("%s is dead for good under Ray: %s", label, str(exc).splitlines()[0])
            role.final = ExitCode.FAILED
            return role.final
        if code is not None:
            role.final = int(code)
        return role.final

    def roles_cpu_seconds(self, measured: float | None, reported: float) -> float:
        """What the roles report: they are not this process's descendants (and a local cluster's are Ray's too)."""
        return reported

    def weights_signing(self) -> dict[str, str]:
        """The key the roles loaded, each on its own host (the run id each reported through ``where``): the
        launcher's when they all read it; ``run_id`` "mixed" and each role's in ``per_role`` when they differ."""
        signing = describe(load_key_file(self.run.weights_key_file) if self.run.weights_key_file else None)
        ids = {label: role.where["weights_run_id"] for label, role in self.roles.items() if role.where}
        ids = {label: run_id for label, run_id in ids.items() if run_id}
        if ids:
            signing["run_id"] = next(iter(ids.values())) if len(set(ids.values())) == 1 else "mixed"
            if signing["run_id"] == "mixed":
                signing["per_role"] = ids
        return signing

    def restarts(self, label: str) -> int:
        """Restarts of the role's actor: the starts it recorded itself less one, or the pid changes seen, whichever
        is more (while the start log cannot be read, only the latter: a lower bound, flagged in the summary)."""
        logged = self._starts.restarts(label, poll=self.ray is not None) if self._starts else 0
        return max(logged, max(len(self.roles[label].pids) - 1, 0))

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        ray = self.ray
        pending = {}
        for label in labels:
            role = self.roles.get(label)
            if role is not None and self.exit_code(label) is None:
                pending[label] = role.handle.stop.remote(grace_s)
        if pending:
            ray.wait(list(pending.values()), num_returns=len(pending), timeout=grace_s + 2.0)
        codes: dict[str, int | None] = {}
        for label in labels:
            role = self.roles.get(label)
            if role is None:
                codes[label] = None
                continue
            ref = pending.get(label)
            if ref is not None:
                ready, _ = ray.wait([ref], timeout=0)
                if not ready:
                    log.warning("%s did not stop within %.0fs; killing its Ray actor", label, grace_s)
                    role.final = EXIT_KILLED
                else:
                    try:
                        role.final = int(ray.get(ref))
                        self._take_final_record(role)  # the record it wrote as it stopped, for the summary
                    except ray.exceptions.RayActorError:
                        role.final = ExitCode.FAILED
            # The worker process of a stopped role would otherwise idle on: kill it (and tell Ray not to restart).
            ray.kill(role.handle, no_restart=True)
            codes[label] = role.final
        return codes

    def _take_final_record(self, role: _Role) -> None:
        ready, _ = self.ray.wait([role.handle.status.remote()], timeout=CALL_TIMEOUT_S)
        if ready:
            self._take_record(role, ready[0])

    def close(self) -> None:
        """Kill every actor this placement made; stop the cluster if this run started it."""
        ray = self.ray
        if ray is None:
            return
        if self._starts is not None:
            self._starts.close()  # reads the last starts (for the summary), then kills the log
        for role in self.roles.values():
            try:
                ray.kill(role.handle, no_restart=True)
            except Exception as exc:  # already gone, or the cluster went away
                log.debug("ray.kill %s: %s", role.spec.label, exc)
        ray.shutdown()
        self.ray = None

    # -- observation -----------------------------------------------------------------------------------------
    def status(self, label: str) -> RoleStatus | None:
        """The role's latest record, asked of its actor (at most one question in flight per role); once the role
        ended (or the placement closed), its last record."""
        role = self.roles.get(label)
        if role is None:
            return None
        if self.ray is None or role.final is not None:
            return role.last
        ray = self.ray
        # A question still unanswered (the role is starting, busy or being restarted) is not waited on again: the
        # supervisor asks every role several times per poll, and must not stall behind one.
        wait_s = 0.0
        if role.status_ref is None:
            role.status_ref, wait_s = role.handle.status.remote(), STATUS_WAIT_S
        ready, _ = ray.wait([role.status_ref], timeout=wait_s)
        if ready:
            ref, role.status_ref = role.status_ref, None
            self._take_record(role, ref)
        return role.last

    def _take_record(self, role: _Role, ref: Any) -> None:
        """Parse a finished status answer into ``role.last`` (and note a new worker pid)."""
        try:
            data = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:
            return  # restarting or dead: exit_code() says which; keep the last record
        # A record that does not parse comes from a node running another ActorQ version: a StatusError (raised, not
        # ignored: a supervisor left with stale records would never see its stop conditions met).
        role.last = from_dict(data, f"{role.spec.label}'s status record (asked of its Ray actor)")
        if role.last.pid not in role.pids:
            role.pids += (role.last.pid,)  # a new worker process: Ray started or restarted the role
            self._ask_where(role)

    def _ask_where(self, role: _Role) -> None:
        """Ask the role's worker where it runs (after its start and each restart)."""
        try:
            role.where = self.ray.get(role.handle.where.remote(), timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # restarting, dead or slow: keep what we last knew
            log.debug("where %s: %s", role.spec.label, exc)

    def where(self, label: str) -> str:
        """``node <ip> (<node id>) pid <pid>`` of the role's current (or last) worker."""
        role = self.roles.get(label)
        if role is None:
            return "-"
        stale = role.where is None or (role.pids and role.where["pid"] != role.pids[-1])
        if stale and self.ray is not None and role.final is None:
            self._ask_where(role)
        if role.where is None:
            return "-"
        w = role.where
        return f"node {w['node_ip']} ({w['node_id'][:8]}) pid {w['pid']}"

    def log_path(self, label: str) -> Path | None:
        """The role's console log (written on the role's host: here when the run directory is shared)."""
        return self.run.run_dir / "logs" / f"{label}.log"

    def summary_extra(self) -> dict[str, Any]:
        ray_summary: dict[str, Any] = {
            "cluster": self.cluster_address,
            "started_cluster": self.started_cluster,
            "nodes": {label: dict(role.where) for label, role in self.roles.items() if role.where},
        }
        if self._starts is not None:
            # A role starts by recording itself, before it can answer: fewer starts than worker pids seen means the
            # log missed some. Either way the restart counts are then the pid changes seen, a lower bound.
            counts = self._starts.counts
            missed = [label for label, role in self.roles.items() if len(role.pids) > counts.get(label, 0)]
            unknown = self._starts.unknown or (
                f"the start log missed starts of {', '.join(missed)}" if missed else ""
            )
            if unknown:
                ray_summary["restarts_unknown"] = unknown
        return {"ray": ray_summary}


def _role_actor_class():
    from actorq.launchers.ray_role import RoleActor

    return RoleActor
