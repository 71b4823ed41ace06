"""Code bundle archives, as bytes: their limits, their hash, and checking one (no file I/O here).

A bundle's archive is an uncompressed POSIX tar (``schedd_exec.bundle_pack`` makes it from a
directory, ``schedd_exec.bundle_unpack`` writes it out on a worker). The SHA-256 of the archive
(lowercase hex) is the bundle's version.

Guaranteed:

* Limits: an archive is at most :data:`MAX_ARCHIVE_BYTES`.
* :func:`check_archive` accepts only regular files and directories with relative, normalised
  names (no ``..``, no absolute paths, no duplicates, no file used as a directory), whose data lies
  inside the archive, within :class:`ArchiveLimits` (members, unpacked bytes). Symbolic and hard
  links, devices, FIFOs, sparse files, GNU long-name and other special headers, and PAX headers a
  plain tar writer never writes are refused, each with :class:`~schedd_core.errors.InvalidArgument`
  naming the field and the member, so a server answers INVALID_ARGUMENT
  (``tests/security/test_archives.py``). It reads the archive's bytes only: unpacking (file I/O)
  is ``schedd_exec.bundle_unpack``'s, which checks first and unpacks nothing from a bad archive.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import NoReturn

from schedd_core.errors import InvalidArgument, ScheddError
from schedd_core.limits import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_FILES, MAX_UNPACKED_BYTES

#: Header types of plain members: regular files (old and new style) and directories.
_PLAIN_TYPES = frozenset({tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE})
#: Headers a member may start with: its own, or a PAX header of its own (``x``).
_PLAIN_HEADERS = _PLAIN_TYPES | {tarfile.XHDTYPE}
#: PAX keys a plain tar writer (``schedd_exec.bundle_pack``) may write for a plain member.
_PAX_KEYS = frozenset({"path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"})
_HASH = re.compile(r"[0-9a-f]{64}")


class BundleError(ScheddError):
    """A directory cannot be packed as a bundle; the message says which and why."""


class BundleTooLarge(BundleError):
    """A bundle's archive would pass :data:`MAX_ARCHIVE_BYTES` or :data:`MAX_ARCHIVE_FILES`."""


def archive_sha256(archive: bytes) -> str:
    return hashlib.sha256(archive).hexdigest()


def is_sha256(value: str) -> bool:
    return _HASH.fullmatch(value) is not None


