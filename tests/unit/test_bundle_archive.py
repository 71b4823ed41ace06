"""Packing a code bundle: deterministic archives, what is skipped, limits; checking archives and
unpacking them read-only."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from schedd_core import bundle_archive, limits
from schedd_core.bundle_archive import BundleTooLarge, check_archive
from schedd_core.errors import InvalidArgument
from schedd_exec import bundle_pack
from schedd_exec.bundle_pack import import_root, pack
from schedd_exec.bundle_unpack import remove_tree, tree_problem, unpack


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "tasks.py").write_text("VERSION = 1\n")
    (root / "pkg" / "data.json").write_text("{}")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "tasks.cpython-311.pyc").write_bytes(b"\0")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")
    (root / ".env").write_text("SECRET=1")
    (root / "link.py").symlink_to(root / "pkg" / "tasks.py")
    return root


def test_packing_is_deterministic(tmp_path: Path) -> None:
    first = pack(_tree(tmp_path / "a"))
    second_dir = _tree(tmp_path / "b")
    for path in second_dir.rglob("*"):
        if not path.is_symlink():
            os.utime(path, (1_000_000, 1_000_000))
    second = pack(second_dir)
    assert first.archive == second.archive
    assert first.sha256 == second.sha256 == bundle_archive.archive_sha256(first.archive)
    (second_dir / "pkg" / "tasks.py").write_text("VERSION = 2\n")
    assert pack(second_dir).sha256 != first.sha256


def test_what_a_bundle_holds(tmp_path: Path) -> None:
    packed = pack(_tree(tmp_path / "b"))
    assert packed.names == ("pkg/__init__.py", "pkg/data.json", "pkg/tasks.py", "run.sh")
    with tarfile.open(fileobj=io.BytesIO(packed.archive)) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
        assert {m.mtime for m in tar.getmembers()} == {0}
    assert modes["run.sh"] == 0o755 and modes["pkg/tasks.py"] == 0o644


def test_a_package_bundle_keeps_its_package_path(tmp_path: Path) -> None:
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    (tmp_path / "outer" / "__init__.py").write_text("")
    (tmp_path / "outer" / "inner" / "__init__.py").write_text("")
    (tmp_path / "outer" / "inner" / "mod.py").write_text("X = 1\n")
    (tmp_path / "outer" / "other.py").write_text("not packed")
    packed = pack(tmp_path / "outer" / "inner")
    assert import_root(tmp_path / "outer" / "inner") == tmp_path.resolve()
    assert packed.names == ("outer/__init__.py", "outer/inner/__init__.py", "outer/inner/mod.py")


def test_an_oversized_bundle_is_refused_naming_its_largest_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle_pack, "MAX_ARCHIVE_BYTES", 64 * 1024)
    (tmp_path / "small.py").write_text("x = 1\n")
    (tmp_path / "big.bin").write_bytes(os.urandom(80 * 1024))
    with pytest.raises(BundleTooLarge, match=r"at most 65536 bytes.*big\.bin \(81920 bytes\)"):
        pack(tmp_path)


def test_unpack_round_trips(tmp_path: Path) -> None:
    packed = pack(_tree(tmp_path / "b"))
    size = unpack(packed.archive, tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "tasks.py").read_text() == "VERSION = 1\n"
    assert size == sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert stat.S_IMODE((tmp_path / "out" / "run.sh").stat().st_mode) == 0o555  # executable kept
    assert tree_problem(tmp_path / "out", packed.archive) is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda out: (out / "pkg" / "tasks.py").write_text("VERSION = 2\n"), "'pkg/tasks.py' was changed"),
        (lambda out: (out / "pkg" / "extra.py").write_text(""), "'pkg/extra.py' is not in the bundle"),
        (lambda out: (out / "pkg" / "data.json").unlink(), "'pkg/data.json' is missing"),
        (lambda out: (out / "pkg" / "__pycache__").mkdir(), "'pkg/__pycache__' is a directory"),
        (lambda out: (out / "pkg" / "tasks.py").chmod(0o644), "'pkg/tasks.py' has mode 0644, not 0444"),
        (
            lambda out: (
                (out / "pkg" / "data.json").unlink()
                or (out / "pkg" / "data.json").symlink_to("/etc/hostname")
            ),
            "'pkg/data.json' is not a regular file",
        ),
    ],
)
def test_a_changed_tree_no_longer_matches_its_archive(
    tmp_path: Path, change: Callable[[Path], object], problem: str
) -> None:
    packed = pack(_tree(tmp_path / "b"))
    out = tmp_path / "out"
    unpack(packed.archive, out)
    (out / "pkg").chmod(0o755)
    change(out)
    (out / "pkg").chmod(0o555)
    assert problem in (tree_problem(out, packed.archive) or "")
    remove_tree(out)
    assert not out.exists()


def _tar(*entries: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in entries:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


@pytest.mark.parametrize(
    ("archive", "problem"),
    [
        (b"", "is empty"),
        (b"not a tar" * 100, "is not a tar archive"),
        (_tar(_entry("../escape.py")), "not a normalised relative path"),
        (_tar(_entry("/abs.py")), "not a normalised relative path"),
        (_tar(_entry("a//b.py")), "not a normalised relative path"),
        (_tar(_entry("link.py", tarfile.SYMTYPE)), "is a symbolic link"),
        (_tar(_entry("a.py"), _entry("a.py/b.py")), "is inside 'a.py', which is a file"),
        (_tar(_entry("a.py"), _entry("a.py")), "appears twice"),
    ],
)
def test_check_archive_refuses_what_pack_never_makes(archive: bytes, problem: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=problem) as caught:
        check_archive(archive)
    assert caught.value.field == "archive"
    with pytest.raises(InvalidArgument):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_check_archive_refuses_an_oversized_archive() -> None:
    with pytest.raises(InvalidArgument, match="a bundle may be at most"):
        check_archive(b"\0" * (limits.MAX_ARCHIVE_BYTES + 1))
