"""The DAG the README's schedule examples name ships in examples/, as the README shows it."""

from __future__ import annotations

import re
from pathlib import Path

from schedctl.specfile import load_spec
from schedd_core.spec import validate_spec

REPO = Path(__file__).resolve().parents[2]
NIGHTLY = REPO / "examples" / "nightly.yaml"


def test_the_readmes_nightly_dag_is_examples_nightly_yaml() -> None:
    blocks = re.findall(r"^```yaml\n(.*?)^```\n", (REPO / "README.md").read_text(), re.S | re.M)
    shown = [block for block in blocks if block.startswith("dag_id: nightly\n")]
    assert len(shown) == 1, "the README shows the nightly DAG once, as a yaml block"
    assert NIGHTLY.read_text() == shown[0]


def test_examples_nightly_yaml_is_a_valid_spec() -> None:
    spec = load_spec(NIGHTLY)
    validate_spec(spec)
    assert (spec.dag_id, spec.catchup, [t.task_id for t in spec.tasks]) == ("nightly", True, ["load"])
