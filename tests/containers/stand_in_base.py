"""TEST SHIM: a local stand-in for ``python:3.10-slim`` on machines that cannot reach a container registry.

The Dockerfiles say ``FROM python:3.10-slim`` and users get that image from Docker Hub. CI machines here reach the
Python and Debian package registries but no container registry, so this builds an image with the same tag from
what the machine does have, so that ``docker build -f docker/Dockerfile.worker .`` runs exactly as written:

- a Debian bookworm ``minbase`` root filesystem from ``debootstrap`` and the mirror apt is configured with (the
  official image is bookworm too), plus the shared libraries CPython's extension modules link against;
- the machine's own CPython 3.10 (pyenv's build), copied to the *same prefix* because it has an rpath to its own
  ``lib`` directory, with ``python``/``python3``/``pip`` linked into ``/usr/local/bin`` like the official image;
- the host's CA bundle, because this machine reaches the package registry through a proxy whose certificate only
  the host trusts. It is kept under its own name (Debian's ``ca-certificates`` rewrites the standard bundle) and
  given to pip through ``PIP_CERT``; nothing else of the host's pip configuration is carried over (its extra
  indexes and find-links are host paths).

It is never pushed anywhere and is not what the images are meant to be built on; it exists only so that the
container tests (tests/containers) and the README's steps can run on such a machine. ``python -m
tests.containers.stand_in_base`` builds it (a no-op when the tag exists; ``--force`` rebuilds).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

TAG = "python:3.10-slim"
LABEL = "org.actorq.test-stand-in"
# Where the host's CA bundle goes in the image, under a name no Debian package writes to.
CA_IN_IMAGE = "/usr/local/share/actorq-test-shim/host-ca-bundle.crt"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# Libraries that CPython 3.10's extension modules (ssl, hashlib, ctypes, sqlite3, curses, uuid, nis) need at run
# time, plus what the official slim image also ships (CA certificates for the image's own use, netbase, tzdata).
PACKAGES = (
    "ca-certificates,netbase,tzdata,libssl3,libffi8,libsqlite3-0,libncursesw6,libuuid1,libnsl2,"
    "libgssapi-krb5-2,libbz2-1.0,liblzma5,zlib1g,libreadline8"
)
# Parts of the pyenv build that the slim image leaves out too (the test suite, idle, tkinter, caches), and the
# machine's own site hooks (only pip and setuptools belong in a fresh interpreter).
PRUNE = (
    "lib/python3.10/test",
    "lib/python3.10/idlelib",
    "lib/python3.10/tkinter",
    "lib/python3.10/turtledemo",
)
KEEP_SITE = re.compile(r"^(pip|setuptools|pkg_resources|_distutils_hack|distutils-precedence\.pth)|README")


class StandInError(RuntimeError):
    """The stand-in image could not be built (missing tool, no Python 3.10, debootstrap failed)."""


def find_python310() -> Path:
    """The machine's CPython 3.10 prefix: pyenv's newest 3.10.x (the one ``make venv`` falls back to).

    Raises:
        StandInError: No Python 3.10 installation under pyenv's root.
    """
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv", "/opt/pyenv"]
    for root in filter(None, roots):
        found = sorted(
            Path(root, "versions").glob("3.10.*"), key=lambda p: [int(x) for x in p.name.split(".")]
        )
        for prefix in reversed(found):
            if (prefix / "bin" / "python3.10").exists() and (
                prefix / "lib" / "libpython3.10.so.1.0"
            ).exists():
                return prefix.resolve()
    raise StandInError(
        "no CPython 3.10 build under $PYENV_ROOT/versions (the stand-in copies the machine's own); "
        "install one with `pyenv install 3.10.13`, or pull the real python:3.10-slim where a registry is reachable"
    )


def apt_mirror() -> str:
    """The Debian mirror apt is configured with (deb822 ``URIs:`` or a one-line ``deb`` source)."""
    sources = sorted(Path("/etc/apt").glob("sources.list.d/*")) + [Path("/etc/apt/sources.list")]
    for path in sources:
        text = path.read_text(errors="replace") if path.is_file() else ""
        if "bookworm" not in text:
            continue
        for m in re.finditer(r"^(?:URIs:\s*(\S+)|deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s)", text, re.M):
            uri = m.group(1) or m.group(2)
            if uri.rstrip("/").endswith("/debian"):
                return uri
    return "http://deb.debian.org/debian"


def image_exists(tag: str = TAG) -> bool:
    """Whether the local Docker engine already has ``tag``."""
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def _run(argv: list[str], **kwargs) -> None:
    log.info("$ %s", " ".join(argv))
    subprocess.run(argv, check=True, **kwargs)


def build(force: bool = False) -> float:
    """Build the stand-in and tag it ``python:3.10-slim``; returns the seconds it took (0 when it existed).

    Raises:
        StandInError: debootstrap is not installed, there is no Python 3.10, or a step failed.
    """
    if image_exists() and not force:
        return 0.0
    if shutil.which("debootstrap") is None:
        raise StandInError("debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise StandInError("debootstrap needs root to build the stand-in's root filesystem")
    start = time.monotonic()
    prefix = find_python310()
    with tempfile.TemporaryDirectory(prefix="actorq-stand-in-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={PACKAGES}",
                "bookworm",
                str(rootfs),
                apt_mirror(),
            ],
            stdout=subprocess.DEVNULL,
        )
        # The interpreter at the same prefix (its rpath), without the parts the slim image also leaves out.
        target = rootfs / prefix.relative_to("/")
        shutil.copytree(
            prefix, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.a")
        )
        # The images run as an unprivileged user, who must reach the interpreter: open every directory on the way
        # to the prefix (pyenv's usually lies under /root, 0700 in the root filesystem).
        rel = prefix.relative_to("/")
        for part in [rel, *rel.parents][:-1]:
            (rootfs / part).chmod(0o755)
        for rel in PRUNE:
            shutil.rmtree(target / rel, ignore_errors=True)
        site = target / "lib" / "python3.10" / "site-packages"
        for entry in site.iterdir():
            if not KEEP_SITE.match(entry.name):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        (target / "lib" / "python3.10" / "lib-dynload" / "_tkinter.cpython-310-x86_64-linux-gnu.so").unlink(
            missing_ok=True
        )
        bindir = rootfs / "usr" / "local" / "bin"
        for name, to in {"python": "python3.10", "python3": "python3.10", "python3.10": "python3.10"}.items():
            (bindir / name).symlink_to(f"/{prefix.relative_to('/')}/bin/{to}")
        for name in ("pip", "pip3", "pip3.10"):
            (bindir / name).symlink_to(f"/{prefix.relative_to('/')}/bin/pip3.10")
        ca = rootfs / CA_IN_IMAGE.lstrip("/")
        ca.parent.mkdir(parents=True)
        shutil.copyfile(HOST_CA, ca)
        # Empty apt lists and caches, as in the official image.
        for rel in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for entry in (rootfs / rel).glob("*"):
                if entry.is_file():
                    entry.unlink()
        changes = [
            "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            "ENV PYTHON_VERSION=" + prefix.name,
            f"ENV PIP_CERT={CA_IN_IMAGE}",
            "ENV PIP_DISABLE_PIP_VERSION_CHECK=1",
            "ENV PIP_DEFAULT_TIMEOUT=180",
            f"LABEL {LABEL}=true",
            'CMD ["python3"]',
        ]
        tar = subprocess.Popen(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
        )
        argv = ["docker", "import"]
        for change in changes:
            argv += ["--change", change]
        _run([*argv, "-", TAG], stdin=tar.stdout, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise StandInError("tar of the stand-in root filesystem failed")
    smoke = subprocess.run(
        ["docker", "run", "--rm", TAG, "python", "-c", "import ssl, ctypes, sqlite3, hashlib; print('ok')"],
        capture_output=True,
        text=True,
    )
    if smoke.stdout.strip() != "ok":
        raise StandInError(f"the stand-in's Python does not start: {smoke.stderr.strip()}")
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    """CLI: build the stand-in unless it exists."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        seconds = build(force=args.force)
    except (StandInError, subprocess.CalledProcessError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{TAG} stand-in " + (f"built in {seconds:.0f} s" if seconds else "already present"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
