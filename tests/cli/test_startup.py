"""What a command imports: the heavy libraries load only where a command needs them.

Each case runs the CLI in a fresh interpreter and lists the heavy modules it left in
``sys.modules``.  Nothing here measures time (``scripts/bench_startup.py`` does).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Libraries that take a noticeable part of a second to import, or that only some
#: commands use (ONNX graphs, the solvers, plots, Dask, the GA).
HEAVY = ("onnx", "ortools", "pulp", "highspy", "matplotlib", "distributed", "dask", "pymoo")
#: What solving an instance file never needs: the instance holds its graph already.
NOT_FOR_SOLVING = ("onnx", "matplotlib", "distributed", "dask", "pymoo")

_PROBE = """\
import json, sys
from monet_ilp.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    status = done.code
else:
    status = 0
print(json.dumps({"status": status, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in %r)}))
"""


def loaded_by(*argv: str) -> tuple[object, list[str]]:
    """The exit status of ``monet-ilp ARGV`` and the heavy top-level modules it imported."""
    done = subprocess.run([sys.executable, "-c", _PROBE % (HEAVY,), *argv], check=False,
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["status"], sorted({m.split(".")[0] for m in report["loaded"]})


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["backends"], ["solve", "--help"]],
                         ids=" ".join)
def test_listing_commands_import_no_heavy_library(argv):
    status, loaded = loaded_by(*argv)
    assert status == 0
    assert loaded == []


@pytest.mark.parametrize("command", ["solve", "bound", "min-budget", "grade", "evaluate"])
def test_a_missing_file_is_reported_before_any_heavy_import(tmp_path, command):
    missing = str(tmp_path / "missing.json")
    argv = ["grade", missing, "--instance", missing] if command == "grade" else [command, missing]
    if command == "evaluate":
        argv.append(missing)
    status, loaded = loaded_by(*argv)
    assert status == 2
    assert loaded == []


def test_import_monet_ilp_alone_is_light():
    probe = (f"import sys, json, monet_ilp\n"
             f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY + ('numpy', 'networkx')!r})))")
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("fixture", ["p1_small", "p3_small"])
def test_solving_an_instance_file_imports_no_graph_or_plot_library(tmp_path, request, fixture):
    path = tmp_path / f"{fixture}.json"
    request.getfixturevalue(fixture).save(path)
    status, loaded = loaded_by("solve", str(path), "--time-limit", "5", "--workers", "1")
    assert status in (0, 1)
    assert not set(loaded) & set(NOT_FOR_SOLVING), loaded
