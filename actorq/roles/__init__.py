"""One module per process: replay, learner, quantizer, actor, evaluator.

Each holds a class with ``step()``/``run(stop)``. :class:`~actorq.roles.host.RoleHost` builds and runs one wherever
it runs, and :func:`main` runs one in this process until SIGTERM or SIGINT, which is how ``actorq role NAME`` (and so
the local, launchpad and Docker launchers) start processes. Heavy imports (TensorFlow, torch, reverb) happen only
when a role is built, so importing this package is cheap.

Every role but replay handles weight messages and needs the run's weights key (:mod:`actorq.weights_key`);
without one it refuses to start unless it is told ``insecure_weights``.
"""

from __future__ import annotations

from actorq.roles.host import RoleHost, build_role, main

__all__ = ["RoleHost", "build_role", "main"]
