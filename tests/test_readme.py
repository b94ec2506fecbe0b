"""Every example in the README runs as written, in order, in a fresh directory.

The fenced blocks are run top to bottom: ``sh`` blocks line by line through the
shell (with this interpreter's ``monet-ilp`` first on the PATH), ``python`` blocks
with this interpreter, and a ``json NAME`` block is written to the file NAME.  Only
the time spent is cut: ``--time-limit`` to :data:`SECONDS`, ``--generations`` and
``--points`` to small counts.  A line must exit 0, or 1 where its comment says
``exits 1``.  The set-up commands (``pip install``, ``monet-ilp demo``, pytest) are
indented blocks, not fenced ones: the demo has its own test in ``test_cli.py``.

The whole walk-through takes minutes, so it is in the ``slow`` tier (one xdist worker
runs its steps, in order); the default run runs :data:`FIRST_STEPS`, a short path
through it (build, show, make, baseline, evaluate, a heuristic solve, the Python API,
the backends table), in one fresh directory.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

#: The caps on what costs time; every other option runs as the README writes it.
SECONDS = 3
CAPS = {"--time-limit": SECONDS, "--search-time": SECONDS, "--generations": 3, "--population": 8, "--points": 3}

FENCE = re.compile(r"^```(\w+)[ \t]*(\S*)[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def readme_steps() -> list[tuple[str, str, str]]:
    """``(kind, text, file name)`` for every runnable step, in README order."""
    steps = []
    for kind, name, body in FENCE.findall(README.read_text()):
        if kind == "sh":
            steps += [("sh", line.strip(), "") for line in body.splitlines() if line.strip()]
        elif kind == "python":
            steps.append(("python", body, ""))
        elif kind == "json" and name:
            steps.append(("json", body, name))
    return steps


def capped(command: str) -> str:
    """``command`` with the time-consuming options cut to :data:`CAPS`."""

    def cut(match: re.Match) -> str:
        option, value = match.group(1), float(match.group(2))
        cap = CAPS[option]
        return f"{option} {min(value, cap):g}"

    return re.sub(r"(" + "|".join(map(re.escape, CAPS)) + r")\s+([0-9.]+)", cut, command)


STEPS = readme_steps()

#: The README steps the default run takes, in README order: a command as written (its
#: comment apart), or a line of a Python block; each names exactly one step
#: (``test_the_first_steps_are_in_the_readme`` says which no longer does).
FIRST_STEPS = (
    "monet-ilp graph build resnet18 -p batch=1 --out g.json",
    "monet-ilp graph show g.json",
    "monet-ilp instance make --model resnet18 -p batch=1 --hw edge_tpu --budget 0.9 --objective latency --out inst.json",
    "monet-ilp baseline inst.json --heuristic greedy --out sched.json",
    "monet-ilp evaluate inst.json sched.json",
    "monet-ilp solve inst.json --backend heuristic:greedy",
    'instance = monet_ilp.Instance.load("inst.json")',
    "monet-ilp backends",
)


def named(step: tuple[str, str, str], line: str) -> bool:
    """Whether ``line`` (one of :data:`FIRST_STEPS`) names ``step``."""
    kind, text, _ = step
    if kind == "sh":
        return text.split("#")[0].strip() == line
    return kind == "python" and any(row.split("#")[0].strip() == line for row in text.splitlines())


def first_steps() -> list[int]:
    """The indices in :data:`STEPS` of :data:`FIRST_STEPS`, in README order."""
    return [k for k, step in enumerate(STEPS) if any(named(step, line) for line in FIRST_STEPS)]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """An empty directory with the repository's instance sets, as a checkout has them.

    Session-scoped: under xdist the worker that runs the walk-through's group also runs
    other modules' tests between its steps, and a module-scoped directory would be made
    anew (empty) after each of them."""
    where = tmp_path_factory.mktemp("readme")
    (where / "instances").symlink_to(ROOT / "instances")
    return where


def test_the_readme_has_examples_of_every_kind():
    kinds = {kind for kind, _, _ in STEPS}
    assert kinds == {"sh", "python", "json"}
    commands = " ".join(text for kind, text, _ in STEPS if kind == "sh")
    for sub in ("graph build", "graph import", "hw validate", "instance make", "baseline", "evaluate",
                "solve", "min-budget", "bound", "pareto", "plot gantt", "plot pareto", "grade", "ga",
                "batch run", "batch summary", "batch plot", "backends"):
        assert f"monet-ilp {sub}" in commands, sub


def test_the_first_steps_are_in_the_readme():
    for line in FIRST_STEPS:
        assert sum(named(step, line) for step in STEPS) == 1, line


def test_the_first_steps_run_in_order(tmp_path):
    """The default run's path through the walk-through (the module docstring)."""
    steps = first_steps()
    assert len(steps) == len(FIRST_STEPS)
    (tmp_path / "instances").symlink_to(ROOT / "instances")
    for step in steps:
        run_step(tmp_path, step)


@pytest.mark.slow
def test_readme_walk_through(workdir):
    """Every step, top to bottom, in one test: the steps read each other's files, so they
    run on one xdist worker, in order (an xdist_group of parametrized steps was spread over
    both workers in CI)."""
    for step in range(len(STEPS)):
        run_step(workdir, step)


def run_step(workdir: Path, step: int) -> None:
    """Run README step ``step`` in ``workdir`` (module docstring); it must exit as it says."""
    kind, text, name = STEPS[step]
    if kind == "json":
        (workdir / name).write_text(text)
        return
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if kind == "python":
        if "import torch" in text and importlib.util.find_spec("torch") is None:
            pytest.skip("this README step needs the optional torch extra")
        done = subprocess.run([sys.executable, "-c", text], cwd=workdir, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        return
    command = capped(text)
    done = subprocess.run(command, shell=True, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    expected = 1 if "exits 1" in text else 0
    output = done.stdout + done.stderr
    assert done.returncode == expected, f"{command}\n{output}"
    assert "Traceback" not in output and "Warning" not in output, f"{command}\n{output}"
