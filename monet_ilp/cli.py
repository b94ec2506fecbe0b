"""The ``monet-ilp`` command line: the outermost layer, which only calls the package.

Tables go to the terminal and JSON to files.  Exit status, the same for every command:

* 0: the command did its job and every schedule it reports is feasible (a solve
  ended ``optimal`` or ``feasible``);
* 1: it did its job, but the answer is negative: a schedule the evaluator rejects
  (``evaluate``, ``baseline``, ``grade``), a solve that ended ``infeasible``,
  ``unknown`` or ``error``, a GA or Pareto sweep without a feasible point;
* 2: bad input.  Every error a user can cause is a
  :class:`~monet_ilp.errors.MonetError`, printed on one line without a traceback.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click
from rich.table import Table

from monet_ilp import progress
from monet_ilp.errors import MonetError
from monet_ilp.terminal import (
    POSITIVE,
    SECONDS,
    console,
    err_console,
    exit_unless,
    show,
)
from monet_ilp.units import human_bytes, human_count

GRANULARITY = click.Choice(["layer", "op"])
OPTIMIZER = click.Choice(["sgd", "momentum", "adam"])
DTYPE = click.Choice(["fp32", "bf16", "fp16", "int8"])


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner on stderr for steps that may take more than a second.

    What the step reports through :mod:`monet_ilp.progress` replaces the spinner's text.
    """
    if err_console.is_terminal:
        with err_console.status(message) as status, progress.listening(
                lambda step: status.update(f"{message}: {step}")):
            yield
    else:
        yield


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="monet-ilp")
def cli() -> None:
    """Exact optimisation of neural-network training schedules on multi-core accelerators."""


# --------------------------------------------------------------------- graph
@cli.group()
def graph() -> None:
    """Build, import, inspect and export training graphs."""


def _import_options(f):
    f = click.option("--optimizer", type=OPTIMIZER, default="sgd", show_default=True,
                     help="Optimizer whose update ops and state tensors the graph gets.")(f)
    f = click.option("--granularity", type=GRANULARITY, default="layer", show_default=True,
                     help="layer: each conv/matmul absorbs its elementwise tail; op: one node per ONNX op.")(f)
    f = click.option("--dtype", type=DTYPE, default=None,
                     help="Element type of every float tensor (default: the model's).")(f)
    return f


def _save_graph(g, out: str | None) -> None:
    if out:
        g.save(out)
        err_console.print(f"wrote {out} ({len(g.ops)} ops, {len(g.tensors)} tensors)")


@graph.command("build")
@click.argument("model")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="Model parameter, e.g. -p batch=8 -p variant=imagenet (repeatable).")
@_import_options
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the graph JSON here.")
def graph_build(model, params, optimizer, granularity, dtype, out):
    """Build the training graph of a zoo MODEL (mlp, resnet18, vgg16, mobilenet_v2, gpt2, ...)."""
    from monet_ilp.graph import zoo

    options = zoo.parse_params(list(params))
    with working(f"building {model}"):
        g = zoo.build(model, optimizer=optimizer, granularity=granularity, dtype=dtype, **options)
    _save_graph(g, out)
    _print_summary(g)


@graph.command("import")
@click.argument("path", type=click.Path(dir_okay=False))
@_import_options
@click.option("--allow-unknown", is_flag=True, help="Treat ops without an autodiff rule as elementwise.")
@click.option("--output", "output_name", help="The model output that feeds the loss (if several).")
@click.option("--batch", type=POSITIVE, help="Fill a symbolic batch dimension of every input.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=1x3x224x224",
              help="Static shape of an input (repeatable).")
