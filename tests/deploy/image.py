"""Checks of the Dockerfile against the project: the image installs and verifies every command of
``[project.scripts]`` (the development stack's is devtools', not schedd's), runs as a non-root user
under tini, and keeps build tools out of its final stage. Each check returns the problems it found.
"""

from __future__ import annotations

import re

from tests.deploy.cli_surface import image_scripts
from tests.deploy.sources import exec_form

_BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|build-essential|make|clang|python3-dev|libpq-dev)\b")


def check_dockerfile(instructions: list[tuple[str, str]]) -> list[str]:
    problems = []
    stages = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    if len(stages) < 2:
        problems.append("Dockerfile: not a multi-stage build (wheels built in a build stage)")
    final = instructions[stages[-1] :] if stages else instructions
    first_from = instructions[stages[0]][1] if stages else ""
    args = {
        rest.split("=", 1)[0]: rest.split("=", 1)[1] for k, rest in instructions if k == "ARG" and "=" in rest
    }
    base = args.get(first_from.split()[0].strip("${}"), first_from.split()[0]) if first_from else ""
    if not re.match(r"^python:3\.\d+\.\d+-slim-[a-z]+$", base):
        problems.append(f"Dockerfile: base image {base!r} is not a pinned python:X.Y.Z-slim-<release> tag")
    checked: set[str] = set()
    for keyword, rest in final:
        if keyword == "RUN":
            if _BUILD_TOOLS.search(rest):
                problems.append(f"Dockerfile: the final stage installs build tools: {rest[:80]}")
            match = re.search(r"for command in ([^;]+);", rest)
            if match:
                checked |= set(match.group(1).split())
    if checked != image_scripts():
        installed = sorted(image_scripts())
        problems.append(
            f"Dockerfile: verifies the commands {sorted(checked)}, the project installs {installed}"
        )
    users = [rest for keyword, rest in final if keyword == "USER"]
    if not users or users[-1].split(":")[0] in ("0", "root"):
        problems.append("Dockerfile: the final stage does not switch to a non-root user")
    entrypoints = [exec_form(rest) for keyword, rest in final if keyword == "ENTRYPOINT"]
    if not entrypoints or not entrypoints[-1][0].endswith("tini"):
        problems.append("Dockerfile: the entry point is not tini")
    commands = [exec_form(rest) for keyword, rest in final if keyword == "CMD"]
    if not commands or commands[-1][0] not in image_scripts():
        problems.append(f"Dockerfile: CMD {commands[-1] if commands else None} is not a command of the image")
    return problems
