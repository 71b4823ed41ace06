"""The Dockerfile builds one image for every service: a build stage makes the wheels, the final
stage installs them without build tools, verifies that every command of [project.scripts] is
installed, and runs as a non-root user under tini. (No image is built here: there is no Docker
engine in CI; these checks read the Dockerfile.)"""

from __future__ import annotations

import tomllib

from tests.deploy import sources
from tests.deploy.cli_surface import ROOT
from tests.deploy.image import check_dockerfile


def test_the_dockerfile_installs_every_command_as_non_root_under_tini() -> None:
    assert check_dockerfile(sources.dockerfile_instructions()) == []


def test_the_build_context_holds_only_what_the_wheel_needs() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    copied = {
        rest.split()[0]
        for keyword, rest in sources.dockerfile_instructions()
        if keyword == "COPY" and "--" not in rest
    }
    admitted = {line.removeprefix("!").rstrip("/") for line in lines if line.startswith("!")}
    assert copied <= admitted, f"the Dockerfile copies {copied - admitted}, which .dockerignore leaves out"


def test_the_development_stack_stays_out_of_the_wheel_and_the_image() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)
    where = project["tool"]["setuptools"]["packages"]["find"]["where"]
    packaged = {path.parent.name for folder in where for path in (ROOT / folder).glob("*/__init__.py")}
    harness = {path.parent.name for path in (ROOT / "devtools").glob("*/__init__.py")}
    assert harness, "devtools/ holds no package"
    assert not packaged & harness, f"schedd's wheel would ship {sorted(packaged & harness)}"
    scripts = project["project"]["scripts"].values()
    modules = {target.partition(":")[0].partition(".")[0] for target in scripts}
    assert not modules & harness, f"schedd's commands run {sorted(modules & harness)}"
    admitted = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    assert not [line for line in admitted if "devtools" in line], "the image's build context admits devtools/"
