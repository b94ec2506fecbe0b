"""``monet-ilp torch-checkpoint``: which modules of a PyTorch model to checkpoint, for a budget.

The model comes from a Python file (``mymodel.py:build``: a function returning the
``nn.Module``); the plan is solved over class TC (``formulations/torch_checkpoint.md``)
beside P1's optimum, printed, and written as JSON.  Needs the optional ``torch`` extra.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click
from rich.table import Table

from monet_ilp.cli.render import SECONDS, console, err_console, show, working
from monet_ilp.errors import MonetError

__all__ = ["torch_checkpoint_cmd"]


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise MonetError(f"--input-shape {text!r}", field="--input-shape", fix="write e.g. 8x3x224x224")
    return shape


def _builder(target: str) -> object:
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise MonetError(f"{target!r} is not FILE.py:FUNCTION", field="MODEL", fix="write e.g. mymodel.py:build")
    if not Path(path).is_file():
        raise MonetError("no such file", file=path, field="MODEL", fix="give an existing Python file")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 (the user's file may raise anything)
        raise MonetError(f"importing it raised {type(err).__name__}: {err}", file=path, field="MODEL",
                         fix="make the file import on its own") from None
    build = getattr(module, name, None)
    if not callable(build):
        raise MonetError(f"the file has no function {name!r}", file=path, field="MODEL",
                         fix="name the function that returns the model")
    return build()


@click.command("torch-checkpoint")
@click.argument("model")
@click.option("--input-shape", required=True, help="The example input's shape, e.g. 8x3x224x224.")
@click.option("--input-dtype", type=click.Choice(["float", "long"]), default="float", show_default=True,
              help="float: a normal sample; long: token ids below --vocab.")
@click.option("--vocab", type=click.IntRange(min=1), default=256, show_default=True, help="long inputs: ids below it.")
@click.option("--budget", type=float, default=0.5, show_default=True,
              help="A fraction of the store-all peak of live activation memory.")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True, help="Seconds for each solve.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the plan as JSON here.")
def torch_checkpoint_cmd(model: str, input_shape: str, input_dtype: str, vocab: int, budget: float,
                         time_limit: float, out: str | None) -> None:
    """Choose the modules of a PyTorch model to checkpoint for a memory budget (torch extra)."""
    try:
        import torch
    except ImportError:
        raise MonetError("torch is not installed", field="torch", fix="pip install 'monet-ilp[torch]'") from None
    from monet_ilp.torch import checkpoint  # the exporter and the solvers: loaded only here

    shape = _shape(input_shape)
    net = _builder(model)
    if not isinstance(net, torch.nn.Module):
        raise MonetError(f"{model} returned a {type(net).__name__}, not an nn.Module", field="MODEL",
                         fix="return the model from the function")
    example = torch.randn(shape) if input_dtype == "float" else torch.randint(0, vocab, shape)
    with working(f"exporting and solving {model}"):
        try:
            net(example)
        except Exception as err:  # noqa: BLE001 (the user's model may raise anything)
            raise MonetError(f"the model does not run on an input of shape {list(shape)} ({type(err).__name__}: "
                             f"{str(err).splitlines()[0] if str(err) else ''})", field="--input-shape",
                             fix="give the shape the model takes") from None
        _, plan = checkpoint(net, (example,), budget, time_limit=time_limit)
    table = Table(title=f"checkpointing {model} at {budget:g} of the store-all peak")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("status (over class TC)", plan.status)
    table.add_row("checkpointed", " ".join(plan.checkpointed) or "(nothing)")
    table.add_row("predicted peak / budget / store-all (bytes)",
                  f"{plan.predicted_peak_bytes:,} / {plan.budget_bytes:,} / {plan.store_all_peak_bytes:,}")
    table.add_row("predicted recomputed FLOPs", f"{plan.predicted_recompute_flops:,}")
    table.add_row("compute cycles (bound over TC)",
                  f"{plan.compute_cycles:,} ({'-' if plan.bound_cycles is None else f'{plan.bound_cycles:,.0f}'})")
    table.add_row("P1 over every schedule (auto): cycles (bound)",
                  f"{plan.unrestricted_status}: {plan.unrestricted_cycles} ({plan.unrestricted_bound})")
    show(table)
    if out:
        plan.save(out)
        err_console.print(f"wrote {out}")
    console.print(f"bound over: {plan.holds_for}", markup=False, highlight=False, soft_wrap=True)
