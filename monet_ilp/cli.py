"""The ``monet-ilp`` command line: the outermost layer, which only calls the package.

Tables go to the terminal and JSON to files.  Every error a user can cause is a
:class:`~monet_ilp.errors.MonetError`; it is printed on one line and the command
exits with status 2, without a traceback.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click
from rich.console import Console
from rich.table import Table

from monet_ilp.errors import MonetError

console = Console(width=None if sys.stdout.isatty() else 120)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)

GRANULARITY = click.Choice(["layer", "op"])
OPTIMIZER = click.Choice(["sgd", "momentum", "adam"])
DTYPE = click.Choice(["fp32", "bf16", "fp16", "int8"])


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner on stderr for steps that may take more than a second."""
    if err_console.is_terminal:
        with err_console.status(message):
            yield
    else:
        yield


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{n} B"


def human_count(n: int) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3f} {unit}"
    return str(n)


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
@click.option("--batch", type=int, help="Fill a symbolic batch dimension of every input.")
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
        console.print(table)
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
@click.option("--nodes", "-n", type=int, required=True, help="Number of nodes.")
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
    console.print(table)
    return s


# ---------------------------------------------------------------------- demo
@cli.command()
def demo():
    """Build ResNet-18 (CIFAR) as a training graph and print its summary."""
    from monet_ilp.graph import zoo

    with working("building resnet18 (cifar)"):
        g = zoo.resnet18(variant="cifar")
    _print_summary(g)


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
