"""``monet-ilp plan`` and ``monet-ilp layer-memory``: training on many devices (P4).

``plan`` searches the degrees, stages, micro-batching and recomputation of a transformer
on a cluster preset (``formulations/p4_problem.md``), prints the plan the evaluator
measured with its bound and gap, and writes it as JSON; ``layer-memory`` prints the
activation bytes of one transformer layer, term by term, with the published closed form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from monet_ilp.cli.render import (
    POSITIVE,
    SECONDS,
    console,
    err_console,
    exit_unless,
    import_options,
    show,
    working,
)
from monet_ilp.errors import MonetError
from monet_ilp.graph.load import FILE, load_graph
from monet_ilp.hardware.cluster import (
    CLUSTERS,
    ClusterSpec,
    cluster,
    cluster_from_dict,
    load_cluster,
)
from monet_ilp.hardware.presets import parse_set
from monet_ilp.problems.p4.emit import EMITTERS
from monet_ilp.problems.p4.hf_config import hf_config as read_hf_config
from monet_ilp.problems.p4.instance import P4Instance, p4_instance_from_dict
from monet_ilp.problems.p4.memory import RECOMPUTE, closed_form, layer_activations
from monet_ilp.problems.p4.model import MODELS
from monet_ilp.problems.p4.search import OBJECTIVES, plan_pareto, plan_search

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph

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
@click.option("--model", help=f"Transformer family ({', '.join(sorted(MODELS))}), or a zoo model (a training "
              "graph: resnet18, vit, ...; zoo:NAME for the zoo's gpt2 and llama).")
@click.option("--graph", "graph_path", type=click.Path(dir_okay=False),
              help="A training graph (training-graph JSON, node-link JSON or ONNX), planned stage by stage.")
@click.option("--hf-config", type=click.Path(dir_okay=False),
              help="A transformers config.json (GPT-2, Llama, Mistral, Qwen2/3 families) instead of --model.")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="preset=NAME (gpt2: small/medium/large/xl; llama: 1b/8b; gpt3: 22b/175b/530b/1t), seq=N.")
@click.option("--cluster", "cluster_name", default="dgx_a100", show_default=True,
              help=f"A cluster preset ({', '.join(sorted(CLUSTERS))}) or a cluster YAML file.")
@click.option("--nodes", type=POSITIVE, default=None, help="Nodes of the cluster (default: the file's, or 1).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="A preset parameter, e.g. --set network_gbps=400 (repeatable).")
@click.option("--global-batch", type=POSITIVE, default=None,
              help="Sequences (samples, for a graph) per iteration; a zoo graph's default: -p batch.")
@click.option("--hw", "hw_source", default=None,
              help="Graphs: the hardware of each device, a preset or YAML file (default: the cluster's).")
@click.option("--hw-set", "hw_sets", multiple=True, metavar="KEY=VALUE", help="Graphs: a hardware preset parameter.")
@click.option("--pipeline", type=POSITIVE, default=None, help="Graphs: the pipeline degree (default: every one).")
@click.option("--stage-backend", default="auto", show_default=True,
              help="Graphs: the P3 backend that schedules each stage's forward, backward and step.")
@click.option("--part-limit", type=SECONDS, default=None,
              help="Graphs: seconds for each stage part's P3 solve (default: a thirtieth of --time-limit).")
@import_options
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
def plan_cmd(model: str | None, graph_path: str | None, hf_config: str | None, params: tuple[str, ...],
             cluster_name: str, nodes: int | None, settings: tuple[str, ...], global_batch: int | None,
             hw_source: str | None, hw_sets: tuple[str, ...], pipeline: int | None, stage_backend: str,
             part_limit: float | None, optimizer: str, granularity: str, dtype: str | None, objective: str,
             alpha: float, pareto_points: int | None, time_limit: float, json_out: str | None, plot_out: str | None,
             save_instance: str | None, zero_stages: str, emit: str | None, emit_out: str | None) -> None:
    """Plan training on many devices: degrees, stages, micro-batches, recomputation (P4).

    A transformer (--model gpt3, --hf-config) is planned in closed form; a training graph
    (--model resnet18 -p batch=32, --graph model.onnx) stage by stage, each stage's work
    scheduled by P3 on the device's hardware (formulations/p4_problem.md, P4.G).
    """
    if graph_path is not None or (model is not None and model not in MODELS):
        if hf_config is not None:
            raise MonetError("give --hf-config for a transformer, or a graph, not both", field="--hf-config",
                             fix="drop --hf-config, or drop --model/--graph")
        refused = [(pareto_points is not None, "--pareto"), (objective != "time", "--objective"),
                   (emit is not None, "--emit"), (save_instance is not None, "--save-instance"),
                   (plot_out is not None, "--plot"), (zero_stages != "0,1,2,3", "--zero")]
        for given, flag in refused:
            if given:
                raise MonetError(f"{flag} applies to transformer plans, not to a training graph's", field=flag,
                                 fix="drop it (graph plans minimise the time per iteration, P4.G)")
        run_graph_plan(model.removeprefix("zoo:") if model else None, params, graph_path, cluster_name, nodes,
                       settings, global_batch, hw_source=hw_source, hw_sets=hw_sets, pipeline=pipeline,
                       backend=stage_backend, part_limit=part_limit, import_opts=(optimizer, granularity, dtype),
                       time_limit=time_limit, json_out=json_out)
        return
    if global_batch is None:
        raise MonetError("a transformer plan needs the global batch", field="--global-batch",
                         fix="give --global-batch N (sequences per iteration)")
    for given, flag in ((hw_source is not None or bool(hw_sets), "--hw"), (pipeline is not None, "--pipeline")):
        if given:
            raise MonetError(f"{flag} applies to training graphs", field=flag,
                             fix="drop it, or plan a graph (--model resnet18, --graph FILE)")
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
    cluster_spec = _cluster_spec(cluster_name, nodes, settings)
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


def _cluster_spec(cluster_name: str, nodes: int | None, settings: tuple[str, ...]) -> dict[str, Any]:
    if cluster_name in CLUSTERS:
        return {"preset": cluster_name, "nodes": nodes or 1, **parse_set(settings)}
    if settings:
        raise MonetError("--set applies to cluster presets", field="--set",
                         fix="edit the cluster file instead, or name a preset")
    spec = load_cluster(cluster_name)
    return spec.to_dict() if nodes is None else {**spec.to_dict(), "nodes": nodes}


def cluster_from_spec(spec: dict[str, Any]) -> ClusterSpec:
    """The cluster of :func:`_cluster_spec`'s mapping (a preset with its keywords, or every field)."""
    if "device" in spec:
        return cluster_from_dict(spec)
    params = {k: v for k, v in spec.items() if k not in ("preset", "nodes")}
    return cluster(str(spec["preset"]), nodes=int(spec["nodes"]), **params)


