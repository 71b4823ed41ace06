"""Which bundle ``schedctl dags register`` packs, the module names its Python DAG files get, and the
targets it refuses because workers could not import them from the bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedctl import bundles
from schedctl.specfile import load_specs
from schedd.v1 import resources_pb2 as pb
from schedd_core.bundle_archive import BundleError


def _register(path: Path, explicit: Path | None = None) -> list[pb.DagSpec]:
    directory = bundles.bundle_directory(path, explicit)
    specs = load_specs(path, bundles.loading_root(directory))
    if directory is not None:
        bundles.attach(specs, directory)
    return specs


def test_a_python_dag_file_is_named_from_its_bundle(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "bundled_work.py").write_text("def step():\n    return 1\n")
    (project / "flow.py").write_text(
        "import bundled_work\nfrom schedd_sdk import dag, task\n\n"
        "step = task(task_id='s')(bundled_work.step)\n\n\n"
        "@dag(dag_id='flow')\ndef flow():\n    step()\n"
    )
    [spec] = _register(project / "flow.py")
    assert spec.tasks[0].python.target == "bundled_work:step"
    assert len(spec.code_bundle) == 64
    (project / "bundled_work.py").write_text("def step():\n    return 2\n")
    [changed] = _register(project / "flow.py")
    assert changed.code_bundle != spec.code_bundle


def test_specs_without_python_tasks_get_no_bundle(tmp_path: Path) -> None:
    (tmp_path / "shell.yaml").write_text("dag_id: sh\ntasks:\n  - task_id: t\n    shell: {command: 'true'}\n")
    (tmp_path / "mod.py").write_text("X = 1\n")
    [alone] = _register(tmp_path / "shell.yaml")
    [explicit] = _register(tmp_path / "shell.yaml", tmp_path)
    assert alone.code_bundle == explicit.code_bundle == ""


def test_a_module_of_the_bundles_package_missing_from_it_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "present.py").write_text("def f():\n    pass\n")
    spec = tmp_path / "dag.yaml"
    spec.write_text(
        "dag_id: d\ntasks:\n  - task_id: ok\n    python: {target: 'pkg.present:f'}\n"
        "  - task_id: gone\n    python: {target: 'pkg.absent:f'}\n"
    )
    with pytest.raises(BundleError, match=r"task 'gone' of DAG 'd' names 'pkg\.absent:f'"):
        _register(spec, tmp_path / "pkg")
    spec.write_text("dag_id: d\ntasks:\n  - task_id: ok\n    python: {target: 'pkg.present:f'}\n")
    [fine] = _register(spec, tmp_path / "pkg")
    assert fine.code_bundle


def test_a_bundle_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "dag.yaml").write_text("dag_id: d\ntasks: []\n")
    with pytest.raises(BundleError, match="is not a directory"):
        bundles.bundle_directory(tmp_path / "dag.yaml", tmp_path / "missing")


def test_a_bundle_module_imported_under_another_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # src/ is the bundle but not a package: workers import its module as `src_named_work`, never
    # `src.src_named_work`, which the DAG file could import only because schedctl ran in the project.
    project = tmp_path / "project_src"
    (project / "src").mkdir(parents=True)
    (project / "src" / "src_named_work.py").write_text("def count():\n    return 1\n")
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    (project / "flow_src.py").write_text(
        "from src.src_named_work import count\nfrom schedd_sdk import dag, task\n\n"
        "counting = task(task_id='count')(count)\n\n\n"
        "@dag(dag_id='flow_src')\ndef flow_src():\n    counting()\n"
    )
    with pytest.raises(BundleError, match=r"'src\.src_named_work:count'.*as 'src_named_work'"):
        _register(project / "flow_src.py", project / "src")
