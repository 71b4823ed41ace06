"""The shape of schedd's own code: no module over MAX_MODULE_LINES lines and no function over
MAX_FUNCTION_LINES lines in libs/, services/ and devtools/ (the generated libs/schedd/v1 aside).

A function's length is from its ``def`` line to its last line (decorators aside), docstring and
comments included. Complexity is ruff's (C901, ``make lint``); this test keeps the lengths.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("libs", "services", "devtools")
GENERATED = ROOT / "libs" / "schedd" / "v1"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _modules() -> Iterator[Path]:
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if GENERATED not in path.parents and "build" not in path.relative_to(ROOT).parts:
                yield path


def _function_lengths(source: str, module: str) -> Iterator[tuple[str, int]]:
    """``(module:function, lines)`` of every function and method of ``source``, nested ones too."""
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            yield f"{module}:{node.name}", node.end_lineno - node.lineno + 1


def _all_function_lengths() -> Iterator[tuple[str, int]]:
    for path in _modules():
        yield from _function_lengths(path.read_text(), str(path.relative_to(ROOT)))


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: split them by concern"


def test_no_function_is_longer_than_the_limit() -> None:
    long = {name: n for name, n in _all_function_lengths() if n > MAX_FUNCTION_LINES}
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines: split them"


def test_a_function_is_measured_from_its_def_to_its_last_line() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class C:\n    @staticmethod\n    def f() -> None:\n{body}\n"
    assert dict(_function_lengths(source, "m.py")) == {"m.py:f": MAX_FUNCTION_LINES + 1}
