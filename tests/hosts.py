"""Test hosts that share nothing but a network link: the namespace hosts of :mod:`actorq.bench.netns` (moved
there so that ``actorq bench comm --netns`` builds the same hosts), named here for the tests.

:class:`NamespaceHosts` makes network namespaces on one machine, each with its own address, its own run directory
and, where a test asks for it, a ``tbf`` bandwidth limit on its link; it removes everything it made (processes by
handle, then the namespaces and their links) at close, also when the test fails. See the module for the layout.
"""

from __future__ import annotations

from actorq.bench.netns import SUBNET, Host, NamespaceHosts, namespace_pids, unavailable_reason

__all__ = ["SUBNET", "Host", "NamespaceHosts", "namespace_pids", "unavailable_reason"]
