"""Comparing two DAG versions as text: their specs as stable JSON (keys sorted, two-space indent) and
the files of their code bundles, each as a unified diff (``difflib``) made of typed lines for the
template to escape and style (``+`` added, ``-`` removed, ``@@`` a hunk, context).

Guaranteed: the same spec always gives the same text; a file whose hash is the same in both is not
diffed (it is counted as unchanged); a file that is not UTF-8 text is said to differ without a
diff; a diff longer than ``MAX_DIFF_LINES`` is cut, saying so. Nothing here makes markup: lines are
plain strings.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from google.protobuf import json_format

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.jsonvalues import integral_numbers

#: Lines of one diff shown at most.
MAX_DIFF_LINES = 3000


@dataclass(frozen=True)
class Line:
    #: ``add``, ``del``, ``hunk``, ``head`` or ``ctx``
    kind: str
    text: str


@dataclass(frozen=True)
class FileDiff:
    path: str
    #: ``added``, ``removed``, ``changed``
    change: str
    lines: tuple[Line, ...]
    #: why there is no diff of the contents, or that it was cut; empty otherwise
    note: str = ""


def spec_text(spec: pb.DagSpec) -> str:
    """The spec as stable JSON text: keys sorted, whole numbers without a fraction."""
    value = integral_numbers(json_format.MessageToDict(spec))
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")


def unified(old: str, new: str, old_name: str, new_name: str) -> tuple[tuple[Line, ...], bool]:
    """The unified diff of two texts as typed lines (empty when equal), and whether it was cut."""
    raw = difflib.unified_diff(
        old.splitlines(), new.splitlines(), fromfile=old_name, tofile=new_name, lineterm="", n=3
    )
    lines: list[Line] = []
    for text in raw:
        if len(lines) == MAX_DIFF_LINES:
            return tuple(lines), True
        lines.append(Line(_kind(text), text))
    return tuple(lines), False


def _text(file: api_pb2.BundleFile | None) -> str | None:
    if file is None:
        return ""
    try:
        return file.content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_diffs(
    old: list[api_pb2.BundleFile], new: list[api_pb2.BundleFile], old_name: str, new_name: str
) -> tuple[list[FileDiff], int]:
    """The diffs of the bundle files that differ between two versions, by path, and how many files
    are the same in both."""
    before, after = {f.path: f for f in old}, {f.path: f for f in new}
    diffs: list[FileDiff] = []
    same = 0
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path), after.get(path)
        if a is not None and b is not None and a.sha256 == b.sha256:
            same += 1
            continue
        change = "added" if a is None else "removed" if b is None else "changed"
        old_text, new_text = _text(a), _text(b)
        if old_text is None or new_text is None:
            diffs.append(FileDiff(path, change, (), "not UTF-8 text: the bytes differ"))
            continue
        lines, cut = unified(old_text, new_text, f"{old_name}/{path}", f"{new_name}/{path}")
        notes = [f"cut at {MAX_DIFF_LINES} lines"] if cut else []
        if (a is not None and a.content_truncated) or (b is not None and b.content_truncated):
            notes.append("the api sent only the start of the file: the diff covers that part")
        diffs.append(FileDiff(path, change, lines, "; ".join(notes)))
    return diffs, same
