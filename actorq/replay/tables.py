"""Reverb tables and server for one experiment."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import reverb
from acme import specs as acme_specs
from acme.adders import reverb as acme_adders

from actorq.config import ExperimentConfig, error_buffer
from actorq.replay.checkpoints import restore_kept
from actorq.replay.run_state import TABLE_PREFIX, run_state_labels, run_state_table

log = logging.getLogger(__name__)

_MISSING_TABLE = re.compile(r"Trying to load table (\w+) but table was not found")
"""Reverb 0.7.3's error for a checkpoint that holds a table the server was not given (``make_server`` checks it)."""

EXPERIENCE_TABLE = acme_adders.DEFAULT_PRIORITY_TABLE
LEARNER_WEIGHTS_TABLE = "learner_weights"
POLICY_TABLE = "policy"


def make_tables(config: ExperimentConfig, environment_spec: acme_specs.EnvironmentSpec) -> list[reverb.Table]:
    """The experience table (with its rate limiter and Acme n-step transition signature), the two weight tables and
    one run-state table per role that keeps a resume record (:mod:`actorq.replay.run_state`)."""
    replay = config.replay
    if replay.samples_per_insert > 0:
        limiter = reverb.rate_limiters.SampleToInsertRatio(
            min_size_to_sample=replay.min_size,
            samples_per_insert=replay.samples_per_insert,
            error_buffer=error_buffer(config),
        )
    else:
        limiter = reverb.rate_limiters.MinSize(replay.min_size)
    sampler = (
        reverb.selectors.Prioritized(replay.priority_exponent)
        if replay.prioritized
        else reverb.selectors.Uniform()
    )
    experience = reverb.Table(
        name=EXPERIENCE_TABLE,
        sampler=sampler,
        remover=reverb.selectors.Fifo(),
        max_size=replay.max_size,
        rate_limiter=limiter,
        signature=acme_adders.NStepTransitionAdder.signature(environment_spec),
    )
    weights = [latest_only(LEARNER_WEIGHTS_TABLE), latest_only(POLICY_TABLE)]
    return [
        experience,
        *weights,
        *(latest_only(run_state_table(label)) for label in run_state_labels(config)),
    ]


def latest_only(name: str) -> reverb.Table:
    """A one-slot table, newest wins (Fifo removes the old item on insert), readable any number of times."""
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        max_times_sampled=0,
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


def make_server(
    config: ExperimentConfig,
    environment_spec: acme_specs.EnvironmentSpec,
    port: int | None = None,
    checkpoint_dir: str | Path | None = None,
) -> reverb.Server:
    """Start a Reverb server with the experiment's tables (restoring from ``checkpoint_dir`` when it holds one: the
    checkpoint replay last completed, :func:`actorq.replay.checkpoints.restore_kept`)."""
    checkpointer = None
    if checkpoint_dir is not None:
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        restore_kept(checkpoint_dir)  # the checkpoint replay last completed, not a newer one it never synced
        checkpointer = reverb.checkpointers.DefaultCheckpointer(str(checkpoint_dir))
    tables = make_tables(config, environment_spec)
    while True:
        try:
            server = reverb.Server(
                tables=tables,
                port=port if port is not None else (config.replay.port or None),
                checkpointer=checkpointer,
            )
            break
        except ValueError as exc:
            # Reverb refuses a checkpoint holding a table it was not given: a run resumed with fewer actors
            # than it had. Serve the extra actors' run-state tables too (they are only read by their actor).
            missing = _MISSING_TABLE.search(str(exc))
            if missing is None or not missing.group(1).startswith(TABLE_PREFIX):
                raise
            log.info(
                "the checkpoint holds %s (a role this run no longer has): serving it too", missing.group(1)
            )
            tables.append(latest_only(missing.group(1)))
    log.info("reverb server on port %d (checkpoints: %s)", server.port, checkpoint_dir)
    return server


def experience_inserts(client: reverb.Client, timeout_s: int = 5) -> tuple[int, int]:
    """(items inserted so far, items sampled so far) of the experience table, from the rate limiter's stats."""
    info = client.server_info(timeout=timeout_s)[EXPERIENCE_TABLE]
    limiter = info.rate_limiter_info
    return int(limiter.insert_stats.completed), int(limiter.sample_stats.completed)


def environment_spec_for(env) -> acme_specs.EnvironmentSpec:
    """Acme's environment spec of a dm_env (observation/action/reward/discount specs)."""
    return acme_specs.make_environment_spec(env)
