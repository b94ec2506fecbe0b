"""The command line's conventions: exit statuses, budgets, limits, sources and instance fingerprints."""

from __future__ import annotations

import json

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.make import make_instance, parse_budget
from monet_ilp.solve import Status, solve
from tests.cli.test_cli import assert_user_error, run


@pytest.fixture(scope="module")
def instances(tmp_path_factory):
    """Two budgets of one small P1 instance, and an instance of another graph."""
    where = tmp_path_factory.mktemp("conventions")
    paths = {}
    for name, depth, budget in (("roomy", 3, "0.95"), ("tight", 3, "0.5"), ("other", 4, "0.95")):
        paths[name] = where / f"{name}.json"
        made = run("instance", "make", "--model", "mlp", "-p", f"depth={depth}", "-p", "batch=8",
                   "--budget", budget, "--out", str(paths[name]))
        assert made.returncode == 0, made.stderr
    paths["dir"] = where
    return paths


@pytest.mark.parametrize("args", [("--time-limit", "-5"), ("--time-limit", "0"), ("--workers", "0")])
def test_limits_that_no_run_can_honour_exit_2(instances, args):
    result = run("solve", str(instances["roomy"]), *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert args[0] in result.stderr


def test_the_python_api_rejects_them_too():
    inst = make_instance(zoo.mlp(depth=2, batch=4), None, budget=0.9)
    for kwargs in ({"time_limit": 0}, {"time_limit": -1.0}, {"workers": 0}):
        with pytest.raises(MonetError):
            solve(inst, "heuristic:store_all", **kwargs)


def test_exit_status_1_for_a_negative_answer(instances):
    tight, d = str(instances["tight"]), instances["dir"]
    baseline = run("baseline", tight, "--out", str(d / "sa.json"))
    assert baseline.returncode == 1 and "INFEASIBLE" in baseline.stdout
    evaluated = run("evaluate", tight, str(d / "sa.json"))
    assert evaluated.returncode == 1
    solved = run("solve", tight, "--backend", "heuristic:store_all", "--json", str(d / "r.json"))
    assert solved.returncode == 1
    record = json.loads((d / "r.json").read_text())
    # A heuristic's schedule over budget is infeasible with its violation, not a backend error.
    assert record["status"] == "infeasible" and "capacity" in record["message"]
    assert record["source"] == "heuristic:store_all"


def test_exit_status_0_and_the_schedule_says_where_it_came_from(instances):
    roomy, d = str(instances["roomy"]), instances["dir"]
    solved = run("solve", roomy, "--time-limit", "10", "--out", str(d / "s.json"), "--json", str(d / "s_r.json"))
    assert solved.returncode == 0, solved.stderr
    assert "schedule from" in solved.stdout
    record = json.loads((d / "s_r.json").read_text())
    meta = json.loads((d / "s.json").read_text())["meta"]
    # auto, the default: store-all fits here, so its feasible-first heuristic has the optimum.
    assert record["backend"] == "auto" and record["status"] == "optimal"
    assert record["source"] == meta["source"] and record["source"].startswith("heuristic:")
    assert len(meta["instance"]) == 16
    assert run("evaluate", roomy, str(d / "s.json")).returncode == 0


def test_a_schedule_for_another_instance_is_refused(instances):
    roomy, other, d = str(instances["roomy"]), str(instances["other"]), instances["dir"]
    if not (d / "s.json").exists():
        assert run("solve", roomy, "--time-limit", "10", "--out", str(d / "s.json")).returncode == 0
    for command in (("evaluate", other, str(d / "s.json")),
                    ("grade", str(d / "s.json"), "--instance", other),
                    ("plot", "gantt", str(d / "s.json"), "--instance", other, "-o", str(d / "g.png")),
                    ("solve", other, "--hint", str(d / "s.json"))):
        assert_user_error(run(*command), "made for another instance", "meta.instance")
    # The same graph and hardware under another budget is the same instance to a schedule:
    # the evaluator answers (here: it no longer fits), exit 1 rather than 2.
    assert run("evaluate", str(instances["tight"]), str(d / "s.json")).returncode == 1


@pytest.mark.parametrize("text, value", [("0.8", 0.8), ("80%", 0.8), ("1.5x", 1.5), ("1x", 1.0),
                                         ("2MiB", 2 * 2**20), ("4096B", 4096), ("300000", 300000),
                                         ("1.0", 1.0)])
def test_budget_spellings(text, value):
    assert parse_budget(text) == value


@pytest.mark.parametrize("text", ["2", "2.0", "1.5", "0", "-1", "0x", "abc", "0B", "150%"])
def test_ambiguous_or_impossible_budgets_are_refused(text):
    with pytest.raises(MonetError) as err:
        parse_budget(text)
    assert "1.5x" in err.value.message and "2MiB" in err.value.message


def test_budgets_on_the_command_line(tmp_path):
    out = str(tmp_path / "i.json")
    assert_user_error(run("instance", "make", "--model", "mlp", "--budget", "2", "--out", out),
                      "--budget", "ambiguous")
    assert_user_error(run("instance", "make", "--model", "mlp", "--budget", "2.0", "--out", out),
                      "--budget", "(0, 1]")
    roomy = run("instance", "make", "--model", "mlp", "--budget", "1.5x", "--out", out)
    assert roomy.returncode == 0 and "does not bind" in roomy.stderr


def test_a_p3_budget_that_no_op_fits_is_said_at_once(tmp_path):
    made = run("instance", "make", "--model", "resnet18", "--hw", "edge_tpu", "--problem", "P3",
               "--sram-budget", "1MiB", "--out", str(tmp_path / "p3.json"))
    assert made.returncode == 0, made.stderr
    assert "no schedule exists" in made.stderr and "batch=1" in made.stderr
    assert "32x3x32x32" in made.stdout  # the batch the model was built with is shown


def test_status_from_solve_for_a_heuristic_miss():
    inst = make_instance(zoo.mlp(depth=3, batch=8), None, budget=0.5)
    result = solve(inst, "heuristic:store_all")
    assert result.status is Status.INFEASIBLE and result.gap is None
    assert result.source == "heuristic:store_all" and result.schedule.meta["instance"] == inst.fingerprint


def test_searches_without_a_feasible_point_exit_1(tmp_path):
    p3 = str(tmp_path / "p3.json")
    made = run("instance", "make", "--model", "mlp", "-p", "depth=2", "-p", "batch=64", "--hw", "edge_tpu",
               "--set", "n_pe_x=2", "--set", "n_pe_y=1", "--problem", "P3", "--sram-budget", "4KiB", "--out", p3)
    assert made.returncode == 0 and "no schedule exists" in made.stderr
    ga = run("ga", p3, "--generations", "1", "--population", "4", "--out", str(tmp_path / "ga.json"))
    assert ga.returncode == 1 and "INFEASIBLE" in ga.stdout
    swept = run("pareto", p3, "--points", "2", "--time-limit", "2", "--out", str(tmp_path / "front.json"))
    assert swept.returncode == 1 and "Traceback" not in swept.stderr
    assert "latency optimum: infeasible" in swept.stdout
    assert json.loads((tmp_path / "front.json").read_text())["points"] == []
    assert run("bound", p3, "--no-solver").returncode == 1


def test_the_fingerprint_ignores_names_budgets_and_objectives_but_not_the_graph():
    import dataclasses

    graph = zoo.mlp(depth=2, batch=4)
    inst = make_instance(graph, None, budget=0.9)
    renamed = make_instance(dataclasses.replace(graph, name="copy_of_mlp", meta={"source": "elsewhere"}),
                            None, budget=0.5, objective="compute", name="another name")
    assert renamed.fingerprint == inst.fingerprint
    other = make_instance(zoo.mlp(depth=3, batch=4), None, budget=0.9)
    assert other.fingerprint != inst.fingerprint


def test_min_budget_refuses_nan_seconds(instances):
    result = run("min-budget", str(instances["roomy"]), "--time-limit", "nan")
    assert result.returncode == 2 and "Traceback" not in result.stderr
