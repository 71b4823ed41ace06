"""Packing a directory as a code bundle archive, deterministically.

A bundle is a directory of Python modules (and data files they read). Its archive is an
uncompressed POSIX tar of the directory's files, named relative to the bundle's *import root*
(the nearest ancestor that is not a package: a bundle ``examples/`` with an ``__init__.py`` is
stored as ``examples/...``, so its modules keep the names ``examples.tasks.etl`` they have in a
checkout), plus the ``__init__.py`` of every package between the import root and the bundle.
The SHA-256 of the archive (lowercase hex) is the bundle's version; what a server and a worker
accept is ``schedd_core.bundle_archive.check_archive``.

Guaranteed:

* Determinism: the same files with the same contents and executable bits give the same bytes,
  whatever their timestamps, owners or the order the file system lists them in (entries are
  sorted by name; mtime 0, uid/gid 0, no owner names; mode 0644, or 0755 for an executable).
  ``tests/unit/test_bundle_archive.py::test_packing_is_deterministic`` proves it.
* Skipped: ``__pycache__`` directories, ``*.pyc`` files, hidden files and directories (a name
  starting with ``.``), and anything that is not a regular file (symbolic links, sockets).
* Limits: an archive is at most ``MAX_ARCHIVE_BYTES`` and holds at most ``MAX_ARCHIVE_FILES``
  files; packing a larger directory raises :class:`BundleTooLarge` naming the largest files.

Not guaranteed: that the modules import (that is known only when a worker runs them).
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from schedd_core.bundle_archive import (
    BundleError,
    BundleTooLarge,
    archive_sha256,
)
from schedd_core.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_FILES

_SKIPPED_DIRS = frozenset({"__pycache__"})


@dataclass(frozen=True)
class PackedBundle:
    sha256: str
    archive: bytes
    #: The archive's file names, in archive order.
    names: tuple[str, ...]
    #: The directory module names are relative to (workers put the unpacked archive there).
    import_root: Path


def import_root(directory: Path) -> Path:
    """The nearest ancestor of ``directory`` (or itself) that is not a package (no ``__init__.py``)."""
    root = directory.resolve()
    while (root / "__init__.py").is_file() and root.parent != root:
        root = root.parent
    return root


def pack(directory: Path) -> PackedBundle:
    """The deterministic archive of the bundle ``directory`` (see the module's docstring)."""
    directory = directory.resolve()
    if not directory.is_dir():
        raise BundleError(f"{directory}: a bundle must be a directory")
    root = import_root(directory)
    files = _package_markers(root, directory) + _files(directory)
    files.sort(key=lambda item: item[0])
    if len(files) > MAX_ARCHIVE_FILES:
        raise BundleTooLarge(
            f"{directory}: holds {len(files)} files; a bundle may hold at most {MAX_ARCHIVE_FILES}"
        )
    estimate = sum(512 + _padded(size) for _, _, size, _ in files)
    if estimate > MAX_ARCHIVE_BYTES:
        raise BundleTooLarge(_too_large(directory, estimate, files))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for name, path, size, executable in files:
            info = tarfile.TarInfo(name)
            info.size = size
            info.mtime = 0
            info.mode = 0o755 if executable else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with path.open("rb") as f:
                data = f.read(size + 1)
            if len(data) != size:
                raise BundleError(f"{path}: changed while the bundle was being packed; try again")
            tar.addfile(info, io.BytesIO(data))
    archive = buffer.getvalue()
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise BundleTooLarge(_too_large(directory, len(archive), files))
    return PackedBundle(archive_sha256(archive), archive, tuple(name for name, *_ in files), root)


def _files(directory: Path) -> list[tuple[str, Path, int, bool]]:
    root = import_root(directory)
    found: list[tuple[str, Path, int, bool]] = []
    for current, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(names):
            if name.startswith(".") or name.endswith(".pyc"):
                continue
            path = Path(current) / name
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            arcname = path.relative_to(root).as_posix()
            found.append((arcname, path, info.st_size, bool(info.st_mode & stat.S_IXUSR)))
    return found


def _package_markers(root: Path, directory: Path) -> list[tuple[str, Path, int, bool]]:
    """The ``__init__.py`` of each package strictly between ``root`` and ``directory``."""
    markers = []
    current = directory.parent
    while current != root and root in current.parents:
        marker = current / "__init__.py"
        info = marker.lstat()
        markers.append((marker.relative_to(root).as_posix(), marker, info.st_size, False))
        current = current.parent
    return markers


def _padded(size: int) -> int:
    return (size + 511) // 512 * 512


def _too_large(directory: Path, size: int, files: list[tuple[str, Path, int, bool]]) -> str:
    largest = sorted(files, key=lambda item: -item[2])[:3]
    named = ", ".join(f"{name} ({file_size} bytes)" for name, _, file_size, _ in largest)
    return (
        f"{directory}: the bundle would be about {size} bytes; a bundle may be at most "
        f"{MAX_ARCHIVE_BYTES} bytes (largest files: {named}). Move data files out of the bundle "
        "directory, or name a smaller one with --bundle"
    )