def run_graph_plan(model: str | None, params: tuple[str, ...], graph_path: str | None, cluster_name: str,
                   nodes: int | None, settings: tuple[str, ...], global_batch: int | None, *, hw_source: str | None,
                   hw_sets: tuple[str, ...], pipeline: int | None, backend: str, part_limit: float | None,
                   import_opts: tuple[str, str, str | None], time_limit: float, json_out: str | None) -> None:
    """P4.G: plan a training graph, print the plan with its bound and gap, write the JSON."""
    # The graph-plan search schedules with P3 (the solver libraries): loaded only for a graph.
    from monet_ilp.analysis.graph_plan import graph_batch, graph_plan_search, hardware_of
    from monet_ilp.graph import zoo  # onnx takes a second to import: only for a graph

    spec = cluster_from_spec(_cluster_spec(cluster_name, nodes, settings))
    hardware = hardware_of(spec, hw_source, hw_sets)
    optimizer, granularity, dtype = import_opts
    where = graph_path
    if model is not None:
        if graph_path is not None:
            raise MonetError("give exactly one of --model and --graph", field="--model/--graph",
                             fix="e.g. --model resnet18, or --graph g.onnx")
        values = zoo.parse_params(list(params))
        batch = values.pop("batch", None)
        if batch is not None and global_batch is not None and batch != global_batch:
            raise MonetError(f"-p batch={batch} and --global-batch {global_batch} disagree", field="-p batch",
                             fix="give the samples per iteration once")
        total = int(global_batch or batch or 1)
        zoo.build(model, batch=1, optimizer=optimizer, granularity=granularity, dtype=dtype, **values)  # checks

        def graph_at(b: int) -> TrainingGraph:
            return zoo.build(model, batch=b, optimizer=optimizer, granularity=granularity, dtype=dtype, **values)

        sizes = [b for b in range(1, total + 1) if total % b == 0]
        name = model
    else:
        if params:
            raise MonetError("-p applies to zoo models", field="-p", fix="drop it, or use --model NAME")
        assert graph_path is not None
        graph = load_graph(FILE, graph_path, optimizer=optimizer, granularity=granularity, dtype=dtype)
        b = graph_batch(graph)
        total = global_batch or b
        if total % b:
            raise MonetError(f"--global-batch {total} is not a multiple of the graph's batch {b}",
                             file=graph_path, field="--global-batch", fix=f"give a multiple of {b}")

        def graph_at(b: int) -> TrainingGraph:
            return graph

        sizes, name = [b], graph.name
    with working(f"planning {name} on {spec.name}"):
        result = graph_plan_search(graph_at, spec, hardware, global_batch=total, micro_batches=sizes,
                                   pipeline=pipeline, time_limit=time_limit, part_limit=part_limit, backend=backend,
                                   source=where, hardware_name=hw_source or spec.hardware.split(" ")[0])
    if json_out:
        Path(json_out).write_text(json.dumps(result.to_dict()) + "\n")
        err_console.print(f"wrote {json_out}")
    if result.plan is None:
        console.print(f"{result.status}: no plan of the class was found; {result.stats}", markup=False)
        exit_unless(False)
        return
    plan = result.plan
    table = Table(title=f"{name} on {spec.name} ({spec.devices} x {result.hardware}), {total} samples per iteration")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("status", result.status)
    table.add_row("devices used (data x pipeline, tensor 1)", f"{plan.devices} ({plan.data} x {plan.pipeline})")
    table.add_row("micro-batch x count", f"{plan.micro_batch} x {plan.micro_batches} ({plan.schedule})")
    for s, stage in enumerate(result.stages):
        table.add_row(f"stage {s}: units {stage['units'][0]}-{stage['units'][1]}",
                      f"{stage['first']} .. {stage['last']}, {_human(stage['memory_bytes'])} per device")
    table.add_row("time per iteration", f"{result.value:.6f} s")
    table.add_row("bound (time)", "-" if result.bound is None else f"{result.bound:.6f} s")
    table.add_row("gap", "-" if result.gap is None else f"{100 * result.gap:.2f} %")
    table.add_row("one device (P3 on one device)", "-" if result.one_device is None else f"{result.one_device:.6f} s")
    st = result.stats
    table.add_row("candidates evaluated / pruned / left", f"{st['evaluated']} / {st['pruned']} / {st['unresolved']} "
                                                          f"of {st['candidates']}")
    table.add_row("P3 schedules (verified)", str(st["p3_solves"]))
    table.add_row("search time", f"{result.seconds:.1f} s")
    show(table)
    for note in st["micro_batch_infeasible"]:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"bound over: {result.holds_for}", markup=False, highlight=False, soft_wrap=True)
    exit_unless(result.status in ("optimal", "feasible"))


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
