"""The CLI package: commands load by name, ``--help`` loads none, and ``monet-ilp backends`` is the registry."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from monet_ilp.cli import COMMANDS, cli
from monet_ilp.problems import registry
from tests.cli.test_cli import run


def test_help_lists_every_command_without_importing_one():
    probe = ("import json, sys\n"
             "from monet_ilp.cli import main\n"
             "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('monet_ilp.cli.') or m in "
             "('ortools', 'matplotlib', 'pulp', 'highspy', 'onnx', 'monet_ilp.solve'))))")
    done = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    *listing, loaded = done.stdout.strip().splitlines()
    assert json.loads(loaded) == ["monet_ilp.cli.lazy", "monet_ilp.cli.render"]
    for name in COMMANDS:
        assert any(line.split()[:1] == [name] for line in listing), name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_summary_is_the_commands_own(name):
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.name == name
    assert command.help is not None and command.help.split("\n\n")[0] == COMMANDS[name][1]


def test_python_dash_m_is_the_command():
    assert run("--version").returncode == 0
    usage = run("no-such-command")
    assert usage.returncode == 2 and "No such command" in usage.stderr


def test_backends_is_the_registry(tmp_path):
    out = tmp_path / "backends.json"
    done = run("backends", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["backends"]
    assert [(r["backend"], r["problem"]) for r in rows] == [(s.name, s.problem.value) for s in registry.BACKENDS]
    for r in rows:
        assert r["heuristic"] == (r["exact_over"] is None)
        assert r["backend"] in done.stdout
    assert "exact over" in done.stdout and "formulations/p3_cpsat.md" in done.stdout


def test_backends_for_a_class_and_objective(tmp_path):
    out = tmp_path / "p3_energy.json"
    done = run("backends", "--problem", "P3", "--objective", "energy", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["backends"]
    assert {r["backend"] for r in rows if not r["heuristic"]} == {"auto", "cpsat", "lns", "milp"}
    assert all(r["problem"] == "P3" and "energy" in r["objectives"] for r in rows)


def test_an_unknown_option_is_one_error_everywhere(tmp_path, p3_small):
    path = tmp_path / "p3.json"
    p3_small.save(path)
    done = run("solve", str(path), "--encoding", "stages", "--time-limit", "5")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: encoding: ") and "monet-ilp backends" in last
    # The default backend, auto, is cpsat on P3 and takes cpsat's options there.
    assert registry.unknown_option_message("auto", p3_small.problem, ["encoding"]) in last
