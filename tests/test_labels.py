"""Every formulation label carries its document's code, and every cited label exists.

Runs ``scripts/check_labels.py`` on the repository, and on a small tree with the
mistakes it must catch.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_labels.py"


def load():
    spec = importlib.util.spec_from_file_location("check_labels", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_repository_labels_are_prefixed_and_defined():
    report = load().check(ROOT)
    assert report.problems == []
    assert report.defined["EV"].keys() >= {"E1", "E1.3", "E2", "E3", "E4"}
    assert report.defined["P3M"].keys() >= {"M11", "W1", "X8", "S1"}
    assert report.cited_in_code  # the code cites prefixed labels


def test_the_script_prints_a_table_and_exits_0():
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stdout
    assert "p3_milp.md" in run.stdout and "0 problem(s)" in run.stdout


def test_mistakes_are_found(tmp_path):
    formulations = tmp_path / "formulations"
    formulations.mkdir()
    (tmp_path / "monet_ilp").mkdir()
    (formulations / "p2_cpsat.md").write_text(
        "- **P2C.C1 one run.** NoOverlap (EV.E2 `core_overlap`).\n"
        "- **C2 fixed order.** no code\n"
        "| P2C.O1 | latency |\n")
    (formulations / "evaluator.md").write_text("## EV.E2. Checks\n")
    (tmp_path / "monet_ilp" / "model.py").write_text(
        "# P2C.C1, P2C.C1b, P2C.O1-O3, P2C.C1-V1 and EV.E9\n")
    problems = load().check(tmp_path).problems
    assert problems == [
        "p2_cpsat.md:2: C2 is defined without its code (P2C.C2)",
        "monet_ilp/model.py:1: P2C.O3 is not defined in p2_cpsat.md",
        "monet_ilp/model.py:1: P2C.V1 is not defined in p2_cpsat.md",
        "monet_ilp/model.py:1: range P2C.C1-V1 mixes families",
        "monet_ilp/model.py:1: EV.E9 is not defined in evaluator.md",
    ]
