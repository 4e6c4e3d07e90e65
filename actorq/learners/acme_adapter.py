"""Every use ActorQ makes of Acme's (and Sonnet's) private members, in one place.

Acme 0.4.0 (pinned) offers no public way to run a learner step on a sample taken outside it, to put a compiled
optimizer in a learner, or to reach a distributed agent's parts; these functions do it through the private names
below. Acme's own repository changed ``_step(self)`` to ``_step(self, sample)`` after 0.4.0: an upgrade that
drops or reshapes any of these names would break in the middle of training, so :func:`check_surface` (run when a
learner is built, and by ``tests/unit/test_acme_adapter.py``) fails at once, naming each missing member.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from actorq.errors import ActorQError

ACTOR_CRITIC_MEMBERS: tuple[tuple[str, str], ...] = (
    ("_step", "step"),
    ("_iterator", "attribute"),
    ("_num_steps", "attribute"),
    ("_policy_optimizer", "attribute"),
    ("_critic_optimizer", "attribute"),
)
"""What ActorQ uses of an Acme TF actor-critic learner (D4PG's, and any with the same members): its step, dataset
iterator, step counter and two optimizers. An algorithm's learner builder checks its class with
:func:`check_learner_class`."""

# (class path, member, how it must look): "method" a callable on the class; "step" a tf.function whose Python body
# takes only ``self``; "attribute" a ``self.<member> = ...`` assignment in the class's ``__init__``.
_SURFACE: tuple[tuple[str, str, str], ...] = (
    *(("acme.agents.tf.d4pg.learning.D4PGLearner", member, kind) for member, kind in ACTOR_CRITIC_MEMBERS),
    ("acme.agents.tf.dqn.learning.DQNLearner", "_step", "step"),
    ("acme.agents.tf.dqn.learning.DQNLearner", "_iterator", "attribute"),
    ("acme.agents.tf.dqn.learning.DQNLearner", "_optimizer", "attribute"),
    ("sonnet.optimizers.Adam", "_initialize", "method"),
    ("sonnet.Linear", "_initialize", "method"),
    ("acme.agents.tf.d4pg.agent_distributed.DistributedD4PG", "_environment_factory", "attribute"),
    ("acme.agents.tf.d4pg.agent_distributed.DistributedD4PG", "_network_factory", "attribute"),
    ("acme.agents.tf.d4pg.agent_distributed.DistributedD4PG", "_environment_spec", "attribute"),
    ("acme.agents.tf.d4pg.agent_distributed.DistributedD4PG", "_builder", "attribute"),
    ("acme.agents.tf.d4pg.agent.D4PGBuilder", "_config", "attribute"),
)


class AcmeSurfaceError(ActorQError, RuntimeError):
    """The installed Acme (or Sonnet) lacks a private member ActorQ relies on."""


def _resolve(path: str) -> type:
    module_name, _, name = path.rpartition(".")
    module = __import__(module_name, fromlist=[name])
    return getattr(module, name)


def _assigns(cls: type, member: str) -> bool:
    """True when ``cls.__init__`` (or a base class's) assigns ``self.<member>``."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        with contextlib.suppress(OSError, TypeError):  # no source: a C extension's __init__
            if re.search(rf"\bself\.{member}\s*(:[^=]*)?=[^=]", inspect.getsource(init)):
                return True
    return False


def _problem(path: str, member: str, kind: str) -> str | None:
    """What is wrong with one member of the surface (None: present and as expected)."""
    try:
        cls = _resolve(path)
    except (ImportError, AttributeError) as err:
        return f"{path} cannot be imported ({err})"
    where = f"{path}.{member}"
    if kind == "attribute":
        return None if _assigns(cls, member) else f"{where}: no longer assigned in __init__"
    value = getattr(cls, member, None)
    if not callable(value):
        return f"{where}: no longer a method"
    if kind == "step":
        body = getattr(value, "python_function", None)
        if body is None:
            return f"{where}: no longer a tf.function"
        params = list(inspect.signature(body).parameters)
        if params != ["self"]:
            return f"{where}: takes ({', '.join(params)}), ActorQ calls it with (self) only"
    return None


def missing_surface() -> list[str]:
    """One line per private member the installed Acme/Sonnet lacks or has changed (empty: all as 0.4.0)."""
    return [p for p in (_problem(*entry) for entry in _SURFACE) if p is not None]


def check_surface() -> None:
    """Raise :class:`AcmeSurfaceError` naming every missing private member (ActorQ is pinned to Acme 0.4.0)."""
    _raise(missing_surface())


def missing_learner_members(acme_class: type, members: tuple[tuple[str, str], ...]) -> list[str]:
    """One line per member of ``members`` (``(name, kind)``, e.g. :data:`ACTOR_CRITIC_MEMBERS`) that the Acme
    learner class lacks or has changed (empty: all there)."""
    path = f"{acme_class.__module__}.{acme_class.__qualname__}"
    return [p for p in (_problem(path, member, kind) for member, kind in members) if p is not None]


def check_learner_class(acme_class: type, members: tuple[tuple[str, str], ...]) -> None:
    """Raise :class:`AcmeSurfaceError` unless the Acme learner class has every member ActorQ uses of it."""
    _raise(missing_learner_members(acme_class, members))


def _raise(problems: list[str]) -> None:
    if problems:
        raise AcmeSurfaceError(
            "the installed Acme/Sonnet lacks private members ActorQ uses (it needs dm-acme==0.4.0, "
            "dm-sonnet==2.0.0; install them from requirements.lock): " + "; ".join(problems)
        )


# -- learners ---------------------------------------------------------------------------------------------------
def step_body(acme_class: type) -> Callable[[Any], Any]:
    """The Python body of ``acme_class._step`` (a ``tf.function``), to trace it again in another function."""
    return acme_class.__dict__["_step"].python_function


def dataset_iterator(learner: Any) -> Iterator[Any]:
    """The learner's replay dataset iterator (what its step takes a sample from)."""
    return learner._iterator


@contextlib.contextmanager
def iterator_replaced(learner: Any, iterator: Iterator[Any]) -> Iterator[None]:
    """Inside the block the learner's step reads from ``iterator`` instead of its dataset."""
    real = learner._iterator
    learner._iterator = iterator
    try:
        yield
    finally:
        learner._iterator = real


def replace_step(learner: Any, step: Callable[[], Any]) -> None:
    """Make Acme's ``learner.step()`` run ``step()`` where it would run its own ``_step()``."""
    learner._step = step


def num_steps(learner: Any) -> Any:
    """The learner's step counter (a ``tf.Variable``; checkpointed)."""
    return learner._num_steps


def create_adam_slots(optimizer: Any, variables: list[Any]) -> None:
    """Create a Sonnet Adam's slot variables now (it makes them lazily, at its first apply)."""
    optimizer._initialize(variables)


def create_linear_variables(layer: Any, inputs: Any) -> None:
    """Create an ``snt.Linear``'s variables for ``inputs`` now (a no-op once created), as its ``__call__`` does."""
    layer._initialize(inputs)


def wrap_actor_critic_optimizers(learner: Any, wrap: Callable[[Any], Any]) -> None:
    """Replace an actor-critic learner's (:data:`ACTOR_CRITIC_MEMBERS`) policy and critic optimizers by
    ``wrap(optimizer)``."""
    learner._policy_optimizer = wrap(learner._policy_optimizer)
    learner._critic_optimizer = wrap(learner._critic_optimizer)


def wrap_dqn_optimizer(learner: Any, wrap: Callable[[Any], Any]) -> None:
    """Replace a DQN learner's optimizer by ``wrap(optimizer)``."""
    learner._optimizer = wrap(learner._optimizer)


# -- the distributed agent (the Acme baseline of `actorq bench acme`) ------------------------------------------
class DistributedD4PGParts(NamedTuple):
    """What a ``DistributedD4PG`` keeps from its constructor's arguments."""

    environment_factory: Callable[..., Any]
    network_factory: Callable[..., Any]
    environment_spec: Any
    builder: Any
    builder_config: Any


def distributed_d4pg_parts(agent: Any) -> DistributedD4PGParts:
    """The parts a ``DistributedD4PG`` subclass needs to rebuild its learner and evaluator."""
    return DistributedD4PGParts(
        agent._environment_factory,
        agent._network_factory,
        agent._environment_spec,
        agent._builder,
        agent._builder._config,
    )
