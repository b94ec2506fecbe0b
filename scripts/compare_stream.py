"""Layer fusion side by side with Stream: layer-by-layer and fused inference, in each tool; a table and JSON.

Stream (KU Leuven's layer-fused multi-core scheduler that MONET builds on; the optional
``stream`` extra) and monet-ilp schedule the same inference on a comparable quad-core:
the ``edge_tpu`` preset's 2 x 2 PEs with 3 MiB of SRAM each.  For each workload and
tool the table gives the layer-by-layer latency and energy, the fused latency and
energy, and the ratios fused / layer by layer.  The absolute figures come from
different cost models (ours, CM.C1-C11; Stream's ZigZag per computation node and its
own scheduler); the ratios are the comparison.

monet-ilp's rows (``heuristic:memory_aware`` throughout, verified by the evaluator):

- ``search``: the best plan of :func:`monet_ilp.analysis.fusion.fusion_search`
  (latency objective, two finalists);
- ``chains x 4``: every chain fused whole in 4 tiles (``plan_of(chains(graph), 4)``).
  Where a stack's staged weights do not fit one SRAM (ResNet-18's ``layer4``), the plan
  cannot be scheduled; the row says so, and ``stream rule x 4`` (each chain cut where
  its weights would overflow the SRAM, :func:`~monet_ilp.analysis.fusion.stream_rule`)
  stands beside it.

Stream's rows run its whole flow (its ZigZag per unique computation node, LOMA, then its
list scheduler) with a fixed layer-to-core allocation (round robin over the MAC layers,
as its GA would otherwise search one; ``--stream-ga`` runs the GA), once with each of
its scheduler's candidate selections: ``memory`` (the ready node of the deepest layer
first, its default) and ``latency`` (the node that can start first).  0.0.8's ``latency``
selection fails on ResNet-18's fused graphs (a residual Add's output is freed before its
second consumer reads it) and on GPT-2's under some GA allocations; the table says so.
With ``--stream-ga`` the allocation is the lowest-latency one of the GA's hall of fame
(seeded).  The configurations:

- ``every layer x 4``: Stream's own fused mode, every layer cut into 4 computation
  nodes along OY (feature-map rows, token blocks: ``hint_loops=[("OY", 4)]``);
- the monet-ilp plans above, mirrored: each layer takes the tile count of its stack
  (Stream's ``cn_define_mode`` 3 with layer cut-offs); a layer outside any stack is one
  computation node, layer by layer.

The workloads:

- ResNet-18 (CIFAR, batch 1): Stream reads :func:`monet_ilp.graph.zoo.resnet18_onnx`
  (shape-inferred), the ONNX that our graph is imported from.
- GPT-2 tiny (batch 4, 64 tokens): Stream 0.0.8's ONNX MatMul parser takes 2-D operands
  only, so the decoder is described to it as its user-defined workload
  (:func:`gpt2_layers`), one layer per matrix product of our graph: the projections,
  per-head Q, K, V (heads as Stream's G; a head's 32 columns fill half of the 64 units,
  where our one 384-wide product fills them all), the per-head scores and context
  products, the MLP and the LM head.  Layer norms, GELU and softmax (free nodes in
  Stream's ONNX path) and the residual additions (a SIMD node each there) are left out.

Stream 0.0.8 (the last release on PyPI) imports ZigZag 2's API, so it cannot live beside
the ``zigzag`` extra's ZigZag 3.9.1; it runs in a venv of its own (the ``stream`` extra's
pins), driven through ``scripts/compare_stream_run.py``:

    python -m venv /path/streamvenv
    /path/streamvenv/bin/pip install "stream-dse==0.0.8" "zigzag-dse==2.4.6" "numpy<2" \
        "onnx>=1.16,<1.17" "pandas>=2.2,<2.3" plotly
    python scripts/compare_stream.py --stream-python /path/streamvenv/bin/python \
        --out results/compare_stream.json

(``numpy<2``: ZigZag 2.4.6's stall arithmetic wraps around in NumPy 2's unsigned
integers and gives latencies below the ideal.)  The whole run takes about 4 minutes on
one core, nearly all of it Stream's LOMA per unique computation node; ``--workdir``
keeps Stream's per-node cost caches, and a rerun with it takes seconds on Stream's side.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
from rich.console import Console
from rich.table import Table

from monet_ilp.analysis.fusion import dram_bytes, fusion_search, stream_rule
from monet_ilp.errors import MonetError
from monet_ilp.graph import TrainingGraph, zoo
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.fusion import FusionPlan, chains, plan_of
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.solve import Result, Status, solve

if TYPE_CHECKING:
    from monet_ilp.evaluate import Metrics
    from monet_ilp.hardware.model import Hardware
    from monet_ilp.instance import Instance

SRAM_BYTES = 3 * 2**20
BACKEND = "heuristic:memory_aware"
TILES = 4
#: Stream's scheduler candidate selections.
SELECTIONS = ("memory", "latency")
RUNNER = Path(__file__).resolve().with_name("compare_stream_run.py")

MODELS: dict[str, Callable[[], TrainingGraph]] = {
    "resnet18": lambda: inference_graph(zoo.resnet18(batch=1)),
    "gpt2": lambda: inference_graph(zoo.gpt2(preset="tiny")),
}


def hardware() -> Hardware:
    """The quad-core both tools describe: the ``edge_tpu`` preset's 2 x 2 PEs."""
    return preset("edge_tpu", n_pe_x=2, n_pe_y=2)