@click.option("--loss", type=click.Choice(["cross_entropy", "mse"]), default="cross_entropy", show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the graph JSON here.")
def graph_import(path, optimizer, granularity, dtype, allow_unknown, output_name, batch, input_shapes,
                 loss, out):
    """Import an ONNX model (.onnx) or a Checkmate/Moccasin node-link graph (.json)."""
    if Path(path).suffix.lower() == ".json":
        from monet_ilp.graph.node_link import from_node_link

        g = from_node_link(path)
    else:
        from monet_ilp.graph import from_onnx

        shapes = {}
        for item in input_shapes:
            name, _, dims = item.partition("=")
            try:
                shapes[name] = [int(d) for d in dims.lower().split("x")]
            except ValueError:
                raise MonetError(f"cannot read --input-shape {item!r}", field="--input-shape",
                                 fix="write NAME=1x3x224x224") from None
        with working(f"importing {path}"):
            g = from_onnx(path, optimizer=optimizer, granularity=granularity, dtype=dtype, loss=loss,
                          allow_unknown=allow_unknown, output=output_name, input_shapes=shapes,
                          batch=batch)
        for entry in g.meta.get("unknown_ops", []):
            err_console.print(f"note: treated unknown op {entry} as elementwise (saves its inputs)")
    _save_graph(g, out)
    _print_summary(g)


@graph.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--ops", "show_ops", is_flag=True, help="Also list every op.")
@click.option("--json", "as_json", type=click.Path(dir_okay=False), help="Write the summary as JSON here.")
def graph_show(path, show_ops, as_json):
    """Print the summary of a graph JSON file (ops, MACs, bytes by kind, store-all peak)."""
    from monet_ilp.graph import TrainingGraph

    g = TrainingGraph.load(path)
    summary = _print_summary(g)
    if show_ops:
        table = Table(title="ops")
        for col in ("id", "kind", "type", "MACs", "outputs"):
            table.add_column(col)
        for op in g.ops:
            table.add_row(op.id, str(op.kind), op.op_type, human_count(op.macs),
                          human_bytes(sum(g.tensor(t).bytes for t in op.outputs)))
        show(table)
    if as_json:
        import json

        Path(as_json).write_text(json.dumps(summary.as_dict(), indent=1) + "\n")


@graph.command("export")
@click.argument("source")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Zoo model parameter.")
@click.option("--onnx", "onnx_path", type=click.Path(dir_okay=False), help="Write the zoo model as ONNX.")
@click.option("--node-link", "node_link_path", type=click.Path(dir_okay=False),
              help="Write the training graph as Checkmate/Moccasin node-link JSON.")
@_import_options
def graph_export(source, params, onnx_path, node_link_path, optimizer, granularity, dtype):
    """Export SOURCE (a zoo name or a graph JSON file) as ONNX and/or node-link JSON."""
    if not onnx_path and not node_link_path:
        raise MonetError("nothing to export", field="options", fix="pass --onnx FILE and/or --node-link FILE")
    from monet_ilp.graph import TrainingGraph, zoo

    is_file = Path(source).suffix.lower() == ".json"
    if onnx_path:
        if is_file:
            raise MonetError("ONNX export needs a zoo model name, not a graph file", field="SOURCE",
                             fix="pass a zoo name such as resnet18")
        import onnx

        model_params, _ = zoo.split_params(zoo.parse_params(list(params)))
        onnx.save(zoo.onnx_model(source, **model_params), onnx_path)
        err_console.print(f"wrote {onnx_path}")
    if node_link_path:
        from monet_ilp.graph.node_link import save_node_link

        if is_file:
            g = TrainingGraph.load(source)
        else:
            g = zoo.build(source, optimizer=optimizer, granularity=granularity, dtype=dtype,
                          **zoo.parse_params(list(params)))
        save_node_link(g, node_link_path)
        err_console.print(f"wrote {node_link_path}")


@graph.command("random")
@click.option("--nodes", "-n", type=POSITIVE, required=True, help="Number of nodes.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the graph JSON here.")
@click.option("--node-link", "node_link_path", type=click.Path(dir_okay=False),
              help="Also write it as node-link JSON.")
def graph_random(nodes, seed, out, node_link_path):
    """Generate a random layered DAG (see formulations/random_dags.md for the process)."""
    from monet_ilp.graph.random_dag import random_layered

    g = random_layered(nodes, seed=seed)
    _save_graph(g, out)
    if node_link_path:
        from monet_ilp.graph.node_link import save_node_link

        save_node_link(g, node_link_path)
    _print_summary(g)


def _print_summary(g):
    from monet_ilp.graph import summarize

    s = summarize(g)
    table = Table(title=f"training graph {g.name}", show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for kind, count in s.ops_by_kind.items():
        table.add_row(f"ops: {kind}", str(count))
    table.add_row("tensors", str(s.tensors))
    table.add_row("forward layers", str(s.layers))
    table.add_row("forward MACs", human_count(s.forward_macs))
    table.add_row("backward MACs", human_count(s.backward_macs))
    table.add_row("total FLOPs", human_count(s.total_flops))
    table.add_row("activation bytes", human_bytes(s.activation_bytes))
    table.add_row("saved for backward", human_bytes(s.saved_bytes))
    table.add_row("weight bytes", human_bytes(s.weight_bytes))
    table.add_row("gradient bytes", human_bytes(s.weight_grad_bytes))
    table.add_row("optimizer-state bytes", human_bytes(s.optimizer_state_bytes))
    peak = s.store_all_peak
    table.add_row("store-all peak (total)", human_bytes(peak.total_bytes))
    table.add_row("store-all peak (activations)", f"{human_bytes(peak.activation_bytes)} at {peak.at_op}")
    if "granularity" in g.meta:
        table.caption = f"granularity={g.meta['granularity']}, optimizer={g.meta.get('optimizer')}"
    show(table)
    return s


# ------------------------------------------------------------------ hardware
@cli.group()
def hw() -> None:
    """Show and validate hardware descriptions (presets or YAML files)."""


def _load_hw(source: str, sets: tuple[str, ...]):
    from monet_ilp.hardware.presets import PRESETS, parse_set, preset
    from monet_ilp.hardware.schema import load_hardware

    if source in PRESETS:
        return preset(source, **parse_set(list(sets)))
    if sets:
        raise MonetError("--set applies to presets, not to YAML files", field="--set",
                         fix=f"edit the file, or use a preset: {', '.join(PRESETS)}")
    if not Path(source).suffix:
        from difflib import get_close_matches

        close = get_close_matches(source, list(PRESETS), n=1)
        raise MonetError(f"unknown hardware {source!r}", field="--hw",
                         fix=(f"did you mean {close[0]!r}? " if close else "")
                         + f"use a preset ({', '.join(PRESETS)}) or a YAML file")
    return load_hardware(source)


@hw.command("show")
@click.argument("source")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Preset parameter (repeatable).")
@click.option("--yaml", "yaml_out", type=click.Path(dir_okay=False), help="Write the description as YAML.")
def hw_show(source, sets, yaml_out):
    """Print the cores, memories and links of a preset or YAML file."""
    hardware = _load_hw(source, sets)
    cores = Table(title=f"{hardware.name}: cores (clock {hardware.clock_hz / 1e6:g} MHz)")
    for col in ("core", "U x L", "MACs/cycle", "SRAM", "SRAM B/cycle", "MAC pJ", "vector ops/cycle", "static mW"):
        cores.add_column(col, justify="left" if col == "core" else "right")
    for c in hardware.cores:
        cores.add_row(c.id, f"{c.simd_units} x {c.lanes}", str(c.macs_per_cycle), human_bytes(c.sram_bytes),
                      f"{c.sram_bandwidth_bytes_per_cycle:g}", f"{c.mac_pj:g}", str(c.vector_ops_per_cycle),
                      f"{c.static_mw:g}")
    show(cores)
    memories = Table(title="memories")
    for col in ("memory", "kind", "capacity", "B/cycle", "read pJ/B", "write pJ/B"):
        memories.add_column(col, justify="left" if col in ("memory", "kind") else "right")
    for m in hardware.memories:
        memories.add_row(m.id, str(m.kind), human_bytes(m.capacity_bytes), f"{m.bandwidth_bytes_per_cycle:g}",
                         f"{m.read_pj_per_byte:g}", f"{m.write_pj_per_byte:g}")
    show(memories)
    links = Table(title="links")
    for col in ("link", "endpoints", "B/cycle", "pJ/B", "latency"):
        links.add_column(col, justify="left" if col in ("link", "endpoints") else "right")
    for l in hardware.links:
        links.add_row(l.id, ", ".join(l.endpoints), f"{l.bandwidth_bytes_per_cycle:g}", f"{l.pj_per_byte:g}",
                      str(l.latency_cycles))
    show(links)
    if yaml_out:
        import yaml

        from monet_ilp.hardware.schema import hardware_to_dict

        Path(yaml_out).write_text(yaml.safe_dump(hardware_to_dict(hardware), sort_keys=False))
        err_console.print(f"wrote {yaml_out}")


@hw.command("validate")
@click.argument("path", type=click.Path(dir_okay=False))
def hw_validate(path):
    """Check a hardware YAML file; print every error with its file, key path and fix."""
    from monet_ilp.hardware.schema import validate_hardware_file

    errors = validate_hardware_file(path)
    if not errors:
        console.print(f"{path}: valid")
        return
    for err in errors:
        err_console.print(f"error: {err.message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(2)


# ------------------------------------------------------------------ instance
@cli.group()
def instance() -> None:
    """Build problem instances (graph + hardware + budget + objective)."""


def parse_budget(text: str | None):
    """``0.8``/``80%`` of the store-all peak, ``1.5x`` the peak, or bytes (``2MiB``); see ``make.parse_budget``."""
    from monet_ilp.make import parse_budget as parse

    return parse(text, field="--budget")


@instance.command("make")
@click.option("--model", help="Zoo model name (see `monet-ilp graph build --help`).")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Zoo model parameter.")
@click.option("--graph", "graph_path", type=click.Path(dir_okay=False),
              help="A training-graph JSON, a node-link JSON or an ONNX file, instead of --model.")
@click.option("--hw", "hw_source", help="Hardware preset or YAML file (omit for P1 with the graph's own costs).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Hardware preset parameter.")
@click.option("--problem", type=click.Choice(["P1", "P2", "P3"]), default=None,
              help="Problem class (default: P3 with --sram-budget, else P1).")
@click.option("--budget", help="Memory budget: a fraction of the store-all peak (0.8) or bytes (2MiB).")
@click.option("--sram-budget", help="P3: every core's SRAM capacity in bytes (e.g. 1MiB).")
@click.option("--objective", type=click.Choice(["compute", "latency", "energy", "weighted"]), default=None)
@click.option("--alpha", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="Weight of latency (weighted).")
@click.option("--core", help="P1/P2: the core to run on (default: the first).")
@click.option("--offload", type=click.Choice(["dram", "host"]), default="dram", show_default=True,
              help="P2: the memory activations are offloaded to.")
@click.option("--runtime-limit", type=POSITIVE, help="Energy objective: latency limit in cycles.")
@_import_options
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="Write the instance JSON here.")
def instance_make(model, params, graph_path, hw_source, sets, problem, budget, sram_budget, objective, alpha,
                  core, offload, runtime_limit, optimizer, granularity, dtype, out):
    """Make an instance from a model (zoo or file), a hardware description and a budget."""
    from monet_ilp.hardware.schema import parse_size
    from monet_ilp.make import make_instance

    g = _graph_from(model, params, graph_path, optimizer, granularity, dtype)
    hardware = _load_hw(hw_source, sets) if hw_source else None
    sram = parse_size(sram_budget, field="--sram-budget") if sram_budget else None
    problem = problem or ("P3" if sram is not None else "P1")
    with working("costing ops"):
        inst = make_instance(g, hardware, problem=problem, budget=parse_budget(budget), sram_budget=sram,
                             objective=objective, core=core, offload=offload, alpha=alpha,
                             runtime_limit_cycles=runtime_limit)
    inst.save(out)
    table = Table(title=f"instance {inst.name}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("problem / objective", f"{inst.problem} / {inst.objective}")
    table.add_row("ops / tensors", f"{len(inst.graph.ops)} / {len(inst.graph.tensors)}")
    table.add_row("cores", ", ".join(c.id for c in inst.cores))
    for m in inst.memories:
        table.add_row(f"capacity {m.id}", human_bytes(m.capacity_bytes))
    table.add_row("store-all activation peak", human_bytes(inst.meta["store_all_peak_bytes"]))
    for tensor in _graph_inputs(inst.graph):
        table.add_row(f"input {tensor.id}", "x".join(map(str, tensor.shape)) or human_bytes(tensor.bytes))
    show(table)
    for note in budget_notes(inst):
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    err_console.print(f"wrote {out}")


def _graph_inputs(g):
    """The graph's input activations (they show the batch a model was built with)."""
    return [t for t in g.tensors if t.producer is None and not t.persistent and t.consumers]


def budget_notes(inst) -> list[str]:
    """What a user should know about the instance's memory budget before solving it.

    P1/P2: whether the budget binds at all.  P3: whether some op cannot fit any core's
    SRAM (then no schedule exists), or whether every core could hold the store-all peak.
    """
    from monet_ilp.instance import Problem

    peak = inst.meta.get("store_all_peak_bytes")
    if inst.problem is not Problem.P3:
        budget = inst.budget_bytes
        if peak is not None and budget >= peak:
            return [f"the budget ({human_bytes(budget)}) is at least the store-all activation peak "
                    f"({human_bytes(peak)}): it does not bind, and store-all is optimal; "
                    "give a fraction below 1 (e.g. --budget 0.8) to make it bind"]
        return []
    from monet_ilp.problems.p3.data import p3_data

    data = p3_data(inst)
    reason = data.min_capacity_proof()
    if reason:
        shapes = [t.shape for t in _graph_inputs(inst.graph) if t.shape]
        inputs = ", ".join("x".join(map(str, shape)) for shape in shapes)
        batched = any(shape[0] > 1 for shape in shapes)  # only then can a smaller batch help
        return [f"no schedule exists: {reason.removeprefix('infeasible: ')}"
                + (f"; the graph's inputs are {inputs} (a smaller batch, e.g. -p batch=1, needs less)"
                   if batched else "")]
    smallest = min(inst.memory(c.memory).capacity_bytes for c in inst.cores)
    if peak is not None and smallest >= peak + inst.meta.get("persistent_bytes", 0):
        return [f"every core's SRAM holds the store-all peak and every weight "
                f"({human_bytes(peak + inst.meta.get('persistent_bytes', 0))}): the SRAM budget "
                "does not bind; give a smaller --sram-budget to make it bind"]
    return []


def _graph_from(model, params, graph_path, optimizer, granularity, dtype):
    from monet_ilp.graph import TrainingGraph, from_node_link, from_onnx, zoo

    if bool(model) == bool(graph_path):
        raise MonetError("give exactly one of --model and --graph", field="--model/--graph",
                         fix="e.g. --model resnet18, or --graph g.json")
    if model:
        with working(f"building {model}"):
            return zoo.build(model, optimizer=optimizer, granularity=granularity, dtype=dtype,
                             **zoo.parse_params(list(params)))
    if Path(graph_path).suffix.lower() == ".onnx":
        return from_onnx(graph_path, optimizer=optimizer, granularity=granularity, dtype=dtype)
    from monet_ilp.graph.ir import read_json

    data = read_json(graph_path)
    if isinstance(data, dict) and data.get("format") == "monet-ilp/training-graph":
        return TrainingGraph.from_dict(data, source=graph_path)
    return from_node_link(graph_path)


# ------------------------------------------------------------------ evaluate
def _print_metrics(metrics, inst, title: str) -> None:
    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("verdict", "feasible" if metrics.feasible else f"INFEASIBLE ({sum(metrics.violation_counts.values())} violations)")
    table.add_row("latency (cycles)", f"{metrics.latency_cycles:,}")
    table.add_row("compute (cycles)", f"{metrics.compute_cycles:,}")
    for part in ("compute", "recompute", "sram", "dram", "link", "static", "total"):
        table.add_row(f"energy {part} (pJ)", f"{getattr(metrics.energy, part + '_pj'):,}")
    for mem, peak in metrics.peak_bytes.items():
        cap = inst.memory(mem).capacity_bytes
        table.add_row(f"peak {mem}", f"{human_bytes(peak)} / {human_bytes(cap)}")
    table.add_row("recomputations / transfers", f"{metrics.recomputations} / {metrics.transfers}")
    if len(inst.cores) > 1:
        table.add_row("runs per core", _runs_per_core(metrics.schedule, inst))
    table.add_row(f"objective ({inst.objective})", f"{metrics.objective_value:,}")
    show(table)
    for v in metrics.violations[:20]:
        console.print(f"  violation [{v.kind}] {v.message}", markup=False, highlight=False)
    if len(metrics.violations) > 20:
        console.print(f"  ... and {len(metrics.violations) - 20} more")


def _runs_per_core(schedule, inst) -> str:
    """``pe_0 120, pe_1 7, pe_2 0``: shows at a glance how a schedule uses the cores."""
    runs = {core.id: 0 for core in inst.cores}
    for run in schedule.ops:
        runs[run.core] = runs.get(run.core, 0) + 1
    return ", ".join(f"{core} {count}" for core, count in runs.items())


@cli.command("evaluate")
@click.argument("instance_path", type=click.Path(dir_okay=False))
@click.argument("schedule_path", type=click.Path(dir_okay=False))
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the metrics as JSON here.")
def evaluate_cmd(instance_path, schedule_path, json_out):
    """Check a schedule against an instance; print latency, energy, peaks and any violation.

    Exits with 1 if the schedule is infeasible, and with 2 if it was made for another
    instance (another graph or hardware).
    """
    import json

    from monet_ilp.evaluate import evaluate
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import load_schedule

    inst = Instance.load(instance_path)
    metrics = evaluate(inst, load_schedule(schedule_path, inst))
    _print_metrics(metrics, inst, f"{schedule_path} on {inst.name}")
    if json_out:
        Path(json_out).write_text(json.dumps(metrics.to_dict()) + "\n")
    exit_unless(metrics.feasible)


@cli.command("baseline")
@click.argument("instance_path", type=click.Path(dir_okay=False))
@click.option("--heuristic", type=click.Choice(["store_all", "sqrt", "greedy"]), default="store_all",
              show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the schedule JSON here.")
def baseline_cmd(instance_path, heuristic, out):
    """Schedule an instance with a baseline (store-all, Chen sqrt(n), Chen greedy) and evaluate it."""
    from monet_ilp.evaluate import evaluate
    from monet_ilp.heuristics import HEURISTICS
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import save_schedule, stamped

    inst = Instance.load(instance_path)
    schedule = HEURISTICS[heuristic](inst)
    metrics = evaluate(inst, schedule)
    if out:
        save_schedule(stamped(metrics.schedule, inst, f"heuristic:{heuristic}"), out)
        err_console.print(f"wrote {out}")
    _print_metrics(metrics, inst, f"{heuristic} on {inst.name}")
    exit_unless(metrics.feasible)


# --------------------------------------------------------------------- solve
def _instance_from(path: str, budget: str | None):
    """An instance file, or a graph (node-link, training graph, ONNX) made into a P1 instance."""
    from monet_ilp.graph.ir import read_json
    from monet_ilp.instance import Instance
    from monet_ilp.make import make_instance

    if Path(path).suffix.lower() != ".onnx":
        data = read_json(path)
        if isinstance(data, dict) and data.get("format") == "monet-ilp/instance":
            if budget is not None:
                raise MonetError("--budget applies to graphs; an instance has its budget already",
                                 field="--budget", fix="drop --budget, or remake the instance")
            return Instance.from_dict(data, source=path)
    g = _graph_from(None, (), path, "sgd", "layer", None)
    return make_instance(g, None, problem="P1", budget=parse_budget(budget) if budget else 0.8)


@cli.command("solve")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--backend", default="cpsat", show_default=True,
              help="cpsat, milp, dp, or heuristic:store_all|sqrt|greedy|memory_aware|lp-round.")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True,
              help="Seconds for the whole solve, model building included (formulations/time_limits.md).")
@click.option("--workers", type=POSITIVE, default=2, show_default=True, help="Solver threads.")
@click.option("--budget", help="For a graph file: the P1 budget (0.8 = fraction of the store-all peak, or bytes).")
@click.option("--milp-solver", type=click.Choice(["highs", "cbc"]), default=None, help="MILP solver (default highs).")
@click.option("--max-computes", type=POSITIVE, default=None, help="At most this many computations per node.")
@click.option("--free-order", is_flag=True, help="Let first computations come in any topological order.")
@click.option("--encoding", default=None, help="cpsat encoding (see formulations/p1_cpsat.md).")
@click.option("--colocate", type=click.Choice(["none", "layer"]), default=None,
              help="P3: 'layer' puts a layer's forward, dX and dW on one core (default: none).")
@click.option("--max-transfers", type=click.IntRange(min=0), default=None, help="P3: transfers of a tensor into one memory (default 1).")
@click.option("--no-pin", is_flag=True, help="P3: never pin weights in SRAM.")
@click.option("--hint", "hint_path", type=click.Path(dir_okay=False),
              help="Warm start from a schedule, a ga.json (its best point) or a decisions file.")
@click.option("--export", "export_path", type=click.Path(dir_okay=False), help="milp: write the model (.mps/.lp).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the schedule JSON here.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
def solve_cmd(path, backend, time_limit, workers, budget, milp_solver, max_computes, free_order, encoding,
              colocate, max_transfers, no_pin, hint_path, export_path, out, json_out):
    """Solve an instance (or a graph, as P1) and verify the schedule with the evaluator."""
    import json

    from monet_ilp.evaluate import evaluate
    from monet_ilp.heuristics import store_all
    from monet_ilp.schedule import save_schedule
    from monet_ilp.solve import Status, solve

    inst = _instance_from(path, budget)
    for note in budget_notes(inst):
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    options = {k: v for k, v in (("milp_solver", milp_solver), ("max_computes", max_computes),
                                 ("encoding", encoding), ("export", export_path), ("colocate", colocate),
                                 ("max_transfers", max_transfers)) if v is not None}
    if free_order:
        options["fixed_order"] = False
    if no_pin:
        options["allow_pin"] = False
    hint = load_hint(hint_path, inst) if hint_path else None
    with working(f"solving with {backend}"):
        result = solve(inst, backend, time_limit=time_limit, workers=workers, hint=hint, **options)
    reference = evaluate(inst, store_all(inst))
    table = Table(title=f"{backend} on {inst.name}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("status", str(result.status))
    table.add_row("schedule from", result.source or "-")
    table.add_row(f"objective ({inst.objective})", "-" if result.objective is None else f"{result.objective:,}")
    table.add_row("best bound", "-" if result.bound is None else f"{result.bound:,}")
    table.add_row("gap", "-" if result.gap is None else f"{100 * result.gap:.3f} %")
    table.add_row("wall time", f"{result.wall_time_s:.2f} s")
    verdict = "-" if result.metrics is None else ("feasible" if result.metrics.feasible else "INFEASIBLE")
    table.add_row("evaluator", verdict)
    if result.objective is not None and reference.objective_value:
        # Store-all is the reference even where it breaks the budget; the label says so.
        label = "vs store-all" + ("" if reference.feasible else " (over budget)")
        table.add_row(label, f"{100 * (result.objective / reference.objective_value - 1):+.2f} %")
    if result.metrics is not None and len(inst.cores) > 1:
        m = result.metrics
        table.add_row("latency", f"{m.latency_cycles:,} cycles")
        table.add_row("energy", f"{m.energy.total_pj:,} pJ")
        for core in inst.cores:
            runs = sum(1 for r in result.schedule.ops if r.core == core.id)
            table.add_row(f"{core.id}", f"{runs} runs, peak {human_bytes(m.peak_bytes[core.memory])} "
                                        f"of {human_bytes(inst.memory(core.memory).capacity_bytes)}")
        table.add_row("recomputations / transfers / pins",
                      f"{m.recomputations} / {m.transfers} / {len(result.schedule.pinned)}")
    show(table)
    if result.message:
        console.print(result.message, markup=False, highlight=False)
    if out and result.schedule is not None:
        save_schedule(result.schedule, out)
        err_console.print(f"wrote {out}")
    if json_out:
        Path(json_out).write_text(json.dumps(result.to_dict()) + "\n")
    exit_unless(result.status in (Status.OPTIMAL, Status.FEASIBLE))


@cli.command("min-budget")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True)
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
def min_budget_cmd(path, time_limit, workers):
    """The smallest memory budget for which any schedule exists (proven by CP-SAT when it can)."""
    from monet_ilp.problems.p1.cpsat import min_budget

    inst = _instance_from(path, None)
    with working("minimising the peak"):
        budget_bytes, proven = min_budget(inst, time_limit=time_limit, workers=workers)
    peak = inst.meta.get("store_all_peak_bytes")
    share = f" ({budget_bytes / peak:.3f} of the store-all peak)" if peak else ""
    console.print(f"minimum budget: {budget_bytes:,} bytes{share}, {'proven' if proven else 'not proven (time limit)'}")


@cli.command("pareto")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--points", type=POSITIVE, default=8, show_default=True, help="Solves in the ε-constraint sweep.")
@click.option("--backend", default="cpsat", show_default=True)
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True, help="Seconds per point.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), default="pareto.json", show_default=True,
              help="The front (JSON); schedules go to <out stem>_schedules/.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw the front (.png/.pdf/.svg).")
def pareto_cmd(path, points, backend, time_limit, workers, out, plot_path):
    """Latency/energy Pareto front by ε-constraint: verified schedules, each with its energy bound."""
    import json

    from rich.progress import Progress

    from monet_ilp.analysis.pareto import pareto_front

    inst = _instance_from(path, None)
    target = Path(out)
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("sweeping", total=points)
        front = pareto_front(inst, points=points, backend=backend, time_limit=time_limit, workers=workers,
                             schedule_dir=target.with_name(target.stem + "_schedules"),
                             progress=lambda done, total, msg: bar.update(task, completed=done, description=msg))
    target.write_text(json.dumps(front, indent=1) + "\n")
    table = Table(title=f"Pareto front of {inst.name} ({backend}, {time_limit:g} s per point)")
    for col in ("latency (cycles)", "energy (pJ)", "energy bound (pJ)", "certified gap", "status",
                "schedule from"):
        table.add_column(col, justify="left" if col == "schedule from" else "right")
    for p in front["points"]:
        bound = p["energy_bound_pj"]
        gap = "-" if bound is None or not p["energy_pj"] else f"{100 * (p['energy_pj'] - bound) / p['energy_pj']:.2f} %"
        table.add_row(f"{p['latency_cycles']:,}", f"{p['energy_pj']:,}", "-" if bound is None else f"{bound:,.0f}",
                      gap, p["status"], p.get("source") or "-")
    show(table)
    err_console.print(f"wrote {target}")
    if not front["points"]:
        for step in front["sweep"]:
            console.print(f"{step['label']}: {step['status']}: {step['message']}", markup=False,
                          highlight=False)
    elif plot_path:
        from monet_ilp.plot import pareto

        pareto(front, plot_path)
        err_console.print(f"wrote {plot_path}")
    exit_unless(bool(front["points"]))


@cli.command("bound")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--objective", type=click.Choice(["latency", "energy", "weighted", "compute"]), default=None,
              help="Bound this objective instead of the instance's.")
@click.option("--runtime-limit", type=POSITIVE, default=None, help="Energy: bound schedules of at most this latency.")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True, help="Seconds for the solver bounds.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
@click.option("--no-solver", is_flag=True, help="Only the combinatorial bounds (instant).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the bounds as JSON here.")
def bound_cmd(path, objective, runtime_limit, time_limit, workers, no_solver, json_out):
    """The best certified lower bound on the objective, and where each bound comes from."""
    import dataclasses
    import json

    from monet_ilp.analysis.bounds import lower_bounds
    from monet_ilp.instance import Objective
    from monet_ilp.make import with_weighted_references

    inst = _instance_from(path, None)
    if objective is not None:
        inst = dataclasses.replace(inst, objective=Objective(objective))
        if inst.objective is Objective.WEIGHTED and "latency_ref_cycles" not in inst.meta:
            inst = with_weighted_references(inst)
    if runtime_limit is not None:
        inst = dataclasses.replace(inst, runtime_limit_cycles=runtime_limit)
    with working("bounding"):
        report = lower_bounds(inst, time_limit=time_limit, workers=workers, solver=not no_solver)
    table = Table(title=f"lower bounds on {report['objective']} of {inst.name}"
                        + (f" (latency <= {runtime_limit:,})" if runtime_limit else ""))
    for col in ("bound", "family", "value", "holds for", "seconds", "detail"):
        table.add_column(col, justify="right" if col in ("value", "seconds") else "left")
    for b in report["bounds"]:
        value = "-" if b["value"] is None else (f"{b['value']:,.6g}" if isinstance(b["value"], float)
                                                else f"{b['value']:,}")
        table.add_row(b["name"], b["family"], value, b["holds_for"], f"{b['seconds']:.2f}", b["detail"])
    show(table)
    best = report["best"]
    if best == float("inf"):
        why = next(b["detail"] for b in report["bounds"] if b["name"] == report["best_source"])
        console.print(f"no schedule exists ({report['best_source']}: {why})", highlight=False, markup=False)
    else:
        console.print(f"best lower bound: {best if best is None else format(best, ',')} ({report['best_source']})"
                      + ("" if report["incumbent"] is None else f"; best schedule found: {report['incumbent']:,}"),
                      highlight=False)
    if json_out:  # strict JSON has no Infinity: an infinite bound is written "inf"
        finite = json.loads(json.dumps(report, default=str),
                            parse_constant=lambda c: {"Infinity": "inf", "-Infinity": "-inf"}.get(c, c))
        Path(json_out).write_text(json.dumps(finite, indent=1) + "\n")
    exit_unless(best != float("inf"))


@cli.command("grade")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--instance", "instance_path", required=True, type=click.Path(dir_okay=False))
@click.option("--time-limit", type=SECONDS, default=30.0, show_default=True, help="Seconds per bound solve.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the grades as JSON here.")
def grade_cmd(path, instance_path, time_limit, workers, json_out):
    """Grade a GA result, outside decisions or a schedule against certified lower bounds."""
    import json

    from rich.progress import Progress

    from monet_ilp.analysis.grade import grade, load_points

    inst = _instance_from(instance_path, None)
    points = load_points(path, inst)
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("grading", total=len(points) + 1)
        report = grade(inst, points, time_limit=time_limit, workers=workers,
                       progress=lambda done, total, msg: bar.update(task, completed=done, description=msg))
    table = Table(title=f"grades on {inst.name} (certified bounds, {time_limit:g} s per solve)")

    def num(x):
        return "-" if x is None else (f"{x:,.4g}" if isinstance(x, float) else f"{x:,}")

    def pct(x):
        return "-" if x is None else f"{100 * x:.2f} %"

    if "latency_bound_source" in report:
        for col in ("point", "verdict", "latency", "latency bound", "gap", "energy", "energy bound at <= latency",
                    "gap ", "solver improves"):
            table.add_column(col, justify="left" if col in ("point", "verdict") else "right")
        for r in report["points"]:
            table.add_row(r["label"], "feasible" if r["feasible"] else "INFEASIBLE", num(r["latency_cycles"]),
                          num(r["latency_bound_cycles"]), pct(r["latency_gap"]), num(r["energy_pj"]),
                          num(r.get("energy_bound_pj")), pct(r.get("energy_gap")),
                          "-" if r.get("solver_improves") is None else ("yes" if r["solver_improves"] else "no"))
    else:
        for col in ("point", "verdict", report["objective"], "bound", "gap"):
            table.add_column(col, justify="left" if col in ("point", "verdict") else "right")
        for r in report["points"]:
            table.add_row(r["label"], "feasible" if r["feasible"] else "INFEASIBLE", num(r["objective"]),
                          num(r["bound"]), pct(r["gap"]))
    show(table)
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    exit_unless(all(r["feasible"] for r in report["points"]))


# ---------------------------------------------------------------------- demo
@cli.command()
@click.option("--sram", "sram", default="3MiB", show_default=True, help="SRAM per core (store-all needs 4.6 MiB).")
@click.option("--time-limit", type=SECONDS, default=45.0, show_default=True, help="Seconds for cpsat.")
@click.option("--out-dir", type=click.Path(file_okay=False), default="monet_demo", show_default=True,
              help="Where the Gantt chart and the Pareto plot go.")
def demo(sram, time_limit, out_dir):
    """ResNet-18 (CIFAR) on a 2x2 edge_tpu: store-all, Chen sqrt(n), GA and cpsat, graded against bounds."""
    from monet_ilp.demo import run_demo
    from monet_ilp.hardware.schema import parse_size

    run_demo(console, sram_bytes=parse_size(sram, field="--sram"), time_limit=time_limit, out_dir=out_dir)


from monet_ilp.plot_commands import plot  # noqa: E402  (the group lives in its own module)

cli.add_command(plot)

from monet_ilp.batch.commands import batch  # noqa: E402  (the batch group lives in its package)

cli.add_command(batch)

from monet_ilp.ga_commands import ga, load_hint  # noqa: E402  (load_hint: solve --hint)

cli.add_command(ga)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning user errors into one line and exit status 2."""
    try:
        cli.main(args=argv, prog_name="monet-ilp", standalone_mode=False)
    except MonetError as err:
        err_console.print(f"error: {err.message}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)


if __name__ == "__main__":
    main()
