"""The command line, run as a user runs it: a real subprocess, exit codes and output."""

from __future__ import annotations

import json
import subprocess
import sys

import onnx
import pytest

from tests.graph import onnx_builders as ob


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ilp", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, check=False)


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_build_then_show(tmp_path):
    out = tmp_path / "g.json"
    built = run("graph", "build", "mlp", "-p", "depth=2", "-p", "batch=16", "--optimizer", "adam", "--out", str(out))
    assert built.returncode == 0, built.stderr
    shown = run("graph", "show", str(out), "--json", str(tmp_path / "s.json"))
    assert shown.returncode == 0, shown.stderr
    for row in ("ops: forward", "forward MACs", "saved for backward", "weight bytes", "gradient bytes",
                "optimizer-state bytes", "store-all peak"):
        assert row in shown.stdout
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["optimizer_state_bytes"] == 2 * summary["weight_bytes"] > 0


def test_import_onnx_and_node_link(tmp_path):
    onnx.save(ob.residual_block(), tmp_path / "block.onnx")
    imported = run("graph", "import", str(tmp_path / "block.onnx"), "--granularity", "op",
                   "--out", str(tmp_path / "g.json"))
    assert imported.returncode == 0, imported.stderr
    exported = run("graph", "export", str(tmp_path / "g.json"), "--node-link", str(tmp_path / "nl.json"))
    assert exported.returncode == 0, exported.stderr
    again = run("graph", "import", str(tmp_path / "nl.json"))
    assert again.returncode == 0, again.stderr
    assert "ops: forward" in again.stdout


def test_export_zoo_model_as_onnx(tmp_path):
    path = tmp_path / "mlp.onnx"
    result = run("graph", "export", "mlp", "-p", "depth=2", "--onnx", str(path))
    assert result.returncode == 0, result.stderr
    onnx.checker.check_model(onnx.load(str(path)))


