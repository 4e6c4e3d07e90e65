"""Reaching a Ray cluster, and binding one the run starts: what ``--ray-address``, ``--ray-bind`` and
``--ray-connect-timeout-s`` mean.

Joining: :func:`probe_cluster` asks the head's GCS for its cluster id (the first thing ``ray.init`` asks) with a
deadline, before ``ray.init``, which would otherwise retry for minutes ("Failed to get cluster ID from GCS server:
TimedOut"). It raises :class:`RayUnreachableError` naming the cause: nothing listens (refused), nothing answers in
time (timed out), or something answers that is not a Ray head. It starts nothing, so a failed join leaves no
process behind.

Starting: :func:`local_cluster_options` are the ``ray.init`` options that make the cluster listen on
``ray.bind`` only. Ray 2.48 has no authentication, so that address decides who can run code on this host. Ray
2.48 binds its servers one of two ways (checked by listing the listening sockets of every process a local cluster
starts, tests/ray/test_ray_connect.py): when the node IP is exactly ``127.0.0.1`` the GCS, the raylet (node manager
and object manager), every core worker (driver and role workers), the runtime-env agent and the autoscaler
monitor's metrics port listen on 127.0.0.1 only; for any other node IP each of them listens on every interface
(0.0.0.0 / ::), because its C++ gRPC servers and Python agents choose ``"127.0.0.1" if ip == "127.0.0.1" else
"0.0.0.0"``. The dashboard stays off (``include_dashboard=False``; its process then serves nothing). So a bind other
than 127.0.0.1 is only the address Ray advertises, and the run says so in its log.

Ray is imported lazily, as everywhere in the launchers.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import time
from typing import Any

from actorq.errors import UsageError

log = logging.getLogger(__name__)

LOOPBACK_BIND = "127.0.0.1"
"""The only node IP for which Ray 2.48 binds its servers to one address (loopback) instead of every interface."""

SURFACE = (
    ("ray", "init", "_node_ip_address"),
    ("ray", "init", "include_dashboard"),
    ("ray", "init", "_temp_dir"),
    ("ray._private.services", "canonicalize_bootstrap_address", "addr"),
    ("ray.core.generated.gcs_service_pb2", "GetClusterIdRequest", ""),
    ("ray.core.generated.gcs_service_pb2", "GetClusterIdReply", "cluster_id"),
    ("ray.core.generated.gcs_service_pb2_grpc", "NodeInfoGcsServiceStub", "GetClusterId"),
    ("ray.util.scheduling_strategies", "NodeAffinitySchedulingStrategy", "node_id"),
    ("ray", "get_actor", "name"),
)
"""The Ray 2.48 names the ray launcher uses beyond ``ray.init(address=...)``, ``ray.remote`` and actor calls:
``(module, attribute, member)``: a parameter the function or constructor takes, the field of a protobuf message or
the method a gRPC stub sets up ("" for a message used as is). Checked by
:func:`missing_surface` (tests/unit/test_ray_surface.py), so a Ray that renamed one fails there, not in a run."""


class RayLauncherError(UsageError):
    """Ray is missing, or the cluster cannot be joined or started; the message says how to fix it."""


class RayUnreachableError(RayLauncherError):
    """The Ray address given does not lead to a Ray head that answers: refused, timed out or not a Ray head."""


def import_ray():
    """The ``ray`` module, or a clear error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise RayLauncherError(
            "--launcher ray needs Ray: pip install 'actorq[ray]' (ray==2.48.0, the newest that works with "
            "protobuf 3.19.6)"
        ) from None
    return ray


