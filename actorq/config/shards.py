"""Replay shards (``replay.shards``): the rules every role and launcher shares, written once, without Reverb.

With ``replay.shards = N`` a run has N Reverb servers, shards ``0 .. N-1``:

- **Addresses.** Roles are given every shard's ``HOST:PORT`` in shard order, comma-separated, as one
  ``--replay-address`` (:func:`join_addresses` / :func:`split_addresses`); one shard is a plain ``HOST:PORT``.
- **Experience.** Actor ``i`` writes to shard ``i % N`` (:func:`actor_shard`); the learner's dataset reads every
  shard, and priority updates go back to the shard each sampled item came from (``actorq.replay.shards``).
- **Weights.** Only shard 0 (:data:`WEIGHTS_SHARD`) carries weight messages: the learner publishes there, the
  quantizer reads and publishes there, actors and the evaluator read there. A message is one item read by every
  actor, so copying it to every shard would multiply the quantizer's upload by N for no reader that needs it.
- **Names.** Shard 0 is the role ``replay`` (its directory, checkpoints and log keep the one-server names, so a
  one-shard run and its resume are unchanged); shard ``k >= 1`` is ``replay_k`` (:func:`replay_label`).
- **Ports.** A fixed ``replay.port = P`` gives shard ``k`` port ``P + k``; 0 picks a free port per shard.
- **Cores.** With one shard, ``affinity.replay`` is the server's set of cores as before; with N > 1, shard ``k``
  runs on the one core ``affinity.replay[k % len]`` (:func:`shard_cpus`): a server per core is what sharding buys.
- **Table settings** (``max_size``, ``min_size``, ``samples_per_insert``, ...) apply to each shard's table.
"""

from __future__ import annotations

from actorq.config.schema import ExperimentConfig
from actorq.status import role_label

WEIGHTS_SHARD = 0
"""The shard that holds the weight tables every role reads and writes."""

ADDRESS_SEPARATOR = ","
"""Between the shards' ``HOST:PORT`` in one ``--replay-address``."""


def actor_shard(actor_index: int, shards: int) -> int:
    """The shard actor ``actor_index`` writes its experience to."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    return actor_index % shards


def replay_label(shard: int) -> str:
    """The role label (and run-directory name) of replay shard ``shard``: ``replay``, ``replay_1``, ...
    (:func:`actorq.status.role_label`'s rule)."""
    return role_label("replay", shard)


def join_addresses(addresses: list[str] | tuple[str, ...]) -> str:
    """Every shard's ``HOST:PORT``, in shard order, as one ``--replay-address`` value."""
    return ADDRESS_SEPARATOR.join(addresses)


def split_addresses(address: str) -> list[str]:
    """The shards' ``HOST:PORT`` list from one ``--replay-address`` value (one entry for a single server).

    Raises:
        ValueError: An empty entry (e.g. a trailing comma), or one that is not ``HOST:PORT``.
    """
    parts = [part.strip() for part in address.split(ADDRESS_SEPARATOR)]
    if not all(parts):
        raise ValueError(
            f"replay address {address!r} has an empty entry; give HOST:PORT, or one HOST:PORT per shard "
            "separated by commas"
        )
    for part in parts:
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"replay address {address!r}: {part!r} is not HOST:PORT with a port in 1-65535 (e.g. "
                "10.0.0.5:8000); the replay role prints its address when it starts"
            )
    return parts


def shard_port(port: int, shard: int) -> int:
    """Shard ``shard``'s port for a configured ``replay.port`` (0: the placement picks a free one)."""
    return port + shard if port else 0


def shard_cpus(cpus: tuple[int, ...], shards: int, shard: int) -> tuple[int, ...]:
    """The cores replay shard ``shard`` runs on, given ``affinity.replay`` (see the module docstring)."""
    if not cpus or shards == 1:
        return tuple(cpus)
    return (cpus[shard % len(cpus)],)


def weights_address(address: str) -> str:
    """The ``HOST:PORT`` of the shard that carries weight messages, from a ``--replay-address`` value."""
    return split_addresses(address)[WEIGHTS_SHARD]


def actor_address(address: str, actor_index: int) -> str:
    """The ``HOST:PORT`` of the shard actor ``actor_index`` writes its experience to."""
    addresses = split_addresses(address)
    return addresses[actor_shard(actor_index, len(addresses))]


SHARD_LAUNCHERS = ("local", "inprocess", "ray")
"""Launchers that start more than one replay shard (``replay.shards`` > 1)."""


def check_shards(config: ExperimentConfig) -> None:
    """``replay.shards``: at least 1, no shard without an actor to fill it, a launcher that starts shards.

    Raises:
        ValueError: What is wrong and how to fix it (the loader reports it as a ConfigError).
    """
    shards = config.replay.shards
    if shards < 1:
        raise ValueError(f"replay.shards={shards} must be >= 1 (1: one replay server)")
    if shards > config.actor.num_actors:
        raise ValueError(
            f"replay.shards={shards} exceeds actor.num_actors={config.actor.num_actors}: actor i writes to shard "
            "i % shards, so a shard without an actor would never fill; use at most as many shards as actors"
        )
    if shards > 1 and config.launcher not in SHARD_LAUNCHERS:
        raise ValueError(
            f"replay.shards={shards} is not supported by launcher {config.launcher!r}; use one of "
            f"{', '.join(SHARD_LAUNCHERS)}, or replay.shards=1"
        )
    if config.replay.port and config.replay.port + shards - 1 > 65535:
        raise ValueError(
            f"replay.port={config.replay.port} with replay.shards={shards}: shard k listens on port + k, past "
            "65535; pick a lower port or 0 (free ports)"
        )