def test_random_graph(tmp_path):
    result = run("graph", "random", "--nodes", "40", "--seed", "3", "--out", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["name"] == "random_layered_n40_s3"


def test_unknown_op_and_allow_unknown(tmp_path):
    m = ob.mlp()
    m.graph.node[1].op_type = "Swish"
    onnx.save(m, tmp_path / "swish.onnx")
    assert_user_error(run("graph", "import", str(tmp_path / "swish.onnx")), "Swish", "relu0", "swish.onnx")
    ok = run("graph", "import", str(tmp_path / "swish.onnx"), "--allow-unknown")
    assert ok.returncode == 0 and "treated unknown op relu0:Swish as elementwise" in ok.stderr


@pytest.mark.parametrize(
    "setup, args, fragments",
    [
        (lambda d: (d / "cut.onnx").write_bytes(ob.mlp().SerializeToString()[:200]),
         ["graph", "import", "{d}/cut.onnx"], ["cut.onnx", "fix:"]),
        (lambda d: (d / "bad.json").write_text('{"nodes": [{"id": 0, "cost_cpu": 1'),
         ["graph", "import", "{d}/bad.json"], ["bad.json", "malformed JSON"]),
        (lambda d: (d / "g.json").write_text('{"format": "monet-ilp/training-graph", "version": 1, '
                                             '"tensors": [{"id": "t", "kind": "activation", "bytes": -4}], '
                                             '"ops": [{"id": "a", "kind": "forward", "op_type": "n", '
                                             '"inputs": [], "outputs": ["t"], "macs": 0, "flops": 0}]}'),
         ["graph", "show", "{d}/g.json"], ["g.json", "tensors.t.bytes", "positive"]),
        (lambda d: None, ["graph", "build", "resnet19"], ["resnet19", "resnet18"]),
        (lambda d: None, ["graph", "build", "mlp", "-p", "depth=-1"], ["depth"]),
        (lambda d: None, ["graph", "show", "{d}/missing.json"], ["file not found"]),
        (lambda d: (d / "cyc.json").write_text(json.dumps({
            "directed": True, "multigraph": False, "graph": {},
            "nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 4}, {"id": 1, "cost_cpu": 1, "cost_ram": 4}],
            "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}]})),
         ["graph", "import", "{d}/cyc.json"], ["cyc.json", "cycle"]),
    ],
    ids=["truncated-onnx", "truncated-json", "negative-size", "unknown-zoo-name", "bad-param", "missing-file",
         "cycle"],
)
def test_bad_input_exits_2_with_one_line(tmp_path, setup, args, fragments):
    setup(tmp_path)
    assert_user_error(run(*[a.format(d=tmp_path) for a in args]), *fragments)


def test_usage_errors_exit_2():
    result = run("graph", "build")
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.slow  # the pipeline at small sizes is tests/test_demo.py, in the default run
def test_demo_runs(tmp_path):
    result = run("demo", "--time-limit", "5", "--out-dir", str(tmp_path / "demo"))
    assert result.returncode == 0, result.stderr
    for row in ("store-all", "Chen sqrt(n)", "GA (fastest point)", "auto:", "feasible", "over SRAM",
                "lower bounds over every schedule"):
        assert row in result.stdout
    assert (tmp_path / "demo" / "gantt_auto.png").stat().st_size > 10_000
    assert (tmp_path / "demo" / "pareto_ga.png").stat().st_size > 10_000


def test_hw_show_and_validate(tmp_path):
    shown = run("hw", "show", "edge_tpu", "--set", "n_pe_x=4", "--set", "pe_sram_bytes=2MiB",
                "--yaml", str(tmp_path / "hw.yaml"))
    assert shown.returncode == 0, shown.stderr
    assert "pe_7" in shown.stdout and "dram_bus" in shown.stdout
    ok = run("hw", "validate", str(tmp_path / "hw.yaml"))
    assert ok.returncode == 0 and "valid" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text((tmp_path / "hw.yaml").read_text().replace("sram_bytes: 2097152", "sram_bytes: -5", 1)
                   .replace("mac_pj:", "mac_pjj:", 1))
    result = run("hw", "validate", str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) >= 2 and all("bad.yaml" in l for l in lines)
    assert any("mac_pj" in l for l in lines)
    assert_user_error(run("hw", "show", "edge_tpuu"), "edge_tpu")


def test_instance_make_baseline_evaluate(tmp_path):
    inst = tmp_path / "inst.json"
    made = run("instance", "make", "--model", "mlp", "-p", "depth=8", "--hw", "edge_tpu", "--budget", "0.8",
               "--objective", "latency", "--out", str(inst))
    assert made.returncode == 0, made.stderr
    sched = tmp_path / "sched.json"
    base = run("baseline", str(inst), "--heuristic", "greedy", "--out", str(sched))
    assert base.returncode == 0, base.stderr
    ev = run("evaluate", str(inst), str(sched), "--json", str(tmp_path / "m.json"))
    assert ev.returncode == 0, ev.stderr
    for row in ("verdict", "latency (cycles)", "energy total (pJ)", "peak pe_0.sram", "feasible"):
        assert row in ev.stdout
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["feasible"] is True
    # Store-all at a budget of half the peak: the evaluator says why it fails, exit status 1.
    tight = tmp_path / "tight.json"
    run("instance", "make", "--model", "mlp", "-p", "depth=3", "--hw", "edge_tpu", "--budget", "0.5",
        "--out", str(tight))
    run("baseline", str(tight), "--out", str(sched))
    failed = run("evaluate", str(tight), str(sched))
    assert failed.returncode == 1 and "INFEASIBLE" in failed.stdout and "capacity" in failed.stdout


def test_instance_make_p3_and_node_link(tmp_path):
    p3 = run("instance", "make", "--model", "mlp", "-p", "depth=2", "--hw", "edge_tpu", "--set", "n_pe_x=2",
             "--set", "n_pe_y=2", "--sram-budget", "1MiB", "--out", str(tmp_path / "p3.json"))
    assert p3.returncode == 0, p3.stderr
    assert "P3" in p3.stdout and "capacity pe_3.sram" in p3.stdout
    nl = tmp_path / "nl.json"
    run("graph", "random", "--nodes", "30", "--node-link", str(nl))
    p1 = run("instance", "make", "--graph", str(nl), "--budget", "0.9", "--out", str(tmp_path / "p1.json"))
    assert p1.returncode == 0, p1.stderr
    assert_user_error(run("instance", "make", "--graph", str(nl), "--hw", "edge_tpu", "--out",
                          str(tmp_path / "x.json")), "node-link")
    assert_user_error(run("instance", "make", "--model", "mlp", "--budget", "lots", "--out",
                          str(tmp_path / "x.json")), "--budget")


def test_evaluate_rejects_bad_files(tmp_path):
    inst = tmp_path / "inst.json"
    run("instance", "make", "--model", "mlp", "-p", "depth=1", "--out", str(inst))
    (tmp_path / "s.json").write_text('{"format": "monet-ilp/schedule", "version": 1, "kind": "timed", "ops": [[')
    assert_user_error(run("evaluate", str(inst), str(tmp_path / "s.json")), "s.json", "malformed JSON")


def test_p3_solve_and_pareto_from_the_command_line(tmp_path):
    inst = tmp_path / "p3.json"
    made = run("instance", "make", "--model", "mlp", "-p", "depth=1", "-p", "width=32", "-p", "batch=4",
               "-p", "in_features=32", "--hw", "edge_tpu", "--set", "n_pe_x=2", "--set", "n_pe_y=1",
               "--problem", "P3", "--out", str(inst))
    assert made.returncode == 0, made.stderr
    solved = run("solve", str(inst), "--time-limit", "20", "--colocate", "layer", "--out", str(tmp_path / "s.json"))
    assert solved.returncode == 0, solved.stderr
    assert "optimal" in solved.stdout and "pe_0" in solved.stdout and "feasible" in solved.stdout
    front = run("pareto", str(inst), "--points", "3", "--time-limit", "10", "--out", str(tmp_path / "front.json"),
                "--plot", str(tmp_path / "front.png"))
    assert front.returncode == 0, front.stderr
    data = json.loads((tmp_path / "front.json").read_text())
    assert data["points"] and (tmp_path / "front.png").stat().st_size > 1000
    bad = run("pareto", str(inst), "--points", "1")
    assert_user_error(bad, "points")


def test_graph_import_warns_about_an_inference_export_and_says_how_to_re_export(tmp_path):
    path = tmp_path / "folded.onnx"
    onnx.save(ob.folded_residual_block(), str(path))
    result = run("graph", "import", str(path))
    assert result.returncode == 0, result.stderr
    assert "looks exported for inference" in result.stderr and "TrainingMode.TRAINING" in result.stderr
    assert "Traceback" not in result.stderr


def test_graph_import_trainable_names_the_weights(tmp_path):
    """--trainable: the named initializers are the weights, the rest constants; a name
    that is not an initializer exits with 2 and names the field."""
    model = ob.mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "g.json"
    names = [f"--trainable={t.name}" for t in model.graph.initializer]
    done = run("graph", "import", str(path), *names, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert_user_error(run("graph", "import", str(path), "--trainable", "nope"), "trainable", "nope")


def test_min_budget_says_which_schedules_its_proof_holds_for(tmp_path):
    """The descent (P1I.L5) meets the floor no schedule can beat: a proof for every
    schedule, below what the stage form's one pass proves (218 bytes, its class only)."""
    from monet_ilp.graph import random_layered_literature

    path = tmp_path / "r16.json"
    random_layered_literature(16, seed=1).save(path)
    result = run("min-budget", str(path), "--time-limit", "10")
    assert result.returncode == 0, result.stderr
    assert "minimum budget: 214 bytes" in result.stdout
    assert "proven for every schedule" in result.stdout


def test_evaluate_shows_where_the_latency_goes_on_several_cores(tmp_path):
    from monet_ilp.cli.evaluate import busy, pinned_per_memory
    from monet_ilp.evaluate import evaluate
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import save_schedule
    from monet_ilp.solve import solve

    inst_path = tmp_path / "p3.json"
    made = run("instance", "make", "--model", "mlp", "-p", "depth=3", "--hw", "edge_tpu", "--set", "n_pe_x=2",
               "--set", "n_pe_y=1", "--problem", "P3", "--objective", "latency", "--out", str(inst_path))
    assert made.returncode == 0, made.stderr
    inst = Instance.load(inst_path)
    result = solve(inst, "auto", time_limit=10, workers=1)
    metrics = evaluate(inst, result.schedule)
    assert metrics.feasible
    # Each core's busy cycles are the sum of its runs' durations, within the latency.
    shown = busy(metrics.schedule, inst, metrics.latency_cycles)
    for core in inst.cores:
        cycles = sum(r.end - r.start for r in metrics.schedule.ops if r.core == core.id)
        percent = round(100 * cycles / metrics.latency_cycles)
        assert f"{core.id} {cycles:,} ({percent} %)" in shown
        assert cycles <= metrics.latency_cycles
    if metrics.schedule.pinned:
        held = pinned_per_memory(metrics.schedule, inst)
        assert all(memory in held for _, memory in metrics.schedule.pinned)
    sched = tmp_path / "s.json"
    save_schedule(metrics.schedule, sched)
    ev = run("evaluate", str(inst_path), str(sched))
    assert ev.returncode == 0, ev.stderr
    assert "busy per core" in ev.stdout and "pe_0" in ev.stdout and "pe_1" in ev.stdout