# ===================================================================== the accelerator, to Stream
def stream_description(hw: Hardware, *, sram_bytes: int = SRAM_BYTES, bits: int = 32) -> dict[str, Any]:
    """``hw`` as the plain data ``compare_stream_run.build_accelerator`` makes Stream's accelerator of.

    Each core keeps its U x L MAC array, pJ per MAC, register file, SRAM port (bytes per
    cycle) and pJ per byte, with ``sram_bytes`` of SRAM (our instances' budget); each
    core-to-core link keeps its bandwidth and pJ per byte; the DRAM keeps its size,
    bandwidth and pJ per byte, behind one link all cores share (our ``dram_bus``).
    ``bits`` is the operands' width (our graph's dtype).
    """
    index = {core.sram: i for i, core in enumerate(hw.cores)}
    cores = [{
        "id": i, "name": core.id, "simd_units": core.simd_units, "lanes": core.lanes, "bits": bits,
        "mac_pj": float(core.mac_pj), "rf_bytes": core.rf_bytes, "sram_bytes": sram_bytes,
        "sram_bandwidth_bytes_per_cycle": float(core.sram_bandwidth_bytes_per_cycle),
        "sram_read_pj_per_byte": float(core.sram_read_pj_per_byte),
        "sram_write_pj_per_byte": float(core.sram_write_pj_per_byte),
        "vector_ops_per_cycle": core.vector_ops_per_cycle, "vector_op_pj": float(core.vector_op_pj),
    } for i, core in enumerate(hw.cores)]
    dram = hw.dram
    if dram is None:
        raise MonetError(f"hardware {hw.name!r} has no DRAM", field="dram", fix="describe a dram memory")
    mesh, bus = [], None
    for link in hw.links:
        if dram.id in link.endpoints:
            bus = link
        elif len(link.endpoints) == 2 and all(e in index for e in link.endpoints):
            mesh.append({"between": [index[e] for e in link.endpoints],
                         "bandwidth_bytes_per_cycle": float(link.bandwidth_bytes_per_cycle),
                         "pj_per_byte": float(link.pj_per_byte)})
    if bus is None:
        raise MonetError(f"hardware {hw.name!r} has no link to its DRAM", field="links",
                         fix="connect the cores' SRAMs to the dram")
    return {
        "name": hw.name, "cores": cores, "mesh": mesh,
        "dram": {"capacity_bytes": dram.capacity_bytes,
                 "bandwidth_bytes_per_cycle": float(min(dram.bandwidth_bytes_per_cycle, bus.bandwidth_bytes_per_cycle)),
                 "read_pj_per_byte": float(dram.read_pj_per_byte), "write_pj_per_byte": float(dram.write_pj_per_byte),
                 "bus_pj_per_byte": float(bus.pj_per_byte)},
    }


