"""What the docs name exists: repository paths, test ids, python symbols and linked files.

Read from ``README.md`` and ``docs/*.md``:

- every inline code span that is a repository path (``libs/...``, ``services/...``, ``tests/...``,
  ``deploy/...``, ``examples/...``, ``protos/...``, ``docs/...``) names a file or directory that
  exists (a ``*`` is a glob that must match; a span with ``...`` is an elision and is skipped);
  ``path.py::name`` also names a function or class defined in that file;
- every inline code span that is a dotted name in one of schedd's packages (``schedd_core.x.Y``,
  a call's arguments ignored) imports and resolves, attribute by attribute;
- every relative markdown link points at a file that exists (anchors are not checked).

Fenced code blocks are not read: they hold commands and sample output, whose paths may be made by
the commands themselves. Prose outside code spans is not read either.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: schedd's python packages (directories of ``libs/`` and ``services/``); ``schedd`` itself holds only the
#: generated protobuf code, and the docs' ``schedd.v1.X`` are protobuf names, not python ones.
PACKAGES = frozenset(
    p.name
    for base in ("libs", "services")
    for p in (ROOT / base).iterdir()
    if p.is_dir() and p.name != "schedd"
)
#: Files the docs name that a command writes (they are not in the repository).
GENERATED = {"deploy/compose/.env": "deploy/make-secrets.sh writes it"}
#: Files of a user's project that a doc's example names by file name.
USERS_FILES = {"flow.py", "work.py"}

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(?:libs|services|tests|deploy|examples|protos|docs)/[\w./*-]*(?:::\w+)?")
_SYMBOL = re.compile(r"([a-z_][a-z0-9_]*(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?")
_BARE_MODULE = re.compile(r"[\w-]+\.py(?:::\w+)?")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _spans(doc: Path) -> list[str]:
    return _SPAN.findall(_FENCE.sub("", doc.read_text()))


def _references(kind: re.Pattern[str]) -> list[tuple[str, str]]:
    found = set()
    for doc in DOCS:
        for span in _spans(doc):
            match = kind.fullmatch(span.strip())
            if match:
                found.add((doc.relative_to(ROOT).as_posix(), match.group(0)))
    return sorted(found)


PATHS = [(doc, ref) for doc, ref in _references(_PATH) if "..." not in ref and ref not in GENERATED]
SYMBOLS = [
    (doc, ref)
    for doc, ref in _references(_SYMBOL)
    if ref.split(".", 1)[0] in PACKAGES and not ref.split("(", 1)[0].endswith((".py", ".md"))
]


BARE_MODULES = [(doc, ref) for doc, ref in _references(_BARE_MODULE) if ref not in USERS_FILES]


def _defines(source: Path, name: str) -> bool:
    tree = ast.parse(source.read_text())
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name
        for node in ast.walk(tree)
    )


def test_the_docs_name_paths_and_symbols() -> None:
    """The patterns find what the docs name (an empty list would pass every test below)."""
    assert len(PATHS) > 50
    assert len(SYMBOLS) > 30
    assert ("docs/architecture.md", "schedd_core.errors.ScheddError") in SYMBOLS


@pytest.mark.parametrize(("doc", "ref"), PATHS, ids=[f"{d}:{r}" for d, r in PATHS])
def test_every_path_named_exists(doc: str, ref: str) -> None:
    path, _, name = ref.partition("::")
    matches = list(ROOT.glob(path.rstrip("/"))) if "*" in path else [ROOT / path]
    assert matches and all(m.exists() for m in matches), f"{doc} names {path}, which does not exist"
    if name:
        assert _defines(ROOT / path, name), f"{doc} names {ref}, but {path} defines no {name}"


@pytest.mark.parametrize(("doc", "ref"), BARE_MODULES, ids=[f"{d}:{r}" for d, r in BARE_MODULES])
def test_every_module_named_by_file_name_exists(doc: str, ref: str) -> None:
    name, _, function = ref.partition("::")
    files = [f for base in ("libs", "services", "tests", "examples") for f in (ROOT / base).rglob(name)]
    assert files, f"{doc} names {name}, and no file of the repository has that name"
    if function:
        assert any(_defines(f, function) for f in files), f"{doc} names {ref}, which no {name} defines"


@pytest.mark.parametrize(("doc", "ref"), SYMBOLS, ids=[f"{d}:{r}" for d, r in SYMBOLS])
def test_every_symbol_named_resolves(doc: str, ref: str) -> None:
    parts = ref.split("(", 1)[0].split(".")
    module, depth = None, len(parts)
    while module is None and depth > 0:
        try:
            module = importlib.import_module(".".join(parts[:depth]))
        except ModuleNotFoundError as exc:
            if exc.name is None or not ".".join(parts).startswith(exc.name):
                raise
            depth -= 1
    assert module is not None, f"{doc} names {ref}, but no module {parts[0]} can be imported"
    target: object = module
    for i, attribute in enumerate(parts[depth:], start=depth):
        assert hasattr(target, attribute), f"{doc} names {ref}, but {'.'.join(parts[:i])} has no {attribute}"
        target = getattr(target, attribute)
        if i == depth and not hasattr(module, "__path__") and callable(target):
            # A plain module (not a package's public face) is named as where the symbol is defined.
            defined_in = getattr(target, "__module__", module.__name__)
            assert defined_in == module.__name__, f"{doc} names {ref}, which is defined in {defined_in}"


LINKS = sorted(
    {
        (doc.relative_to(ROOT).as_posix(), target.split("#", 1)[0])
        for doc in DOCS
        for target in _LINK.findall(_FENCE.sub("", doc.read_text()))
        if "://" not in target and not target.startswith(("#", "mailto:")) and target.split("#", 1)[0]
    }
)


@pytest.mark.parametrize(("doc", "target"), LINKS, ids=[f"{d}:{t}" for d, t in LINKS])
def test_every_relative_link_points_at_a_file(doc: str, target: str) -> None:
    assert ((ROOT / doc).parent / target).exists(), f"{doc} links to {target}, which does not exist"
