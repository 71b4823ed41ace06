"""The committed protobuf code must be exactly what ``make protos`` generates from ``protos/``."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "libs" / "schedd" / "v1"


def test_generated_protobuf_code_is_fresh(tmp_path: Path) -> None:
    protos = sorted(str(p.relative_to(ROOT / "protos")) for p in (ROOT / "protos").rglob("*.proto"))
    assert protos, "no .proto files found"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(ROOT / "protos"),
            f"--python_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            f"--mypy_out={tmp_path}",
            f"--mypy_grpc_out={tmp_path}",
            *protos,
        ],
        check=True,
        env=env,
        capture_output=True,
        cwd=ROOT,
    )
    fresh = tmp_path / "schedd" / "v1"
    generated = sorted(p.name for p in fresh.iterdir())
    committed = sorted(
        p.name for p in GENERATED.iterdir() if p.name != "__init__.py" and p.suffix in {".py", ".pyi"}
    )
    assert committed == generated, "generated files differ; run `make protos`"
    _match, mismatch, errors = filecmp.cmpfiles(fresh, GENERATED, generated, shallow=False)
    assert not mismatch and not errors, f"stale generated code: {mismatch + errors}; run `make protos`"
