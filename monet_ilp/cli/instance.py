"""``monet-ilp instance``: build problem instances (graph + hardware + budget + objective)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.table import Table

from monet_ilp.cli.hardware import load_hw
from monet_ilp.cli.render import POSITIVE, err_console, import_options, show, working
from monet_ilp.errors import MonetError
from monet_ilp.graph.fusion import load_fusion
from monet_ilp.graph.load import FILE, load_graph
from monet_ilp.hardware.schema import parse_size
from monet_ilp.instance import Problem
from monet_ilp.make import make_instance, parse_budget
from monet_ilp.problems.p3.data import p3_data
from monet_ilp.units import human_bytes

if TYPE_CHECKING:
    from monet_ilp.graph import Tensor, TrainingGraph
    from monet_ilp.instance import Instance

__all__ = ["budget_notes", "graph_from", "instance"]


@click.group()
def instance() -> None:
    """Build problem instances (graph + hardware + budget + objective)."""


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
@click.option("--fusion", "fusion_path", type=click.Path(dir_okay=False),
              help="A layer-fusion plan (JSON or YAML, formulations/fusion.md): the stacks run tile by tile.")
@import_options
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="Write the instance JSON here.")
def instance_make(model: str | None, params: tuple[str, ...], graph_path: str | None, hw_source: str | None,
                  sets: tuple[str, ...], problem: str | None, budget: str | None, sram_budget: str | None,
                  objective: str | None, alpha: float, core: str | None, offload: str, runtime_limit: int | None,
                  fusion_path: str | None, optimizer: str, granularity: str, dtype: str | None,
                  out: str) -> None:
    """Make an instance from a model (zoo or file), a hardware description and a budget."""
    g = graph_from(model, params, graph_path, optimizer, granularity, dtype)
    fusion = load_fusion(fusion_path) if fusion_path else None
    hardware = load_hw(hw_source, sets) if hw_source else None
    sram = parse_size(sram_budget, field="--sram-budget") if sram_budget else None
    problem = problem or ("P3" if sram is not None else "P1")
    with working("costing ops"):
        inst = make_instance(g, hardware, problem=problem, budget=parse_budget(budget, field="--budget"),
                             sram_budget=sram, objective=objective, core=core, offload=offload, alpha=alpha,
                             runtime_limit_cycles=runtime_limit, fusion=fusion)
    inst.save(out)
    table = Table(title=f"instance {inst.name}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("problem / objective", f"{inst.problem} / {inst.objective}")
    table.add_row("ops / tensors", f"{len(inst.graph.ops)} / {len(inst.graph.tensors)}")
    if fusion is not None and fusion.fused:
        table.add_row("fused stacks", "; ".join(f"{len(s.ops)} ops x {s.tiles} tiles ({s.axis})"
                                                for s in fusion.fused))
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


def _graph_inputs(g: TrainingGraph) -> list[Tensor]:
    """The graph's input activations (they show the batch a model was built with)."""
    return [t for t in g.tensors if t.producer is None and not t.persistent and t.consumers]


def budget_notes(inst: Instance) -> list[str]:
    """What a user should know about the instance's memory budget before solving it.

    P1/P2: whether the budget binds at all.  P3: whether some op cannot fit any core's
    SRAM (then no schedule exists), or whether every core could hold the store-all peak.
    The notes name the options that change the budget.
    """
    peak = inst.meta.get("store_all_peak_bytes")
    if inst.problem is not Problem.P3:
        budget = inst.budget_bytes
        if peak is not None and budget >= peak:
            return [(f"the budget ({human_bytes(budget)}) is at least the store-all activation peak "
                     f"({human_bytes(peak)}): it does not bind, and store-all is optimal; "
                     "give a fraction below 1 (e.g. --budget 0.8) to make it bind")]
        return []
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
        return [(f"every core's SRAM holds the store-all peak and every weight "
                 f"({human_bytes(peak + inst.meta.get('persistent_bytes', 0))}): the SRAM budget "
                 "does not bind; give a smaller --sram-budget to make it bind")]
    return []


def graph_from(model: str | None, params: tuple[str, ...], graph_path: str | None, optimizer: str,
               granularity: str, dtype: str | None) -> TrainingGraph:
    """The graph of ``--model NAME -p KEY=VALUE`` or of ``--graph FILE`` (exactly one of them)."""
    if bool(model) == bool(graph_path):
        raise MonetError("give exactly one of --model and --graph", field="--model/--graph",
                         fix="e.g. --model resnet18, or --graph g.json")
    if model:
        from monet_ilp.graph import zoo  # onnx takes a second to import: only for --model

        with working(f"building {model}"):
            return load_graph("zoo", model, optimizer=optimizer, granularity=granularity, dtype=dtype,
                              **zoo.parse_params(list(params)))
    return load_graph(FILE, graph_path, optimizer=optimizer, granularity=granularity, dtype=dtype)
