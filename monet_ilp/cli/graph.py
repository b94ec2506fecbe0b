"""``monet-ilp graph``: build, import, inspect and export training graphs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
import onnx
from rich.table import Table

from monet_ilp.cli.render import POSITIVE, err_console, import_options, show, working
from monet_ilp.errors import MonetError
from monet_ilp.graph import summarize, zoo
from monet_ilp.graph.load import load_graph
from monet_ilp.graph.node_link import save_node_link
from monet_ilp.graph.onnx_import import RE_EXPORT
from monet_ilp.units import human_bytes, human_count

if TYPE_CHECKING:
    from monet_ilp.graph import GraphSummary, TrainingGraph

__all__ = ["graph", "print_summary"]

@click.group()
def graph() -> None:
    """Build, import, inspect and export training graphs."""


def _save_graph(g: TrainingGraph, out: str | None) -> None:
    if out:
        g.save(out)
        err_console.print(f"wrote {out} ({len(g.ops)} ops, {len(g.tensors)} tensors)")


@graph.command("build")
@click.argument("model")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="Model parameter, e.g. -p batch=8 -p variant=imagenet (repeatable).")
@import_options
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the graph JSON here.")
def graph_build(model: str, params: tuple[str, ...], optimizer: str, granularity: str, dtype: str | None,
                out: str | None) -> None:
    """Build the training graph of a zoo MODEL (mlp, resnet18, vgg16, mobilenet_v2, gpt2, ...)."""
    options = zoo.parse_params(list(params))
    with working(f"building {model}"):
        g = load_graph("zoo", model, optimizer=optimizer, granularity=granularity, dtype=dtype, **options)
    _save_graph(g, out)
    print_summary(g)


@graph.command("import")
@click.argument("path", type=click.Path(dir_okay=False))
@import_options
@click.option("--allow-unknown", is_flag=True, help="Treat ops without an autodiff rule as elementwise.")
@click.option("--output", "output_name", help="The model output that feeds the loss (if several).")
@click.option("--batch", type=POSITIVE, help="Fill a symbolic batch dimension of every input.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=1x3x224x224",
              help="Static shape of an input (repeatable).")
@click.option("--loss", type=click.Choice(["cross_entropy", "mse"]), default="cross_entropy", show_default=True)
@click.option("--trainable", "trainable", multiple=True, metavar="NAME",
              help="ONNX: an initializer that is a trained weight (repeatable); the others are constants. "
                   "Default: the model's monet_ilp.trainable metadata, else every float initializer "
                   "with more than one element.")
@click.option("--source-key", help="Node-link: the key of a link's source (detected by default).")
@click.option("--target-key", help="Node-link: the key of a link's target (detected by default).")
@click.option("--id-key", default="id", show_default=True,
              help="Node-link: the key of a node's id (nodes without it are numbered by position).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the graph JSON here.")
def graph_import(path: str, optimizer: str, granularity: str, dtype: str | None, allow_unknown: bool,
                 output_name: str | None, batch: int | None, input_shapes: tuple[str, ...], loss: str,
                 trainable: tuple[str, ...], source_key: str | None, target_key: str | None, id_key: str,
                 out: str | None) -> None:
    """Import an ONNX model (.onnx) or a Checkmate/Moccasin node-link graph (.json)."""
    if Path(path).suffix.lower() == ".json":
        g = load_graph("node_link", path, source_key=source_key, target_key=target_key, id_key=id_key)
    else:
        shapes = {}
        for item in input_shapes:
            name, _, dims = item.partition("=")
            try:
                shapes[name] = [int(d) for d in dims.lower().split("x")]
            except ValueError:
                raise MonetError(f"cannot read --input-shape {item!r}", field="--input-shape",
                                 fix="write NAME=1x3x224x224") from None
        with working(f"importing {path}"):
            g = load_graph("onnx", path, optimizer=optimizer, granularity=granularity, dtype=dtype, loss=loss,
                           allow_unknown=allow_unknown, output=output_name, input_shapes=shapes, batch=batch,
                           trainable=list(trainable) if trainable else None)
        for entry in g.meta.get("unknown_ops", []):
            err_console.print(f"note: treated unknown op {entry} as elementwise (saves its inputs)")
        if g.meta.get("inference_export"):
            err_console.print(f"warning: {path} looks exported for inference ("
                              + "; ".join(g.meta["inference_export"]) + f"); {RE_EXPORT}")
    _save_graph(g, out)
    print_summary(g)


@graph.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--ops", "show_ops", is_flag=True, help="Also list every op.")
@click.option("--json", "as_json", type=click.Path(dir_okay=False), help="Write the summary as JSON here.")
def graph_show(path: str, show_ops: bool, as_json: str | None) -> None:
    """Print the summary of a graph JSON file (ops, MACs, bytes by kind, store-all peak)."""
    g = load_graph("graph", path)
    summary = print_summary(g)
    if show_ops:
        table = Table(title="ops")
        for col in ("id", "kind", "type", "MACs", "outputs"):
            table.add_column(col)
        for op in g.ops:
            table.add_row(op.id, str(op.kind), op.op_type, human_count(op.macs),
                          human_bytes(sum(g.tensor(t).bytes for t in op.outputs)))
        show(table)
    if as_json:
        Path(as_json).write_text(json.dumps(summary.as_dict(), indent=1) + "\n")


@graph.command("export")
@click.argument("source")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Zoo model parameter.")
@click.option("--onnx", "onnx_path", type=click.Path(dir_okay=False), help="Write the zoo model as ONNX.")
@click.option("--node-link", "node_link_path", type=click.Path(dir_okay=False),
              help="Write the training graph as Checkmate/Moccasin node-link JSON.")
@import_options
def graph_export(source: str, params: tuple[str, ...], onnx_path: str | None, node_link_path: str | None,
                 optimizer: str, granularity: str, dtype: str | None) -> None:
    """Export SOURCE (a zoo name or a graph JSON file) as ONNX and/or node-link JSON."""
    if not onnx_path and not node_link_path:
        raise MonetError("nothing to export", field="options", fix="pass --onnx FILE and/or --node-link FILE")
    is_file = Path(source).suffix.lower() == ".json"
    if onnx_path:
        if is_file:
            raise MonetError("ONNX export needs a zoo model name, not a graph file", field="SOURCE",
                             fix="pass a zoo name such as resnet18")
        model_params, _ = zoo.split_params(zoo.parse_params(list(params)))
        onnx.save(zoo.onnx_model(source, **model_params), onnx_path)
        err_console.print(f"wrote {onnx_path}")
    if node_link_path:
        if is_file:
            g = load_graph("graph", source)
        else:
            g = load_graph("zoo", source, optimizer=optimizer, granularity=granularity, dtype=dtype,
                           **zoo.parse_params(list(params)))
        save_node_link(g, node_link_path)
        err_console.print(f"wrote {node_link_path}")


@graph.command("random")
@click.option("--nodes", "-n", type=POSITIVE, required=True, help="Number of nodes.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the graph JSON here.")
@click.option("--node-link", "node_link_path", type=click.Path(dir_okay=False),
              help="Also write it as node-link JSON.")
def graph_random(nodes: int, seed: int, out: str | None, node_link_path: str | None) -> None:
    """Generate a random layered DAG (see formulations/random_dags.md for the process)."""
    g = load_graph("random", n=nodes, seed=seed)
    _save_graph(g, out)
    if node_link_path:
        save_node_link(g, node_link_path)
    print_summary(g)


def print_summary(g: TrainingGraph) -> GraphSummary:
    """Print what :func:`monet_ilp.graph.summarize` says of ``g``, and return it."""
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
