"""Unpacking a checked bundle archive read-only, verifying an unpacked tree against its archive, and
removing one.

Guaranteed:

* :func:`unpack` checks the archive first (``schedd_core.bundle_archive.check_archive`` with the
  given limits) and writes nothing from a bad one. It writes each member itself from the archive's
  bytes (no tar extraction code runs), creating files exclusively and never following a symbolic
  link; afterwards files are 0444 (0555 when the archive marks them executable) and directories
  0555, so a task cannot change the code the next task imports, nor add a module or a ``.pyc``.
* :func:`tree_problem` finds any difference between a tree and its archive: a file missing, added,
  changed (SHA-256 of its contents), of another type (a symbolic link, say) or with other
  permissions; an added directory. None means the tree is exactly what :func:`unpack` made.
* :func:`remove_tree` removes a tree even though its directories are read-only.

Not guaranteed: protection from the tree's own owner while a pool imports from it (the owner can
change anything it owns; the cache verifies every tree before a new pool starts on it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath

from schedd_core.bundle_archive import DEFAULT_LIMITS, ArchiveLimits, check_archive

#: Modes of unpacked bundles: read-only for everyone, directories and executables traversable.
FILE_MODE = 0o444
EXECUTABLE_MODE = 0o555
DIRECTORY_MODE = 0o555
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def unpack(archive: bytes, destination: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> int:
    """Check ``archive`` and write its members under ``destination`` (created; it must not exist),
    read-only; returns the bytes of the files written."""
    members = check_archive(archive, "archive", limits)
    destination.mkdir(mode=0o700)
    directories = {destination}
    written = 0
    for member in members:
        target = destination.joinpath(*PurePosixPath(member.name).parts)
        for parent in reversed(target.relative_to(destination).parents[:-1]):
            _directory(destination / parent, directories)
        if member.isdir():
            _directory(target, directories)
            continue
        data = archive[member.offset_data : member.offset_data + member.size]
        fd = os.open(target, _CREATE, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, _file_mode(member))
        finally:
            os.close(fd)
        written += len(data)
    for directory in sorted(directories, key=lambda p: len(p.parts), reverse=True):
        os.chmod(directory, DIRECTORY_MODE, follow_symlinks=False)
    return written


def tree_problem(directory: Path, archive: bytes) -> str | None:
    """What differs between the unpacked ``directory`` and ``archive`` (None: nothing)."""
    files: dict[str, tuple[str, int]] = {}
    directories = {"."}
    for member in check_archive(archive, "archive"):
        path = PurePosixPath(member.name)
        directories |= {p.as_posix() for p in path.parents}
        if member.isdir():
            directories.add(member.name)
        else:
            data = archive[member.offset_data : member.offset_data + member.size]
            files[member.name] = (hashlib.sha256(data).hexdigest(), _file_mode(member))
    found: set[str] = set()
    for current, subdirectories, names in os.walk(directory):
        relative = Path(current).relative_to(directory).as_posix()
        info = os.lstat(current)
        if relative not in directories:
            return f"{relative!r} is a directory the bundle does not have"
        if stat.S_IMODE(info.st_mode) != DIRECTORY_MODE:
            return f"{relative!r} has mode 0{stat.S_IMODE(info.st_mode):o}, not 0{DIRECTORY_MODE:o}"
        for name in names + [d for d in subdirectories if os.path.islink(os.path.join(current, d))]:
            entry = name if relative == "." else f"{relative}/{name}"
            problem = _file_problem(Path(current) / name, entry, files.get(entry))
            if problem is not None:
                return problem
            found.add(entry)
    missing = sorted(set(files) - found)
    return f"{missing[0]!r} is missing" if missing else None


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a tree with read-only directories, a file or nothing at all)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    if not path.is_dir():
        return
    for current, _, _ in os.walk(path):
        os.chmod(current, 0o700, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)


def _file_problem(path: Path, name: str, expected: tuple[str, int] | None) -> str | None:
    info = os.lstat(path)
    if expected is None:
        return f"{name!r} is not in the bundle"
    if not stat.S_ISREG(info.st_mode):
        return f"{name!r} is not a regular file"
    if stat.S_IMODE(info.st_mode) != expected[1]:
        return f"{name!r} has mode 0{stat.S_IMODE(info.st_mode):o}, not 0{expected[1]:o}"
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1024 * 1024), b""):
            digest.update(block)
    return None if digest.hexdigest() == expected[0] else f"{name!r} was changed"


def _directory(path: Path, made: set[Path]) -> None:
    if path not in made:
        path.mkdir(mode=0o700)
        made.add(path)


def _file_mode(member: tarfile.TarInfo) -> int:
    return EXECUTABLE_MODE if member.mode & 0o100 else FILE_MODE