# ===================================================================== the workloads, to Stream
#: ONNX operators Stream 0.0.8 makes computation nodes of (others are free "dummy" nodes).
_STREAM_COMPUTE = ("Conv", "Gemm", "MatMul", "Add", "Mul", "MaxPool", "AveragePool", "GlobalAveragePool",
                   "GlobalMaxPool")
_SIMD, _POOL = ("Add", "Mul"), ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")


def resnet_workload(graph: TrainingGraph, workdir: Path, cores: int) -> dict[str, Any]:
    """ResNet-18's ONNX for Stream (shape-inferred), its mapping, and each computation node's op.

    MAC layers go round robin over the ``cores`` compute cores; Adds to the SIMD core and
    pooling to the pooling core (ids ``cores`` and ``cores + 1``).
    """
    model = onnx.shape_inference.infer_shapes(zoo.resnet18_onnx("cifar", batch=1))
    path = workdir / "resnet18_cifar_b1.onnx"
    onnx.save(model, str(path))
    op_of_member = {m: op.id for op in graph.ops for m in op.members}
    mapping: dict[str, Any] = {"default": {"core_allocation": 0}}
    layers: dict[int, str] = {}
    mac = 0
    for i, node in enumerate(model.graph.node):
        if node.op_type not in _STREAM_COMPUTE:
            continue
        layers[i] = op_of_member[node.name]
        if node.op_type in _SIMD:
            mapping[node.name] = {"core_allocation": cores}
        elif node.op_type in _POOL:
            mapping[node.name] = {"core_allocation": cores + 1}
        else:
            mapping[node.name] = {"core_allocation": mac % cores}
            mac += 1
    return {"onnx": str(path), "mapping": mapping, "op_of_layer": layers}


