"""Parameter-quantizer role: learner fp32 weights -> torch state dict -> actor precision / wire bits -> actors.

A policy message's version is the learner message's version plus one (:func:`policy_version`), so versions follow
the learner's, which its checkpointed step and ``published_version.json`` keep increasing across resumes, and never
depend on anything this role restores from the network. A restarted quantizer never publishes at or below the
newest version it can see published or trust: the policy message in the table (verified), its resume record on
the replay server (verified, :mod:`actorq.replay.run_state`) and its local copy (``RUN_DIR/quantizer/resume.json``);
so replaying an old signed learner message at its restart can't roll actors back, whatever a client of the replay
port did to the tables. Learner messages are authenticated with the run's key before they are decoded, and every
message published is signed with it; anything else in the learner table (junk, forgeries) is rejected and counted.
While replay is unreachable (restarting, link down) it keeps polling with backoff; after ``connect_timeout_s`` of
failures it exits non-zero and the launcher restarts it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from actorq.algorithms.torso import Torso
from actorq.config import ExperimentConfig
from actorq.config.shards import weights_address
from actorq.envs import environment_spec
from actorq.networks.mapping import tf_to_torch_state, torch_state_shapes
from actorq.quantize.codec import (
    MalformedMessageError,
    WeightMessage,
    WeightMessageError,
    decode_message,
    encode_message,
    message_size_bound,
    read_header,
)
from actorq.quantize.signing import LEARNER_STREAM, POLICY_STREAM, TAG_BYTES, WeightsKey
from actorq.replay import (
    LEARNER_WEIGHTS_TABLE,
    POLICY_TABLE,
    ReverbWeightPublisher,
    ReverbWeightSubscriber,
    wait_for_server,
)
from actorq.replay.retry import REPLAY_ERRORS, ReplayOutage
from actorq.replay.run_state_record import Field
from actorq.roles.base import RoleBase
from actorq.roles.torso import run_torso
from actorq.status import COUNTER_LIMIT, QuantizerStatus

log = logging.getLogger(__name__)


def encode_policy(
    config: ExperimentConfig,
    state: dict[str, np.ndarray],
    *,
    version: int,
    learner_step: int,
    key: WeightsKey | None,
) -> np.ndarray:
    """The policy message the actors get for a torch-keyed fp32 ``state``: the run's precision, bits and codec.

    The one rule for it: the quantizer publishes these, and the evaluator builds the same policy from the same
    learner step to measure how often it acts differently from fp32 (:mod:`actorq.roles.agreement`).
    """
    return encode_message(
        state,
        version=version,
        learner_step=learner_step,
        precision=config.actor.precision,
        comm_bits=config.comm_bits,
        compress=config.quantizer.compress,
        per_channel=config.quantizer.per_channel,
        key=key,
        stream=POLICY_STREAM,
    )


def policy_shapes(config: ExperimentConfig) -> dict[str, tuple[int, ...]]:
    """``{torch key: shape}`` of the run's policy (what its weight messages carry; the learner's have the same
    counts under TF names), its torso's convolutions included."""
    spec = environment_spec(config.env)
    return torch_state_shapes(
        config.algorithm,
        spec.obs_dim,
        spec.num_actions,
        tuple(config.network.policy_layers),
        run_torso(config, spec),
    )


def policy_version(learner_version: int) -> int:
    """The version of the policy message quantized from the learner's message ``learner_version``."""
    return learner_version + 1


def learner_state(
    config: ExperimentConfig, buf: Any, torso: Torso | None = None
) -> tuple[WeightMessage, dict[str, np.ndarray]]:
    """The learner's fp32 message in ``buf`` decoded, and its weights mapped to the policy's torch keys
    (``torso``: the run's, :func:`actorq.roles.torso.run_torso`; None for an MLP policy).

    The one rule for reading the learner's weights (the quantizer, the evaluator and ``actorq plan``'s timing of
    both). The caller authenticates ``buf`` first (:func:`read_header` with the learner's stream): each checks the
    version in the header before paying for a decode.
    """
    message = decode_message(buf)
    layers = tuple(config.network.policy_layers)
    state = tf_to_torch_state(config.algorithm, message.float32_state(), layers, torso=torso)
    return message, state


