"""The ``schedctl`` commands a document shows, and running them in a shell as a reader would.

A command is a line of a fenced code block that starts with ``schedctl ``, lines ending in ``\\``
joined to the next. A trailing comment ``# exits N: why`` says the command is expected to exit
``N``; every other command is expected to exit 0. An indented line right after a command (a
continuation without ``\\``) is refused: it would be an option list no shell runs as written.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

__all__ = ["Command", "Substitution", "commands_in", "run", "substitute"]

_FENCE = re.compile(r"^\s*```")
_EXPECTED_EXIT = re.compile(r"\s#\s*exits (\d+)\b")


@dataclass(frozen=True)
class Command:
    """One documented command: where it is, its text as written, the exit code it should have."""

    where: str
    text: str
    expected_exit: int = 0


@dataclass(frozen=True)
class Substitution:
    """A placeholder of the docs (the named group ``p`` of ``pattern``) and how to fill it in."""

    pattern: str
    value: Callable[[], str]


def commands_in(path: Path, name: str) -> list[Command]:
    """Every ``schedctl`` command of the fenced code blocks of ``path``, in document order."""
    commands: list[Command] = []
    in_block = False
    pending = ""
    previous_was_command = False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if _FENCE.match(line):
            in_block, pending, previous_was_command = not in_block, "", False
            continue
        if not in_block:
            continue
        if pending:
            line = pending + line.lstrip()
        elif line.startswith((" ", "\t")) and line.strip() and previous_was_command:
            raise ValueError(f"{name}:{number}: a continuation of the command above: {line.strip()!r}")
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        previous_was_command = line.startswith("schedctl ")
        if previous_was_command:
            expected = _EXPECTED_EXIT.search(line)
            commands.append(Command(f"{name}:{number}", line, int(expected.group(1)) if expected else 0))
    return commands


def substitute(text: str, substitutions: list[Substitution]) -> str:
    """``text`` with every placeholder it holds replaced by its value, asked for only when present."""
    for substitution in substitutions:
        if re.search(substitution.pattern, text) is not None:
            text = re.sub(substitution.pattern, partial(_fill, substitution.value()), text)
    return text


def _fill(value: str, found: re.Match[str]) -> str:
    """The text ``found`` matched, with its group ``p`` replaced by ``value``."""
    start, end = found.start("p") - found.start(), found.end("p") - found.start()
    return found.group(0)[:start] + value + found.group(0)[end:]


def run(
    command: Command, text: str, *, cwd: Path, env: Mapping[str, str], prelude: str = "", timeout: float
) -> str:
    """Run ``text`` (``command`` with its placeholders filled in) with bash, after ``prelude``; the
    test fails, naming the command and showing its output, when its exit code is not the one
    expected or it does not end within ``timeout`` seconds. Returns a line saying how long it took."""
    script = f"set -e\n{prelude}\n{text}\n" if prelude else text
    began = time.monotonic()
    try:
        done = subprocess.run(
            ["bash", "-c", script], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{command.where}: {command.text}\nran as: {text}\ndid not end within {timeout:g}s\n"
            f"--- stdout\n{_text(exc.stdout)}--- stderr\n{_text(exc.stderr)}",
            pytrace=False,
        )
    if done.returncode != command.expected_exit:
        pytest.fail(
            f"{command.where}: {command.text}\nran as: {text}\n"
            f"exit {done.returncode}, expected {command.expected_exit}\n"
            f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}",
            pytrace=False,
        )
    return f"{command.where}: exit {done.returncode} in {time.monotonic() - began:.1f}s: {text}"


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""