def missing_surface(surface: tuple[tuple[str, str, str], ...] = SURFACE) -> list[str]:
    """Each entry of ``surface`` the installed Ray lacks or reshaped, as ``module.attribute: what is wrong``."""
    import importlib
    import inspect

    problems = []
    for module_name, attr, param in surface:
        where = f"{module_name}.{attr}"
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{where}: missing ({exc})")
            continue
        if not param:
            continue
        descriptor = getattr(value, "DESCRIPTOR", None)
        if descriptor is not None and hasattr(descriptor, "fields_by_name"):  # a protobuf message
            if param not in descriptor.fields_by_name:
                problems.append(f"{where}: no field {param!r}")
            continue
        target = value.__init__ if inspect.isclass(value) else value
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError) as exc:
            problems.append(f"{where}: no signature ({exc})")
            continue
        if param in params:
            continue
        # ray.init takes its underscore options through **kwargs (read by name in its source); a gRPC stub's
        # constructor sets up each method as an attribute.
        source = inspect.getsource(target)
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
        if not ((takes_kwargs and f'"{param}"' in source) or f"self.{param} =" in source):
            problems.append(f"{where}: no parameter or member {param!r}")
    return problems


def join_address(config_address: str) -> str:
    """The cluster a run joins: ``ray.address``, else ``$RAY_ADDRESS``; "" for a local cluster."""
    return config_address.strip() or os.environ.get("RAY_ADDRESS", "").strip()


def _resolve(address: str) -> str:
    """HOST:PORT of ``address`` (``auto``: the cluster ``ray start`` last started on this host, as Ray finds it)."""
    if address != "auto":
        return address
    from ray._private.services import canonicalize_bootstrap_address

    try:
        found = canonicalize_bootstrap_address("auto")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnreachableError(
            f"cannot join the Ray cluster at auto: {exc}; start one with `ray start --head` or pass --ray-address "
            "HOST:PORT"
        ) from None
    if not found:
        raise RayUnreachableError(
            "cannot join the Ray cluster at auto: no Ray cluster was started on this host (ray start --head), or "
            "pass --ray-address HOST:PORT"
        )
    return found


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def probe_cluster(address: str, timeout_s: float) -> str:
    """Check that a Ray head's GCS answers at ``address`` within ``timeout_s``; returns its HOST:PORT.

    A TCP connect tells refused from silent; then the GCS's ``GetClusterId`` (what ``ray.init`` asks first) with
    the rest of the deadline tells a Ray head from anything else that accepts connections.

    Raises:
        RayUnreachableError: naming the cause (connection refused, timed out, not a Ray head) and what to check.
    """
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    target = _resolve(address)
    host, port = _split(target)
    fix = "check the address (ray status on the head shows it) or leave --ray-address out for a local cluster"
    deadline = time.monotonic() + timeout_s

    def fail(cause: str) -> RayUnreachableError:
        return RayUnreachableError(f"cannot join the Ray cluster at {target}: {cause}; {fix}")

    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except ConnectionRefusedError:
        raise fail("connection refused (nothing listens on that port)") from None
    except TimeoutError:
        raise fail(f"timed out after {timeout_s:g}s connecting (nothing answers at that address)") from None
    except OSError as exc:  # no route, unknown host, network down
        cause = errno.errorcode.get(exc.errno or 0, "")
        raise fail(f"cannot connect ({exc.strerror or exc}{', ' + cause if cause else ''})") from None
    channel = grpc.insecure_channel(f"{host}:{port}" if ":" not in host else f"[{host}]:{port}")
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        left = max(deadline - time.monotonic(), 0.1)
        reply = stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=left)
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        detail = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise fail(
                f"timed out after {timeout_s:g}s waiting for Ray's GCS to answer (the port accepts connections but "
                "nothing answers there)"
            ) from None
        raise fail(
            f"not a Ray head (the server there answered {getattr(code, 'name', code)}: {detail})"
        ) from None
    finally:
        channel.close()
    if not reply.cluster_id:
        raise fail("not a Ray head (its GCS answered without a cluster id)")
    return target


def local_cluster_options(bind: str) -> dict[str, Any]:
    """The ``ray.init`` options that make a cluster the run starts listen on ``bind`` (see the module docstring)."""
    if bind != LOOPBACK_BIND:
        log.warning(
            "ray.bind=%s: Ray 2.48 advertises that address but its GCS, raylet, object manager, core workers, "
            "runtime-env agent and autoscaler metrics listen on every interface for any node IP but 127.0.0.1; "
            "Ray has no authentication, so firewall the other interfaces",
            bind,
        )
    return {"_node_ip_address": bind, "include_dashboard": False}