class QuantizerRole(RoleBase):
    """Polls for new learner weights; converts, quantizes, encodes and publishes each new one."""

    name = "quantizer"

    def __init__(
        self,
        config: ExperimentConfig,
        run_dir: str | Path,
        address: str,
        connect_timeout_s: float = 60,
        *,
        weights_key: WeightsKey | None,
    ):
        """``weights_key``: the run's key; None (``--insecure-weights`` only) reads and publishes unsigned."""
        super().__init__(config, run_dir)
        self._key = weights_key
        torso = run_torso(config)
        self._torso = torso if torso.is_conv else None
        self._handled_tag: bytes | None = (
            None  # tag of the last learner message handled: polled again, no HMAC
        )
        if weights_key is None:
            log.warning(
                "quantizer PUBLISHES UNSIGNED WEIGHTS (--insecure-weights): actors can't tell them from forged ones"
            )
        client = wait_for_server(weights_address(address), timeout_s=connect_timeout_s)
        self._outage = ReplayOutage("quantizer", budget_s=connect_timeout_s)
        cap = message_size_bound(policy_shapes(config))  # fp32: the widest either table carries
        # Polled every poll_interval_s: only a newly inserted learner message is downloaded.
        self._source = ReverbWeightSubscriber(client, LEARNER_WEIGHTS_TABLE, only_new=True, max_bytes=cap)
        self._sink = ReverbWeightPublisher(client, POLICY_TABLE)
        self._policy_sub = ReverbWeightSubscriber(client, POLICY_TABLE, max_bytes=cap)
        self.rejected = 0
        previous = self.open_run_state(client, weights_key, connect_timeout_s)
        self.rejected += self.rejected_records
        self.version = self._resume_version(int(previous["version"]) if previous else 0)
        self.learner_step = -1
        self.times = {"convert_ms": 0.0, "quantize_ms": 0.0, "publish_ms": 0.0}
        self.message_bytes = 0
        self.published = 0

    resume_schema = {"version": Field(np.int64, 0, 0, COUNTER_LIMIT)}  # noqa: RUF012  (read-only)

    def resume_values(self) -> dict[str, np.ndarray]:
        return {"version": np.int64(self.version)}

    def _resume_version(self, recorded: int) -> int:
        """The newest version published that this role can trust: the policy table's message (verified) or its
        resume record's (verified, or its local copy); it publishes only above it."""
        in_table = 0
        try:
            buf = self._policy_sub.latest()
            if buf is not None:  # only a message of this run counts: a forged one could claim any version
                in_table = read_header(buf, key=self._key, stream=POLICY_STREAM).version
        except WeightMessageError as exc:
            self._reject("the current policy message", exc)
        except REPLAY_ERRORS as exc:  # replay away: the record still holds what this role published
            log.warning("could not read the current policy message (%s)", exc)
        if in_table >= COUNTER_LIMIT:
            self._reject(
                "the current policy message", MalformedMessageError(f"version {in_table} out of range")
            )
            in_table = 0
        version = max(in_table, recorded)
        if version:
            log.info(
                "continuing versions above v%d (policy table v%d, resume record v%d)",
                version,
                in_table,
                recorded,
            )
        return version

    def _reject(self, what: str, exc: Exception) -> None:
        self.rejected += 1
        log.error("rejected %s: %s: %s", what, type(exc).__name__, exc)

    def step(self) -> None:
        # Replay restarting or unreachable: back off and poll again; give up (exit non-zero) after the budget.
        try:
            answered, buf = self._outage.attempt(self._source.latest)
        except WeightMessageError as exc:  # not a message at all: junk in the learner table, rejected once
            self._reject("learner message", exc)
            time.sleep(self.config.quantizer.poll_interval_s)
            return
        if not answered:
            return
        tag = bytes(buf[-TAG_BYTES:]) if buf is not None and buf.size >= TAG_BYTES else None
        if buf is None or (self._key is not None and tag is not None and tag == self._handled_tag):
            time.sleep(self.config.quantizer.poll_interval_s)  # nothing new, or the message handled last time
            return
        # Published, skipped or rejected, a message is handled once: polling it again re-verifies nothing, and a
        # forged one is counted and logged once, not on every poll.
        self._handled_tag = tag
        try:
            header = read_header(buf, key=self._key, stream=LEARNER_STREAM)  # authenticated before decoding
            if policy_version(header.version) >= COUNTER_LIMIT:
                raise MalformedMessageError(f"learner message version {header.version} out of range")
            if policy_version(header.version) <= self.version:  # published already (or older)
                time.sleep(self.config.quantizer.poll_interval_s)
                return
            self.quantize_and_publish(buf)
        except WeightMessageError as exc:
            self._reject("learner message", exc)
            time.sleep(self.config.quantizer.poll_interval_s)

    @property
    def replay_errors(self) -> int:
        """Failed replay calls so far."""
        return self._outage.errors

    def quantize_and_publish(self, buf) -> None:
        """Decode fp32 learner weights (``buf``, already authenticated by ``step``), map to torch keys, encode at
        the actor's bits as version :func:`policy_version` of the learner's, sign, publish."""
        t0 = time.perf_counter()
        learner_msg, state = learner_state(self.config, buf, self._torso)
        t1 = time.perf_counter()
        version = policy_version(learner_msg.version)
        message = encode_policy(
            self.config, state, version=version, learner_step=learner_msg.learner_step, key=self._key
        )
        t2 = time.perf_counter()
        self._sink.publish(message)
        t3 = time.perf_counter()
        self.version = version
        self.learner_step = learner_msg.learner_step
        self.save_run_state()  # at once: a restart must continue above this version, on any host
        self.published += 1
        self.message_bytes = int(message.nbytes)
        self.times = {
            "convert_ms": (t1 - t0) * 1e3,
            "quantize_ms": (t2 - t1) * 1e3,
            "publish_ms": (t3 - t2) * 1e3,
        }

    def write_metrics(self) -> None:
        self.metrics.write(
            {
                "step": self.learner_step,
                "elapsed": time.time() - self.started,
                "version": self.version,
                "published": self.published,
                "rejected": self.rejected,
                "replay_errors": self.replay_errors,
                "message_bytes": self.message_bytes,
                "comm_bits": self.config.comm_bits,
                **self.times,
            }
        )

    def status_record(self) -> QuantizerStatus:
        return QuantizerStatus(
            **self.status_fields(),
            step=max(self.learner_step, 0),
            version=self.version,
            message_bytes=self.message_bytes,
            quantize_ms=self.times["quantize_ms"],
        )
