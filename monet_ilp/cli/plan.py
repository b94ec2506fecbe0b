"""``monet-ilp plan`` and ``monet-ilp layer-memory``: training on many devices (P4).

``plan`` searches the degrees, stages, micro-batching and recomputation of a transformer
on a cluster preset (``formulations/p4_problem.md``), prints the plan the evaluator
measured with its bound and gap, and writes it as JSON; ``layer-memory`` prints the
activation bytes of one transformer layer, term by term, with the published closed form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from monet_ilp.cli.render import POSITIVE, SECONDS, console, err_console, exit_unless, show, working
from monet_ilp.errors import MonetError
from monet_ilp.hardware.cluster import CLUSTERS, load_cluster
from monet_ilp.hardware.presets import parse_set
from monet_ilp.problems.p4.emit import EMITTERS
from monet_ilp.problems.p4.hf_config import hf_config as read_hf_config
from monet_ilp.problems.p4.instance import P4Instance, p4_instance_from_dict
from monet_ilp.problems.p4.memory import RECOMPUTE, closed_form, layer_activations
from monet_ilp.problems.p4.model import MODELS
from monet_ilp.problems.p4.search import OBJECTIVES, plan_pareto, plan_search

__all__ = ["layer_memory_cmd", "plan_cmd", "run_plan"]


def _human(nbytes: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{int(nbytes)} B"


def _params(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise MonetError(f"-p {item!r} is not KEY=VALUE", field="-p", fix="write e.g. -p preset=medium")
        out[key.strip()] = value.strip()
    unknown = sorted(set(out) - {"preset", "seq"})
    if unknown:
        raise MonetError(f"unknown model parameter {unknown[0]!r}", field=f"-p {unknown[0]}",
                         fix="use -p preset=NAME and -p seq=N")
    return out


def _zero(text: str) -> tuple[int, ...]:
    try:
        stages = tuple(sorted({int(z) for z in text.split(",") if z.strip()}))
    except ValueError:
        stages = ()
    if not stages or any(z not in (0, 1, 2, 3) for z in stages):
        raise MonetError(f"--zero {text!r}", field="--zero", fix="give ZeRO stages from 0-3, e.g. --zero 0,1")
    return stages


@click.command("plan")
@click.option("--model", type=click.Choice(sorted(MODELS)), help="Transformer family (or --hf-config).")
@click.option("--hf-config", type=click.Path(dir_okay=False),
              help="A transformers config.json (GPT-2, Llama, Mistral, Qwen2/3 families) instead of --model.")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="preset=NAME (gpt2: small/medium/large/xl; llama: 1b/8b; gpt3: 22b/175b/530b/1t), seq=N.")
@click.option("--cluster", "cluster_name", default="dgx_a100", show_default=True,
              help=f"A cluster preset ({', '.join(sorted(CLUSTERS))}) or a cluster YAML file.")
@click.option("--nodes", type=POSITIVE, default=None, help="Nodes of the cluster (default: the file's, or 1).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="A preset parameter, e.g. --set network_gbps=400 (repeatable).")
@click.option("--global-batch", type=POSITIVE, required=True, help="Sequences per iteration.")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="time", show_default=True,
              help="weighted: alpha x time / the fastest plan's time + (1 - alpha) x energy / its energy.")
@click.option("--alpha", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="The weighted objective's alpha.")
@click.option("--pareto", "pareto_points", type=click.IntRange(min=2), default=None,
              help="Instead: the time/energy Pareto front by the ε-constraint, with up to this many points.")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True, help="Seconds for the search.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the plan and its measures here.")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), help="Draw the pipeline schedule here.")
@click.option("--save-instance", type=click.Path(dir_okay=False),
              help="Also write the P4 instance (model, cluster, batch, objective) for monet-ilp solve.")
@click.option("--zero", "zero_stages", default="0,1,2,3", show_default=True,
              help="The ZeRO stages the plan may use, comma-separated (Megatron-LM runs 0 and 1).")
@click.option("--emit", type=click.Choice(sorted(EMITTERS)), default=None,
              help="Also print the plan as Megatron-LM arguments or a torchtitan TOML section set.")
@click.option("--emit-out", type=click.Path(dir_okay=False), help="Write what --emit prints to this file.")
def plan_cmd(model: str | None, hf_config: str | None, params: tuple[str, ...], cluster_name: str, nodes: int | None,
             settings: tuple[str, ...], global_batch: int, objective: str, alpha: float, pareto_points: int | None,
             time_limit: float, json_out: str | None, plot_out: str | None, save_instance: str | None,
             zero_stages: str, emit: str | None, emit_out: str | None) -> None:
    """Plan training on many devices: degrees, stages, micro-batches, recomputation (P4)."""
    options = _params(params)
    zero = _zero(zero_stages)
    if (model is None) == (hf_config is None):
        raise MonetError("give the model as --model or as --hf-config, not both and not neither",
                         field="--model", fix="e.g. --model gpt3 -p preset=175b, or --hf-config config.json")
    model_spec: dict[str, Any]
    if hf_config is not None:
        if "preset" in options:
            raise MonetError("-p preset applies to --model", field="-p preset", fix="drop it, or use --model")
        config = read_hf_config(hf_config, seq=int(options["seq"]) if "seq" in options else None)
        model_spec = config.to_dict()
    else:
        model_spec = {"family": model, **({"preset": options["preset"]} if "preset" in options else {}),
                      **({"seq": int(options["seq"])} if "seq" in options else {})}
    if cluster_name in CLUSTERS:
        cluster_spec: dict[str, Any] = {"preset": cluster_name, "nodes": nodes or 1, **parse_set(settings)}
    else:
        if settings:
            raise MonetError("--set applies to cluster presets", field="--set",
                             fix="edit the cluster file instead, or name a preset")
        spec = load_cluster(cluster_name)
        cluster_spec = spec.to_dict() if nodes is None else {**spec.to_dict(), "nodes": nodes}
    instance = p4_instance_from_dict({"model": model_spec, "cluster": cluster_spec,
                                      "global_batch": global_batch, "objective": objective, "alpha": alpha})
    if save_instance:
        Path(save_instance).write_text(json.dumps(instance.to_dict(), indent=1) + "\n")
        err_console.print(f"wrote {save_instance}")
    if pareto_points is not None:
        run_pareto(instance, pareto_points, time_limit=time_limit, json_out=json_out)
        return
    run_plan(instance, time_limit=time_limit, json_out=json_out, plot_out=plot_out, emit=emit, emit_out=emit_out,
             zero=zero)


def run_pareto(instance: P4Instance, points: int, *, time_limit: float, json_out: str | None) -> None:
    """The ε-constraint front (P4.S6): one row per non-dominated plan, each with its energy bound."""
    config, spec = instance.model, instance.cluster
    with working(f"sweeping time caps for {config.name} on {spec.name}"):
        front = plan_pareto(config, spec, global_batch=instance.global_batch, points=points, time_limit=time_limit)
    table = Table(title=f"time/energy front: {config.name} on {spec.name}, global batch {instance.global_batch}")
    for col in ("time s", "energy J", "energy bound J", "gap", "d x p x t", "b x m", "schedule", "ZeRO", "recompute"):
        table.add_column(col, justify="left" if col == "recompute" else "right")
    rows = []
    for r in front:
        plan, m = r.plan, r.metrics
        if plan is None or m is None:
            continue
        table.add_row(f"{m.time_s:.4f}", f"{m.energy_j:,.0f}", "-" if r.bound is None else f"{r.bound:,.0f}",
                      "-" if r.gap is None else f"{100 * r.gap:.2f} %",
                      f"{plan.data} x {plan.pipeline} x {plan.tensor}" + (" +SP" if plan.sequence_parallel else ""),
                      f"{plan.micro_batch} x {plan.micro_batches}", plan.schedule, str(plan.zero), plan.recompute_runs())
        rows.append(r.to_dict())
    show(table)
    if len(rows) == 1:
        console.print("one point: the fastest plan is also the most frugal", markup=False, highlight=False)
    if json_out:
        Path(json_out).write_text(json.dumps({"format": "monet-ilp/p4-pareto", "points": rows}) + "\n")
        err_console.print(f"wrote {json_out}")
    exit_unless(bool(rows))


def run_plan(instance: P4Instance, *, time_limit: float, json_out: str | None, plot_out: str | None,
             emit: str | None = None, emit_out: str | None = None, zero: tuple[int, ...] = (0, 1, 2, 3)) -> None:
    """Search, print the plan with its bound and gap, write the files, exit as every command does."""
    config, spec, global_batch, objective = instance.model, instance.cluster, instance.global_batch, instance.objective
    with working(f"planning {config.name} on {spec.name}"):
        result = plan_search(config, spec, global_batch=global_batch, objective=objective, alpha=instance.alpha,
                             time_limit=time_limit, zero=zero)
    if result.plan is None or result.metrics is None:
        console.print(f"{result.status}: no plan of the class fits ({result.stats})", markup=False)
        if json_out:
            Path(json_out).write_text(json.dumps(result.to_dict()) + "\n")
        exit_unless(False)
        return
    plan, m = result.plan, result.metrics
    table = Table(title=f"{config.name} on {spec.name} ({spec.devices} x {spec.device.name}), "
                        f"global batch {global_batch}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("status", result.status)
    table.add_row("degrees (data x pipeline x tensor)",
                  f"{plan.data} x {plan.pipeline} x {plan.tensor}" + (" + sequence" if plan.sequence_parallel else ""))
    table.add_row("micro-batch x count", f"{plan.micro_batch} x {plan.micro_batches} ({plan.schedule})")
    table.add_row("ZeRO stage", str(plan.zero))
    table.add_row("placement (innermost first)", {"tdp": "tensor, data, pipeline",
                                                  "tpd": "tensor, pipeline, data"}[plan.placement])
    table.add_row("layers per stage", " ".join(map(str, plan.stages)))
    table.add_row("recompute", plan.recompute_runs())
    for s, stage in enumerate(m.stages):
        table.add_row(f"stage {s} memory per device",
                      f"{_human(stage.memory_bytes)} of {_human(spec.device.memory_bytes)} "
                      f"({stage.in_flight} micro-batches in flight)")
    table.add_row("time per iteration", f"{m.time_s:.4f} s")
    table.add_row("  compute / communication / bubble",
                  f"{m.compute_ns / 1e9:.4f} / {m.communication_ns / 1e9:.4f} / {m.bubble_ns / 1e9:.4f} s")
    table.add_row("energy per iteration", f"{m.energy_j:,.0f} J")
    table.add_row("MFU / HFU", f"{100 * m.mfu:.1f} % / {100 * m.hfu:.1f} %")
    unit = {"time": " s", "energy": " J"}.get(objective, "")
    table.add_row(f"bound ({objective})", "-" if result.bound is None else f"{result.bound:.4f}{unit}")
    table.add_row("gap", "-" if result.gap is None else f"{100 * result.gap:.2f} %")
    table.add_row("candidates solved / pruned / infeasible",
                  f"{result.stats['solved']} / {result.stats['pruned']} / {result.stats['infeasible']} "
                  f"of {result.stats['candidates']}")
    table.add_row("search time", f"{result.seconds:.1f} s")
    show(table)
    console.print(f"bound over: {result.holds_for}", markup=False, highlight=False)
    if json_out:
        Path(json_out).write_text(json.dumps(result.to_dict()) + "\n")
        err_console.print(f"wrote {json_out}")
    if plot_out:
        from monet_ilp.plot.pipeline import pipeline  # matplotlib is heavy: loaded only for --plot

        pipeline(m, out=plot_out)
        err_console.print(f"wrote {plot_out}")
    if emit:
        emitted = EMITTERS[emit](plan, config)  # P4.E: a MonetError (exit 2) where the tool cannot say it
        console.print(emitted.text, markup=False, highlight=False, end="")
        for note in emitted.notes:
            err_console.print(f"note ({emit}): {note}", markup=False, highlight=False, soft_wrap=True)
        if emit_out:
            Path(emit_out).write_text(emitted.text)
            err_console.print(f"wrote {emit_out}")
    exit_unless(m.feasible)


@click.command("layer-memory")
@click.option("--seq", type=POSITIVE, required=True, help="Sequence length s.")
@click.option("--batch", type=POSITIVE, required=True, help="Micro-batch b.")
@click.option("--hidden", type=POSITIVE, required=True, help="Hidden size h.")
@click.option("--heads", type=POSITIVE, required=True, help="Attention heads a.")
@click.option("--tp", type=POSITIVE, default=1, show_default=True, help="Tensor-parallel degree t.")
@click.option("--sequence-parallel", is_flag=True, help="Split the norms and dropouts along the sequence.")
@click.option("--recompute", type=click.Choice(RECOMPUTE), default="none", show_default=True)
@click.option("--dtype", type=click.Choice(["fp16", "bf16"]), default="fp16", show_default=True,
              help="Activation type (2 bytes; masks 1 byte).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write {bytes, terms, ...} here.")
def layer_memory_cmd(seq: int, batch: int, hidden: int, heads: int, tp: int, sequence_parallel: bool,
                     recompute: str, dtype: str, json_out: str | None) -> None:
    """Activation bytes one transformer layer keeps for its backward pass, per device."""
    acts = layer_activations(seq=seq, batch=batch, hidden=hidden, heads=heads, tp=tp,
                             sequence_parallel=sequence_parallel, recompute=recompute)
    published = closed_form(seq=seq, batch=batch, hidden=hidden, heads=heads, tp=tp,
                            sequence_parallel=sequence_parallel, recompute=recompute)
    table = Table(title=f"one layer: s={seq} b={batch} h={hidden} a={heads} t={tp}"
                        + (" +sequence parallel" if sequence_parallel else "") + f", recompute {recompute}, {dtype}")
    table.add_column("saved tensor")
    table.add_column("bytes", justify="right")
    table.add_column("divided by t")
    for term in acts.terms:
        table.add_row(term.name, f"{term.bytes:,}", {"tensor": "yes", "sequence": "yes (sequence)"}.get(term.split,
                                                                                                     "no"))
    table.add_row("total", f"{acts.bytes:,}", _human(acts.bytes))
    show(table)
    console.print(f"Korthikanti et al. closed form: {float(published):,.0f} bytes", markup=False, highlight=False)
    if json_out:
        Path(json_out).write_text(json.dumps({
            "bytes": acts.bytes, "closed_form_bytes": float(published), "recompute": recompute, "tp": tp,
            "sequence_parallel": sequence_parallel, "dtype": dtype,
            "terms": [{"name": t.name, "bytes": t.bytes, "split": t.split} for t in acts.terms]}) + "\n")
        err_console.print(f"wrote {json_out}")
