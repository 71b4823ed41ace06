"""What each installed command accepts, read from the code itself: the commands of pyproject's
``[project.scripts]``, the options and environment variables of their Typer apps
(``typer.main.get_command``), and the ``SCHEDD_*`` variables their modules read directly
(``os.environ``: authentication, TLS, the bootstrap token), found as string constants in every
project module the command imports.

Not a second list of settings: a new option or variable appears here by itself, and one removed
from a service makes the deployment files that still set it fail ``tests/deploy``.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
import typer.main

ROOT = Path(__file__).resolve().parents[2]
#: Variables read by libraries rather than by schedd's code: OpenTelemetry's SDK reads OTEL_*,
#: the PostgreSQL driver PGPASSWORD (the deployments keep the password out of the URL).
LIBRARY_PREFIXES = ("OTEL_",)
DATABASE_DRIVER_VARIABLES = frozenset({"PGPASSWORD"})

_SETTING = re.compile(r"^SCHEDD_[A-Z0-9_]*[A-Z0-9]$")


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    envvar: str
    default: object

    @property
    def listens(self) -> bool:
        """A ``host:port`` this program listens on (``--listen``, ``--metrics-listen``)."""
        return any(flag.endswith("listen") for flag in self.flags)

    @property
    def serves_grpc(self) -> bool:
        return self.listens and not any("metrics" in flag for flag in self.flags)


@dataclass(frozen=True)
class Command:
    """One command of a program: its options and the subcommands under it."""

    options: tuple[Option, ...]
    subcommands: dict[str, Command]

    def flags(self) -> set[str]:
        return {flag for option in self.options for flag in option.flags}


@dataclass(frozen=True)
class Surface:
    script: str
    command: Command
    #: every environment variable the program reads (its options' and the ones read directly)
    envvars: frozenset[str]

    def accepts_env(self, name: str) -> bool:
        if name in self.envvars or name.startswith(LIBRARY_PREFIXES):
            return True
        return name in DATABASE_DRIVER_VARIABLES and "SCHEDD_DATABASE_URL" in self.envvars

    def option_for_env(self, name: str) -> Option | None:
        return next((o for o in self.command.options if o.envvar == name), None)

    def default(self, envvar: str) -> object:
        option = self.option_for_env(envvar)
        return None if option is None else option.default


@functools.cache
def scripts() -> dict[str, str]:
    """``[project.scripts]``: command name to ``module:function``."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return dict(tomllib.load(f)["project"]["scripts"])


def image_scripts() -> set[str]:
    """The commands of the image: every one of schedd's (the development stack's are devtools')."""
    return set(scripts())


def _click_command(module_name: str) -> Any:
    module = importlib.import_module(module_name)
    app = getattr(module, "app", None)
    if isinstance(app, typer.Typer):
        return typer.main.get_command(app)
    cli = getattr(module, "cli", None)
    if callable(cli):
        wrapper = typer.Typer()
        wrapper.command()(cli)
        return typer.main.get_command(wrapper)
    return None


def _command(command: Any) -> Command:
    """Typer's click command (Typer keeps its own copy of click: read by duck typing)."""
    options = tuple(
        Option(
            flags=tuple(param.opts),
            envvar=param.envvar if isinstance(param.envvar, str) else "",
            default=param.default,
        )
        for param in command.params
        if param.param_type_name == "option"
    )
    commands = getattr(command, "commands", None) or {}
    subcommands = {name: _command(sub) for name, sub in commands.items()}
    return Command(options, subcommands)


def _envvars(command: Command) -> set[str]:
    found = {option.envvar for option in command.options if option.envvar}
    for sub in command.subcommands.values():
        found |= _envvars(sub)
    return found


_IMPORTED_FILES = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps([getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]))
"""


def _project_files(module_name: str) -> list[Path]:
    """The project's own source files that importing ``module_name`` loads (in a fresh interpreter,
    so that what this test process imported does not count)."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTED_FILES, module_name],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    ).stdout
    generated = ROOT / "libs" / "schedd" / "v1"
    files = []
    for name in json.loads(out):
        path = Path(name).resolve() if name else None
        if path is None or path.suffix != ".py" or generated in path.parents:
            continue
        if (ROOT / "libs") in path.parents or (ROOT / "services") in path.parents:
            files.append(path)
    return files


def settings_read_directly(files: Iterable[Path]) -> set[str]:
    """Every ``SCHEDD_*`` name written as a string constant in ``files``."""
    found = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SETTING.match(node.value):
                found.add(node.value)
    return found


@functools.cache
def surface(script: str) -> Surface:
    """What ``script`` (a name of ``[project.scripts]``) accepts; KeyError for another name."""
    module_name = scripts()[script].partition(":")[0]
    click_command = _click_command(module_name)
    command = _command(click_command) if click_command is not None else Command((), {})
    direct = settings_read_directly(_project_files(module_name))
    return Surface(script, command, frozenset(_envvars(command) | direct))