def check_sha256(value: str, field: str) -> str:
    """``value`` if it is a SHA-256 in lowercase hex; InvalidArgument naming ``field`` otherwise."""
    if not is_sha256(value):
        raise InvalidArgument(field, f"must be a SHA-256 in lowercase hex (64 characters), not {value!r}")
    return value


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps on what one archive may unpack to; the defaults are also the most a server accepts."""

    #: Most members (files and directories) one archive may hold.
    max_files: int = MAX_ARCHIVE_FILES
    #: Most bytes its regular files may total once unpacked.
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES

    def __post_init__(self) -> None:
        if not 0 < self.max_files <= MAX_ARCHIVE_FILES:
            raise InvalidArgument("SCHEDD_BUNDLE_MAX_FILES", f"must be between 1 and {MAX_ARCHIVE_FILES}")
        if not 0 < self.max_unpacked_bytes <= MAX_UNPACKED_BYTES:
            raise InvalidArgument(
                "SCHEDD_BUNDLE_MAX_UNPACKED_BYTES", f"must be between 1 and {MAX_UNPACKED_BYTES}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ArchiveLimits:
        """``SCHEDD_BUNDLE_MAX_FILES`` and ``SCHEDD_BUNDLE_MAX_UNPACKED_BYTES``: lower than the
        defaults, never higher (workers unpack with the defaults)."""
        values = {}
        for name, field in (
            ("SCHEDD_BUNDLE_MAX_FILES", "max_files"),
            ("SCHEDD_BUNDLE_MAX_UNPACKED_BYTES", "max_unpacked_bytes"),
        ):
            raw = env.get(name, "").strip()
            if raw:
                if not raw.isdigit():
                    raise InvalidArgument(name, f"must be a whole number, not {raw!r}")
                values[field] = int(raw)
        return cls(**values)


#: The default limits, the most any server or worker accepts.
DEFAULT_LIMITS = ArchiveLimits()


def check_archive(
    archive: bytes, field: str = "archive", limits: ArchiveLimits = DEFAULT_LIMITS
) -> list[tarfile.TarInfo]:
    """The members of ``archive`` if it is a bundle archive within ``limits`` (see the module)."""
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise InvalidArgument(field, f"is {len(archive)} bytes; a bundle may be at most {MAX_ARCHIVE_BYTES}")
    if not archive:
        raise InvalidArgument(field, "is empty")
    members: list[tarfile.TarInfo] = []
    names = _Names(field)
    unpacked = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar:  # each checked before the next header is read
                members.append(member)
                if len(members) > limits.max_files:
                    raise InvalidArgument(
                        field,
                        f"entry {member.name!r} is member {len(members)}; a bundle may hold at most "
                        f"{limits.max_files} members",
                    )
                _check_member(archive, member, field)
                names.add(member)
                unpacked += member.size if member.isreg() else 0
                if unpacked > limits.max_unpacked_bytes:
                    raise InvalidArgument(
                        field,
                        f"entry {member.name!r} takes the unpacked bundle past "
                        f"{limits.max_unpacked_bytes} bytes",
                    )
            if tar.pax_headers:
                raise InvalidArgument(field, "has a global extended (PAX) header; bundle archives have none")
    except (tarfile.TarError, EOFError, UnicodeDecodeError) as exc:
        raise InvalidArgument(field, f"is not a tar archive: {exc}") from None
    return members


def _check_member(archive: bytes, member: tarfile.TarInfo, field: str) -> None:
    """InvalidArgument naming ``member`` unless it is a plain regular file or directory."""
    problem = _kind_problem(member)
    if problem is None:
        first, own = archive[member.offset + 156 : member.offset + 157], archive[member.offset_data - 356]
        if first not in _PLAIN_HEADERS or bytes([own]) not in _PLAIN_TYPES:
            problem = f"uses a special header (type {first!r}); bundle archives have plain headers only"
        elif unknown := sorted(set(member.pax_headers) - _PAX_KEYS):
            problem = f"has the extended header {unknown[0]!r}, which bundle archives never have"
        elif member.isreg() and member.offset_data + member.size > len(archive):
            problem = "claims more data than the archive holds"
    if problem is not None:
        raise InvalidArgument(field, f"entry {member.name!r} {problem}")


def _kind_problem(member: tarfile.TarInfo) -> str | None:
    if member.issparse() or member.type == tarfile.GNUTYPE_SPARSE:
        return "is a sparse file"
    if member.issym():
        return "is a symbolic link"
    if member.islnk():
        return "is a hard link"
    if member.ischr() or member.isblk():
        return "is a device"
    if member.isfifo():
        return "is a FIFO"
    if member.type not in _PLAIN_TYPES:
        return f"is a special member (type {member.type!r}); bundles hold files and directories only"
    return None


class _Names:
    """Names seen so far: each normalised, relative and unique, and no file used as a directory."""

    def __init__(self, field: str) -> None:
        self._field = field
        self._files: set[str] = set()
        self._dirs: set[str] = set()
        self._seen: set[str] = set()

    def add(self, member: tarfile.TarInfo) -> None:
        name = member.name
        path = PurePosixPath(name)
        if (
            not path.parts
            or name.startswith("/")
            or ".." in path.parts
            or str(PurePosixPath(*path.parts)) != name
        ):
            self._fail(name, "is not a normalised relative path")
        if name in self._seen:
            self._fail(name, "appears twice")
        parents = {p.as_posix() for p in path.parents if p.as_posix() != "."}
        if clash := sorted(parents & self._files):
            self._fail(name, f"is inside {clash[0]!r}, which is a file")
        if member.isreg() and name in self._dirs:
            self._fail(name, "is a file, but other entries are inside it")
        self._seen.add(name)
        self._dirs |= parents
        (self._files if member.isreg() else self._dirs).add(name)

    def _fail(self, name: str, problem: str) -> NoReturn:
        raise InvalidArgument(self._field, f"entry {name!r} {problem}")
