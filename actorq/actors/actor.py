"""The quantized actor: a torch policy at its precision, per-environment exploration, n-step adders, weight pulls.

An actor steps ``actor.envs_per_actor`` environments: :meth:`QuantizedActor.select_actions` computes all their
actions in one batched forward, each environment with its own exploration (sigma/epsilon stream
``actor_id * envs_per_actor + j`` of ``num_actors * envs_per_actor``), and each has its own adder (episode
boundaries) over one shared writer.

Every pull is timed into the paper's runtime breakdown (pull, decode, apply) alongside inference, env and adder
time. A message that fails validation is logged with its specific error, counted, and ignored: the actor keeps
acting on its last good weights.

With the run's weights key, a pulled message is authenticated before anything in it is read (its HMAC tag, see
:mod:`actorq.quantize.signing`), and a validly signed message older than the weights the actor has, or than
``WeightState.floor`` (the last version it installed before a restart), is rejected as stale: a replayed message
can't roll an actor back. Without a key (``--insecure-weights``) unsigned messages are accepted.

Nothing in the policy table stops an actor: whatever a pull returns (junk of any dtype, rank or size, a forged or
corrupt message) is a counted rejection, on the acting thread and on the async updater's alike. The updater thread
survives every error; if it ever ends while the actor runs, the next :meth:`QuantizedActor.update` raises
:class:`WeightUpdaterDiedError`, so the role fails and its supervisor restarts it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dm_env
import numpy as np

from actorq import algorithms
from actorq.actors.policy import ActorPolicy
from actorq.config import ExperimentConfig
from actorq.core import Adder, WeightSubscriber, WeightsUnavailableError
from actorq.errors import ActorQError
from actorq.quantize.codec import (
    UnauthenticatedMessageError,
    WeightMessageError,
    decode_message,
    read_header,
)
from actorq.quantize.signing import POLICY_STREAM, WeightsKey
from actorq.timers import Timers

log = logging.getLogger(__name__)

REJECT_LOG_PERIOD_S = 10.0


class WeightUpdaterDiedError(ActorQError, RuntimeError):
    """The async weight updater thread ended while the actor runs (it never should): the role fails loudly
    instead of acting on stale weights forever."""


@dataclass
class WeightState:
    """What the actor knows about the weights it runs."""

    version: int = -1
    floor: int = -1
    """Lowest version the actor may install: the last one it installed before it restarted (within a run)."""
    learner_step: int = -1
    received: int = 0
    rejected: int = 0
    last_error: str = ""
    pull_failures: int = 0
    """Pulls that could not reach replay (the actor kept acting on the weights it had)."""
    applied_at: float | None = None
    """``time.monotonic()`` when the current weights were applied."""

    @property
    def age_s(self) -> float:
        """Seconds since the current weights were applied (staleness while no newer ones arrive); -1 if none."""
        return -1.0 if self.applied_at is None else time.monotonic() - self.applied_at


class QuantizedActor:
    """Acme-style actor (select_action / observe_first / observe / update) over a ActorPolicy."""

    def __init__(
        self,
        config: ExperimentConfig,
        policy: ActorPolicy,
        adder: Adder | Sequence[Adder] | None,
        subscriber: WeightSubscriber,
        actor_id: int = 0,
        seed: int = 0,
        action_low: np.ndarray | None = None,
        action_high: np.ndarray | None = None,
        timers: Timers | None = None,
        key: WeightsKey | None = None,
        on_install: Callable[[int], None] | None = None,
    ):
        """``adder``: one per environment (``actor.envs_per_actor`` of them; a single adder for one environment);
        ``key``: the run's weights key (None accepts unsigned messages: ``--insecure-weights`` only);
        ``on_install(version)`` runs after each install, e.g. to persist the version across restarts."""
        self._config = config
        self._policy = policy
        self.num_envs = config.actor.envs_per_actor
        self._adders = self._as_list(adder)
        self._subscriber = subscriber
        self._rng = np.random.default_rng(seed)
        self._low, self._high = action_low, action_high
        self._algorithm = algorithms.get(config.algorithm)
        streams = config.actor.num_actors * self.num_envs
        ids = [actor_id * self.num_envs + j for j in range(self.num_envs)]
        # Environment j explores as stream actor_id * envs + j of all the actors' streams, at the level the
        # algorithm gives that stream (D4PG: a Gaussian sigma; DQN: an epsilon).
        self.exploration = self._algorithm.exploration_levels(ids, streams, config)
        self.exploration_level = float(self.exploration[0])
        self.timers = timers or Timers()
        self.weights = WeightState()
        self._key = key
        self._on_install = on_install
        self._last_reject_log = -REJECT_LOG_PERIOD_S
        self._expected = policy.expected_shapes()
        self._steps_since_pull = 0
        # Kernels whose update is dear (prepacking, a new ONNX Runtime session) prepare on the updater thread, so
        # the acting thread only swaps references.
        self._async = config.actor.async_update or policy.prepare_off_thread
        self._pending = None  # prepared weights from the async updater: (prepared, header)
        self._pending_lock = threading.Lock()
        self._updater: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()

    @property
    def adders(self) -> list[Adder] | None:
        """One adder per environment (None: experience is not written)."""
        return self._adders

    @property
    def policy(self) -> ActorPolicy:
        """The policy (its kernel choice is ``policy.selection``)."""
        return self._policy

    def _as_list(self, adder: Adder | Sequence[Adder] | None) -> list[Adder] | None:
        if adder is None:
            return None
        adders = list(adder) if isinstance(adder, (list, tuple)) else [adder]
        if len(adders) != self.num_envs:
            raise ValueError(f"{len(adders)} adders for {self.num_envs} environments (actor.envs_per_actor)")
        return adders

    # -- acting ------------------------------------------------------------------------------------------------
    def select_action(self, observation: np.ndarray) -> np.ndarray:
        """The action for environment 0's ``[obs_dim]`` observation (its own exploration)."""
        with self.timers.time("inference"):
            out = self._policy(observation)
        return self._algorithm.explore(
            np.asarray(out).reshape(1, -1), self._rng, self.exploration, self._low, self._high
        )[0]

    def select_actions(self, observations: np.ndarray) -> list[np.ndarray]:
        """Actions for ``[num_envs, obs_dim]`` observations: one batched forward, then each environment's own
        exploration (env j at ``exploration[j]``). One environment takes :meth:`select_action`'s path."""
        if self.num_envs == 1:
            return [self.select_action(observations[0])]
        with self.timers.time("inference"):
            out = self._policy(observations)
        return self._algorithm.explore(out, self._rng, self.exploration, self._low, self._high)

    def observe_first(self, timestep: dm_env.TimeStep, env: int = 0) -> None:
        """Environment ``env`` started an episode."""
        if self._adders is not None:
            with self.timers.time("adder"):
                self._adders[env].add_first(timestep)

    def observe(self, action: np.ndarray, next_timestep: dm_env.TimeStep, env: int = 0) -> None:
        """Environment ``env`` took ``action`` (one env step: counts towards ``update_period``)."""
        if self._adders is not None:
            with self.timers.time("adder"):
                self._adders[env].add(action, next_timestep)
        self._steps_since_pull += 1

    # -- weights -----------------------------------------------------------------------------------------------
    def update(self, wait: bool = False) -> None:
        """Pull new weights every ``update_period`` env steps; ``wait``: pull and apply now, on this thread."""
        if self._async and not wait:
            self._install_pending()
            if self._steps_since_pull >= self._config.actor.update_period:
                self._steps_since_pull = 0
                self._ensure_updater()
                self._wake.set()
            return
        if wait or self._steps_since_pull >= self._config.actor.update_period:
            self._steps_since_pull = 0
            self._pull_and_apply()

    def _fetch(self):
        """Pull the newest message; return (buffer, header) when it is newer than ours, else None."""
        with self.timers.time("pull"):
            try:
                buf = self._subscriber.latest()
            except WeightsUnavailableError as exc:  # the replay link may be down: keep acting on what we have
                self.weights.pull_failures += 1
                log.warning("weight pull failed (%s); keeping weights v%d", exc, self.weights.version)
                return None
            except WeightMessageError as exc:  # not a message at all (junk in the table)
                self._reject(exc)
                return None
        if buf is None:
            return None
        try:
            # Authenticates first (with a key): the header is only read once the tag has verified.
            header = read_header(buf, key=self._key, stream=POLICY_STREAM)
        except WeightMessageError as exc:
            self._reject(exc)
            return None
        current = self.weights.version
        if header.version == current:
            return None  # the message already applied, offered again until a newer one is published
        if header.version < max(current, self.weights.floor):
            self._reject(
                UnauthenticatedMessageError(
                    f"stale message v{header.version}: this actor runs v{current} and never installs a version "
                    f"below v{max(current, self.weights.floor)} (a replayed older message)"
                )
            )
            return None
        return buf, header

    def _pull_and_apply(self) -> bool:
        fetched = self._fetch()
        if fetched is None:
            return False
        buf, header = fetched
        try:
            with self.timers.time("decode"):
                message = decode_message(buf, expected=self._expected)
            with self.timers.time("apply"):
                self._policy.apply(message)
        except WeightMessageError as exc:
            self._reject(exc)
            return False
        self._accept(header)
        return True

    def _reject(self, exc: Exception) -> None:
        self.weights.rejected += 1
        error = f"{type(exc).__name__}: {exc}"
        # The same bad message is offered on every pull until replaced: log it when it changes, and then at most
        # every REJECT_LOG_PERIOD_S (it is always counted), so whoever can write the table can't flood the log.
        now = time.monotonic()
        if error != self.weights.last_error or now - self._last_reject_log >= REJECT_LOG_PERIOD_S:
            self._last_reject_log = now
            log.error(
                "rejected weight message (%s); keeping weights v%d (%d rejected so far)",
                error,
                self.weights.version,
                self.weights.rejected,
            )
        self.weights.last_error = error

    def _accept(self, header) -> None:
        self.weights.version = header.version
        self.weights.learner_step = header.learner_step
        self.weights.received += 1
        self.weights.applied_at = time.monotonic()
        if self._on_install is not None:
            self._on_install(header.version)

    # -- async updates: pull/decode/prepare on a thread, swap on the acting thread -----------------------------
    def _ensure_updater(self) -> None:
        if self._updater is None:
            self._updater = threading.Thread(target=self._updater_loop, name="weight-updater", daemon=True)
            self._updater.start()
        elif not self._updater.is_alive() and not self._stop.is_set():
            raise WeightUpdaterDiedError(
                f"the weight updater thread ended; the actor would act on weights v{self.weights.version} forever"
            )

    def _updater_loop(self) -> None:
        while not self._stop.is_set():
            if not self._wake.wait(timeout=0.5):
                continue
            self._wake.clear()
            try:
                self._update_once()
            except Exception:  # thread boundary: logged and counted; the next wake pulls again
                self.weights.pull_failures += 1
                log.exception("weight update failed; keeping weights v%d", self.weights.version)

    def _update_once(self) -> None:
        fetched = self._fetch()
        if fetched is None:
            return
        buf, header = fetched
        try:
            with self.timers.time("decode"):
                message = decode_message(buf, expected=self._expected)
                prepared = self._policy.prepare(message)
        except WeightMessageError as exc:
            self._reject(exc)
            return
        with self._pending_lock:
            self._pending = (prepared, header)

    def _install_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            with self.timers.time("apply"):
                self._policy.install(pending[0])
            self._accept(pending[1])

    @property
    def subscriber(self) -> WeightSubscriber:
        """Where weight messages come from (replaced by :meth:`reconnect`)."""
        return self._subscriber

    def reconnect(
        self, adder: Adder | Sequence[Adder] | None, subscriber: WeightSubscriber
    ) -> list[Adder] | None:
        """Use new adders and subscriber (after the replay connection broke); returns the old adders."""
        old, self._adders, self._subscriber = self._adders, self._as_list(adder), subscriber
        return old

    def wait_for_weights(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Block (polling) until a first message is applied; False on timeout or stop."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            if self._pull_and_apply():
                return True
            time.sleep(0.2)
        return self.weights.version >= 0

    def close(self) -> None:
        self._stop.set()
        if self._updater is not None:
            self._updater.join(timeout=2)