def gpt2_layers(graph: TrainingGraph, cores: int) -> dict[str, Any]:
    """GPT-2 as Stream's user-defined workload: a layer per matrix product of ``graph``.

    Tokens are Stream's OY (the axis it tiles, as our rows axis), batch its B, heads its
    G; K is a product's output width (on the U units) and C its reduction (on the L
    lanes), as in CM.C3c.  Q, K and V are three layers (a head's width on K), so that the
    per-head products read them with the heads as G.  MAC layers go round robin over the
    compute cores (each layer's ``operator_type`` is unique: Stream maps by it).
    """
    layers: dict[int, dict[str, Any]] = {}
    op_of_layer: dict[int, str] = {}
    mapping: dict[str, Any] = {"default": {"core_allocation": 0}}
    # Heads: the per-head products' batch over the projections' (B x heads against B).
    products = {op.id.rsplit(".", 1)[-1]: op.dims.get("B", 1) for op in graph.ops if op.macs}
    heads = max(1, products.get("scores", 1) // products.get("c_attn", 1))
    last: int | None = None  # the layer whose output the next block reads

    def add(op_id: str, name: str, equation: str, dims: dict[str, int], sources: dict[str, list[int]],
            links: dict[str, str]) -> int:
        lid = len(layers)
        layers[lid] = {
            "operator_type": name, "equation": equation, "dimension_relations": [], "loop_dim_size": dims,
            "operand_precision": {op: 8 for op in (*links, "O_final")},  # set to the graph's bits by the runner
            "operand_source": {op: src for op, src in sources.items()},
            "constant_operands": [op for op, src in sources.items() if not src],
            "memory_operand_links": links,
        }
        mapping[name] = {"core_allocation": lid % cores}
        op_of_layer[lid] = op_id
        return lid

    weights = {"O": "O", "W": "I2", "I": "I1"}
    pair = {"O": "O", "B": "I2", "A": "I1"}
    qkv: dict[str, int] = {}
    context = scores = None
    for op in graph.ops:
        d = op.dims
        if not op.macs:
            continue
        b, m, n, k = d.get("B", 1), d["M"], d["N"], d["K"]
        short = op.id.removeprefix("F:")
        src = [] if last is None else [last]
        if short.endswith("attn.c_attn"):
            width = n // 3 // heads
            for part in ("q", "k", "v"):
                qkv[part] = add(op.id, f"{short}.{part}", "O[b][g][oy][k]+=W[g][k][c]*I[b][oy][c]",
                                {"B": b, "G": heads, "OY": m, "K": width, "C": k}, {"W": [], "I": src}, weights)
        elif short.endswith("attn.scores"):
            per = b // heads
            scores = add(op.id, short, "O[b][g][oy][k]+=A[b][g][oy][c]*B[b][g][k][c]",
                         {"B": per, "G": heads, "OY": m, "K": n, "C": k},
                         {"A": [qkv["q"]], "B": [qkv["k"]]}, pair)
        elif short.endswith("attn.context"):
            per = b // heads
            context = add(op.id, short, "O[b][g][oy][k]+=A[b][g][oy][c]*B[b][g][c][k]",
                          {"B": per, "G": heads, "OY": m, "K": n, "C": k},
                          {"A": [scores], "B": [qkv["v"]]}, pair)
        elif short.endswith("attn.c_proj"):
            width = k // heads
            last = add(op.id, short, "O[b][oy][k]+=W[k][g][c]*I[b][g][oy][c]",
                       {"B": b, "OY": m, "K": n, "G": heads, "C": width}, {"W": [], "I": [context]}, weights)
        else:  # the MLP's products and the LM head: tokens x features
            last = add(op.id, short, "O[b][oy][k]+=W[k][c]*I[b][oy][c]", {"B": b, "OY": m, "K": n, "C": k},
                       {"W": [], "I": src}, weights)
    return {"layers": layers, "mapping": mapping, "op_of_layer": op_of_layer}


def hints_for(plan: FusionPlan, op_of_layer: dict[int, str]) -> dict[str, Any]:
    """Stream's CN granularity that mirrors ``plan``: each layer in its stack's tiles along OY.

    Consecutive layers with the same tile count share a range of ``cn_define_mode`` 3.
    """
    tiles = {op: s.tiles for s in plan.fused for op in s.ops}
    per_range: list[list[list[Any]]] = []
    cutoffs: list[int] = []
    for lid in sorted(op_of_layer):
        t = tiles.get(op_of_layer[lid], 1)
        loops = [["OY", t]] if t > 1 else []
        if not per_range:
            per_range.append(loops)
        elif loops != per_range[-1]:
            per_range.append(loops)
            cutoffs.append(lid)
    if len(per_range) == 1:
        return {"loops": per_range[0]}
    return {"per_range": per_range, "cutoffs": cutoffs}


# ===================================================================== monet-ilp's side
def _row(result: Result, instance: Instance, seconds: float, plan: FusionPlan, **extra: Any) -> dict[str, Any]:
    metrics: Metrics | None = result.metrics
    if metrics is None or result.schedule is None:
        return {"error": f"no schedule ({result.status})", "plan": _plan_summary(plan), **extra}
    e = metrics.energy
    schedule = result.schedule
    size = {t.id: t for t in instance.graph.tensors}
    written = read = 0  # activations (tiles) through DRAM: our transfers, not the weights the runs stream
    for t in getattr(schedule, "transfers", ()):
        if size[t.tensor].persistent:
            continue
        if t.dst == "dram":
            written += size[t.tensor].bytes
        elif t.src == "dram":
            read += size[t.tensor].bytes
    return {"latency_cycles": metrics.latency_cycles, "energy_pj": e.total_pj,
            "energy": {"compute_pj": e.compute_pj, "sram_pj": e.sram_pj, "dram_pj": e.dram_pj, "link_pj": e.link_pj},
            "dram_bytes": dram_bytes(instance, schedule),  # type: ignore[arg-type]
            "activation_dram_written_bytes": written, "activation_dram_read_bytes": read,
            "peak_sram_bytes": max(v for k, v in metrics.peak_bytes.items() if k != "dram"),
            "plan": _plan_summary(plan), "seconds": round(seconds, 2), **extra}


def _plan_summary(plan: FusionPlan) -> str:
    if not plan.fused:
        return "layer by layer"
    return "; ".join(f"{s.ops[0].removeprefix('F:')}..{s.ops[-1].removeprefix('F:')} ({len(s.ops)} ops) x {s.tiles}"
                     for s in plan.fused)


def monet_side(graph: TrainingGraph, hw: Hardware, sram_bytes: int) -> tuple[dict[str, Any], dict[str, FusionPlan]]:
    """monet-ilp's layer-by-layer and fused rows, and the plans Stream mirrors."""
    began = time.perf_counter()
    search = fusion_search(graph, hw, sram_budget=sram_bytes, objective="latency", backend=BACKEND,
                           screen_backend=BACKEND, finalists=2, workers=1)
    seconds = time.perf_counter() - began
    lbl = search.layer_by_layer
    fused = [r for r in search.rows if r.plan.fused and r.result.status in (Status.OPTIMAL, Status.FEASIBLE)]
    rows: dict[str, Any] = {"layer by layer": _row(lbl.result, lbl.instance, seconds, lbl.plan)}
    plans: dict[str, FusionPlan] = {}
    if fused:
        best = min(fused, key=lambda r: r.objective)
        rows["search"] = _row(best.result, best.instance, seconds, best.plan, screened=search.screened)
        plans["search"] = best.plan
    def solved(name: str, plan: FusionPlan) -> None:
        plans[name] = plan
        began = time.perf_counter()
        try:
            inst = make_instance(graph, hw, problem="P3", objective="latency", sram_budget=sram_bytes, fusion=plan)
            rows[name] = _row(solve(inst, BACKEND, workers=1), inst, time.perf_counter() - began, plan)
        except MonetError as exc:  # a stack whose staged weights or tiles fit no SRAM
            rows[name] = {"error": str(exc), "plan": _plan_summary(plan)}

    solved(f"chains x {TILES}", plan_of(chains(graph), TILES))
    if "error" in rows[f"chains x {TILES}"]:  # Stream's rule stands in where the chains do not fit
        solved(f"stream rule x {TILES}", stream_rule(graph, sram_bytes, TILES))
    return rows, plans


# ===================================================================== Stream's side
def stream_python(given: str | None) -> str:
    """The interpreter that has Stream: ``given``, ``$MONET_STREAM_PYTHON``, or this one."""
    if given:
        return given
    if os.environ.get("MONET_STREAM_PYTHON"):
        return os.environ["MONET_STREAM_PYTHON"]
    if importlib.util.find_spec("stream") is not None:
        return sys.executable
    raise SystemExit("Stream (stream-dse 0.0.8) is not importable here: give --stream-python "
                     "(a venv with it; see this script's docstring) or set MONET_STREAM_PYTHON")


def run_stream_jobs(python: str, accelerator: dict[str, Any], runs: list[dict[str, Any]], workdir: Path,
                    timeout: float, verbose: bool) -> dict[str, Any]:
    """Run ``runs`` in Stream's interpreter; its results by run name."""
    job, out = workdir / "stream_job.json", workdir / "stream_result.json"
    job.write_text(json.dumps({"accelerator": accelerator, "runs": runs}))
    command = [python, "-W", "ignore", str(RUNNER), str(job), str(out)] + (["--verbose"] if verbose else [])
    try:
        done = subprocess.run(command, capture_output=not verbose, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"Stream's runs took more than {timeout:g} s (--stream-timeout): {' '.join(command)}") from None
    if done.returncode != 0 or not out.exists():
        tail = (done.stderr or "")[-2000:] if not verbose else ""
        raise SystemExit(f"Stream's runner failed (exit {done.returncode}): {' '.join(command)}\n{tail}")
    result = json.loads(out.read_text())
    return {"version": result["stream_version"], "runs": {r["name"]: r for r in result["runs"]}}


def stream_runs(name: str, work: dict[str, Any], plans: dict[str, FusionPlan], accelerator: dict[str, Any],
                ga: Sequence[int] | None, selections: Sequence[str]) -> list[dict[str, Any]]:
    """Stream's layer-by-layer run, its own fused mode, and the monet-ilp plans mirrored, with
    each scheduler candidate selection in ``selections``."""
    cores = len(accelerator["cores"])
    base: dict[str, Any] = {"accelerator": accelerator, "bits": accelerator["cores"][0]["bits"],
                            "mapping": work["mapping"]}
    if "onnx" in work:
        base["onnx"] = work["onnx"]
    else:
        base["layers"] = work["layers"]
    if ga:
        base["ga"] = list(ga)
        for entry in base["mapping"].values():
            if isinstance(entry["core_allocation"], int) and entry["core_allocation"] < cores:
                entry["core_allocation"] = list(range(cores))
    configs: list[tuple[str, dict[str, Any]]] = [("layer by layer", {"loops": []}),
                                                 (f"every layer x {TILES}", {"loops": [["OY", TILES]]})]
    configs += [(plan_name, hints_for(plan, work["op_of_layer"])) for plan_name, plan in plans.items()]
    runs = []
    for selection in selections:
        for config, hints in configs:
            run = {**base, "name": f"{name}/{_stream_tool(selection)}/{config}", "hints": hints,
                   "candidate_selection": selection}
            # Stream's per-CN cost cache, named for everything its CNs' costs depend on.
            key = json.dumps({k: v for k, v in run.items() if k not in ("name", "candidate_selection")},
                             sort_keys=True)
            run["cache"] = f"{name}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"
            runs.append(run)
    return runs


def _stream_tool(selection: str) -> str:
    return f"Stream ({selection})"


# ===================================================================== the table
def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workload, tool and fused configuration, with its tool's layer-by-layer figures."""
    out = []
    for workload, res in results["workloads"].items():
        for tool in ("monet-ilp", *(_stream_tool(x) for x in SELECTIONS)):
            side = res.get(tool)
            if side is None:
                continue
            lbl = side.get("layer by layer", {})
            for config, row in side.items():
                if config == "layer by layer":
                    continue
                out.append({
                    "workload": workload, "tool": tool, "fused": config,
                    "lbl_latency_cycles": lbl.get("latency_cycles"), "lbl_energy_pj": lbl.get("energy_pj"),
                    "fused_latency_cycles": row.get("latency_cycles"), "fused_energy_pj": row.get("energy_pj"),
                    "latency_ratio": _ratio(row.get("latency_cycles"), lbl.get("latency_cycles")),
                    "energy_ratio": _ratio(row.get("energy_pj"), lbl.get("energy_pj")),
                    "error": row.get("error"),
                })
    return out


def print_table(rows: list[dict[str, Any]], notes: list[str], console: Console) -> None:
    table = Table(title=f"Inference on the edge_tpu 2x2 ({SRAM_BYTES // 2**20} MiB SRAM per core): "
                        "layer by layer (lbl) and fused, in each tool (cycles, uJ)")
    for col in ("workload", "tool", "fused", "lbl cycles", "lbl uJ", "fused cycles", "fused uJ",
                "latency fused/lbl", "energy fused/lbl"):
        table.add_column(col, justify="right" if col[0] in "lf" and col != "fused" else "left")
    fmt = lambda v, f: "-" if v is None else f.format(v)
    for r in rows:
        if r["error"]:
            table.add_row(r["workload"], r["tool"], r["fused"], fmt(r["lbl_latency_cycles"], "{:,.0f}"),
                          fmt(r["lbl_energy_pj"] and r["lbl_energy_pj"] / 1e6, "{:,.1f}"),
                          f"[red]{r['error'][:60]}[/red]", "", "", "")
            continue
        table.add_row(r["workload"], r["tool"], r["fused"], fmt(r["lbl_latency_cycles"], "{:,.0f}"),
                      fmt(r["lbl_energy_pj"] / 1e6, "{:,.1f}"), fmt(r["fused_latency_cycles"], "{:,.0f}"),
                      fmt(r["fused_energy_pj"] / 1e6, "{:,.1f}"), fmt(r["latency_ratio"], "{:.3f}"),
                      fmt(r["energy_ratio"], "{:.3f}"))
    console.print(table)
    for note in notes:
        console.print(f"- {note}")


# ===================================================================== main
def compare(models: list[str], *, python: str, workdir: Path, ga: Sequence[int] | None, selections: Sequence[str],
            timeout: float, verbose: bool, console: Console) -> dict[str, Any]:
    hw = hardware()
    cores = len(hw.cores)
    results: dict[str, Any] = {"hardware": hw.name, "sram_bytes_per_core": SRAM_BYTES, "backend": BACKEND,
                               "tiles": TILES, "workloads": {}}
    runs: list[dict[str, Any]] = []
    accelerator: dict[str, Any] = {}
    for name in models:
        graph = MODELS[name]()
        first = next(op for op in graph.ops if op.macs)  # its output's dtype is the model's (not the token ids')
        bits = 8 * graph.tensor(first.outputs[0]).dtype.itemsize
        accelerator = stream_description(hw, sram_bytes=SRAM_BYTES, bits=bits)
        console.print(f"{name}: monet-ilp ({len(graph.ops)} ops) ...")
        monet, plans = monet_side(graph, hw, SRAM_BYTES)
        results["workloads"][name] = {"graph": graph.name, "ops": len(graph.ops), "monet-ilp": monet,
                                      "mirrored_plans": {k: _plan_summary(p) for k, p in plans.items()}}
        work = resnet_workload(graph, workdir, cores) if name == "resnet18" else gpt2_layers(graph, cores)
        runs += stream_runs(name, work, plans, accelerator, ga, selections)
    results["stream_accelerator"] = accelerator
    console.print(f"Stream: {len(runs)} runs in {python} ...")
    began = time.perf_counter()
    stream = run_stream_jobs(python, accelerator, runs, workdir, timeout, verbose)
    results["stream_version"] = stream["version"]
    results["stream_seconds"] = round(time.perf_counter() - began, 1)
    for run in runs:
        workload, tool, config = run["name"].split("/", 2)
        got = dict(stream["runs"].get(run["name"], {"error": "not run"}))
        got["hints"] = run["hints"]
        results["workloads"][workload].setdefault(tool, {})[config] = got
    results["rows"] = table_rows(results)
    results["notes"] = notes_for(results)
    return results


def notes_for(results: dict[str, Any]) -> list[str]:
    """What differs between the tools, and the figures that show it."""
    notes = [
        ("Granularity: monet-ilp fuses stacks of consecutive ops, tile by tile, and schedules tile ops "
        "(one op's tiles may run on different cores); Stream cuts each layer into computation nodes (CNs) and "
        "list-schedules them on the layer's one core, across the whole graph at once (no stack boundary)."),
        ("Memory: monet-ilp stages a fused stack's weights in SRAM and refuses a stack whose weights or tiles "
        "cannot fit; Stream fetches each CN's weights when they are not already on its core and, for a layer "
        "whose operands exceed the SRAM, streams them from DRAM during each CN, so every tile re-reads them."),
        ("Scheduling: Stream's memory selection runs the ready CN of the deepest layer first (depth first, to "
         "free memory), which limits how far the layers' tiles overlap on different cores; its latency selection "
         "starts whichever CN can start first and pipelines tiles across cores, as our list scheduler does."),
        ("Cost per op: ours is CM.C1-C11 (the MAC array's cycles plus SRAM and DRAM terms); Stream's is ZigZag 2's "
        "latency-optimal temporal mapping of each CN behind the U x L array, whose SRAM-port stalls make its "
        "layer-by-layer latency higher than ours.  BatchNorm, ReLU, softmax, layer norm and GELU are free in "
        "Stream; ours charges their vector ops."),
    ]
    for workload, res in results["workloads"].items():
        for tool in (_stream_tool(x) for x in SELECTIONS):
            stream = res.get(tool, {})
            lbl = stream.get("layer by layer", {})
            for config, row in stream.items():
                if config == "layer by layer" or "error" in row or "error" in lbl:
                    continue
                dram = row["energy"]["offchip_memory_pj"] + row["energy"]["eviction_memory_pj"]
                dram_lbl = lbl["energy"]["offchip_memory_pj"] + lbl["energy"]["eviction_memory_pj"]
                layers = row.get("per_layer", {})
                tiled = [op.split(":")[0] for op in row.get("too_large_operands", [])
                         if op.endswith(":I2") and layers.get(op.split(":")[0], {}).get("nodes", 1) > 1]
                notes.append(f"{workload}, {tool} {config}: DRAM energy {dram / 1e6:,.0f} uJ against "
                             f"{dram_lbl / 1e6:,.0f} layer by layer"
                             + (f"; {len(tiled)} layers' weights do not fit the SRAM and are streamed again by "
                                f"each of their CNs" if tiled else ""))
        monet = res.get("monet-ilp", {})
        mlbl = monet.get("layer by layer", {})
        for config, row in monet.items():
            if config == "layer by layer" or "error" in row or "error" in mlbl:
                continue
            notes.append(f"{workload}, monet-ilp {config}: DRAM energy {row['energy']['dram_pj'] / 1e6:,.0f} uJ "
                         f"against {mlbl['energy']['dram_pj'] / 1e6:,.0f} layer by layer (activation tiles written "
                         f"to DRAM {row['activation_dram_written_bytes'] / 1e6:.2f} MB, read back "
                         f"{row['activation_dram_read_bytes'] / 1e6:.2f} MB, against "
                         f"{mlbl['activation_dram_written_bytes'] / 1e6:.2f} and "
                         f"{mlbl['activation_dram_read_bytes'] / 1e6:.2f}; SRAM peak {row['peak_sram_bytes'] / 2**20:.2f} "
                         f"MiB of {SRAM_BYTES / 2**20:.0f})")
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["resnet18", "gpt2"])
    parser.add_argument("--stream-python", help="the interpreter with stream-dse 0.0.8 (default: "
                        "$MONET_STREAM_PYTHON, or this one if it has Stream)")
    parser.add_argument("--stream-ga", nargs=2, type=int, metavar=("GENERATIONS", "INDIVIDUALS"),
                        help="let Stream's GA allocate the MAC layers (default: a fixed round robin)")
    parser.add_argument("--stream-selection", nargs="+", choices=SELECTIONS, default=list(SELECTIONS),
                        help="Stream's scheduler: the candidate of the deepest layer first (memory, its default), "
                        "the one that can start first (latency), or both (the default)")
    parser.add_argument("--workdir", type=Path, help="where the ONNX, the Stream job and its per-CN cost caches go "
                        "(kept; a rerun reuses the caches); default a temporary folder")
    parser.add_argument("--stream-timeout", type=float, default=1800.0, help="seconds for all of Stream's runs")
    parser.add_argument("--verbose", action="store_true", help="Stream's own log")
    parser.add_argument("--out", type=Path, default=Path("results/compare_stream.json"))
    args = parser.parse_args()
    console = Console() if sys.stdout.isatty() else Console(width=200)  # a file gets the whole table
    python = stream_python(args.stream_python)
    with tempfile.TemporaryDirectory(prefix="compare_stream-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        result = compare(args.models, python=python, workdir=workdir.resolve(), ga=args.stream_ga,
                         selections=args.stream_selection,
                         timeout=args.stream_timeout, verbose=args.verbose, console=console)
    print_table(result["rows"], result["notes"], console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
