"""A directory only this process's user may use: created private, refused when anyone else could
have put something in it or read it.

:func:`private_directory` makes the directory (and its missing parents) when it does not exist, and
otherwise accepts it only when it is a real directory (not a symbolic link), owned by this process's
effective user, neither readable nor writable by its group or others, and inside parents that nobody
else may write to without the sticky bit (who could otherwise swap it for one of their own). It
then sets the wanted mode: 0700, or 0711 with ``traversable_by_others`` (others may reach a path
inside it they already know, but not list it). A directory another user owns is never changed;
one with read or write bits for others is refused, not repaired, since something may already have
been put in it.

Not checked: the owners of the parents (a parent another user owns, and so could change later, is
accepted as long as its mode is safe now); access control lists and mount options.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeDirectory(Exception):
    """A directory someone other than this process's user could read or change; the message says
    which and why."""


def private_directory(path: Path, *, traversable_by_others: bool = False) -> Path:
    """``path``, made or checked as described in the module docstring; UnsafeDirectory otherwise."""
    mode = 0o711 if traversable_by_others else 0o700
    _check_parents(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        _make(path, mode)
        info = os.lstat(path)
    problem = _problem(info)
    if problem is not None:
        raise UnsafeDirectory(f"{path}: {problem}; give the worker a directory only its user can use")
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode, follow_symlinks=False)  # ours, and only traversal bits differ
    return path


def _problem(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"is owned by uid {info.st_uid}, not by this worker's user (uid {os.geteuid()})"
    mode = stat.S_IMODE(info.st_mode)
    for bit, what in ((0o002, "writable by others"), (0o020, "writable by its group")):
        if mode & bit:
            return f"is {what} (mode 0{mode:o})"
    for bit, what in ((0o004, "readable by others"), (0o040, "readable by its group")):
        if mode & bit:
            return f"is {what} (mode 0{mode:o})"
    return None


def _check_parents(path: Path) -> None:
    for parent in path.absolute().parents:
        try:
            info = os.stat(parent)
        except FileNotFoundError:
            continue
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o022 and not mode & stat.S_ISVTX:
            raise UnsafeDirectory(
                f"{path}: its parent {parent} is writable by others without the sticky bit (mode 0{mode:o}), "
                "so they could replace it; give the worker a directory only its user can use"
            )


def _make(path: Path, mode: int) -> None:
    missing = [p for p in reversed(path.absolute().parents) if not p.exists()]
    for directory in [*missing, path]:
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            continue
        os.chmod(directory, mode)  # the umask may have taken bits away
