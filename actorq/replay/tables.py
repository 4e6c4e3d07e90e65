"""Reverb tables and server for one experiment."""

from __future__ import annotations

import logging
from pathlib import Path

import reverb
from acme import specs as acme_specs
from acme.adders import reverb as acme_adders

from actorq.config import ExperimentConfig, error_buffer

log = logging.getLogger(__name__)

EXPERIENCE_TABLE = acme_adders.DEFAULT_PRIORITY_TABLE
LEARNER_WEIGHTS_TABLE = "learner_weights"
POLICY_TABLE = "policy"


def make_tables(config: ExperimentConfig, environment_spec: acme_specs.EnvironmentSpec) -> list[reverb.Table]:
    """The experience table (with its rate limiter and Acme n-step transition signature) and the two weight tables."""
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

    def latest_only(name: str) -> reverb.Table:
        # One slot, newest wins (Fifo removes the old item on insert); readable any number of times.
        return reverb.Table(
            name=name,
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=1,
            max_times_sampled=0,
            rate_limiter=reverb.rate_limiters.MinSize(1),
        )

    return [experience, latest_only(LEARNER_WEIGHTS_TABLE), latest_only(POLICY_TABLE)]


def make_server(
    config: ExperimentConfig,
    environment_spec: acme_specs.EnvironmentSpec,
    port: int | None = None,
    checkpoint_dir: str | Path | None = None,
) -> reverb.Server:
    """Start a Reverb server with the experiment's tables (restoring from ``checkpoint_dir`` when it holds one)."""
    checkpointer = None
    if checkpoint_dir is not None:
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        checkpointer = reverb.checkpointers.DefaultCheckpointer(str(checkpoint_dir))
    server = reverb.Server(
        tables=make_tables(config, environment_spec),
        port=port if port is not None else (config.replay.port or None),
        checkpointer=checkpointer,
    )
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
