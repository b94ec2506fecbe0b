"""Stream's side of ``scripts/compare_stream.py``: build its accelerator, run it, write JSON.

Stream (``stream-dse`` 0.0.8, the last release on PyPI) imports ZigZag 2's API
(``zigzag.classes``), so it cannot share an environment with the ``zigzag`` extra's
ZigZag 3.9.1; this file runs in Stream's environment and imports nothing of monet_ilp.
``compare_stream.py`` writes a job (the accelerator as plain data, ONNX workloads,
layer-to-core mappings, CN granularities) and runs

    <stream python> scripts/compare_stream_run.py job.json result.json

It can also only parse an accelerator description (the test's check):

    <stream python> scripts/compare_stream_run.py --check accelerator.json

The accelerator (:func:`build_accelerator`) is Stream's own layout (its
``TPU_like_quad_core`` example): the compute cores on a 2-D mesh, a SIMD core for the
element-wise Adds and a pooling core (both on free links, as in that example: our
cores run them on their vector units), and an off-chip core whose DRAM is reached over
one link that all cores share.
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import random
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
from stream.classes.hardware.architecture.accelerator import Accelerator
from stream.classes.hardware.architecture.communication_link import CommunicationLink
from stream.classes.hardware.architecture.pooling_array import PoolingArray
from stream.classes.hardware.architecture.pooling_unit import PoolingUnit
from stream.classes.hardware.architecture.simd_array import SimdArray
from stream.classes.hardware.architecture.simd_unit import SimdUnit
from stream.classes.opt.allocation.genetic_algorithm.genetic_algorithm import GeneticAlgorithm
from stream.classes.stages import (
    GenerateCNWorkloadHybridStage,
    InterCoreMappingStage,
    IntraCoreMappingStage,
    StreamONNXModelParserStage,
)
from stream.classes.workload.computation_node import ComputationNode
from stream.classes.workload.dnn_workload import DNNWorkload
from zigzag.classes.hardware.architecture.core import Core
from zigzag.classes.hardware.architecture.memory_hierarchy import MemoryHierarchy
from zigzag.classes.hardware.architecture.memory_instance import MemoryInstance
from zigzag.classes.hardware.architecture.operational_array import MultiplierArray
from zigzag.classes.hardware.architecture.operational_unit import Multiplier
from zigzag.classes.stages import MainStage
from zigzag.classes.stages.Stage import Stage


# ===================================================================== the accelerator
def _ports(kind: str, operands: tuple[str, ...]) -> tuple[dict[str, str | None], ...]:
    """ZigZag 2's port allocation: every operand through the named port(s); outputs both ways."""
    if kind == "rw":
        one = {"fh": "rw_port_1", "tl": "rw_port_1", "fl": None, "th": None}
        out = {"fh": "rw_port_1", "tl": "rw_port_1", "fl": "rw_port_1", "th": "rw_port_1"}
    else:
        one = {"fh": "w_port_1", "tl": "r_port_1", "fl": None, "th": None}
        out = {"fh": "w_port_1", "tl": "r_port_1", "fl": "w_port_2", "th": "r_port_2"}
    return tuple(dict(out) if o == "O" else dict(one) for o in operands)


def _sram(name: str, spec: dict[str, Any]) -> MemoryInstance:
    """A core's SRAM: its size, one read/write port of its bandwidth, pJ per port-wide access."""
    width = int(spec["sram_bandwidth_bytes_per_cycle"])
    return MemoryInstance(name=name, size=int(spec["sram_bytes"]) * 8, r_bw=width * 8, w_bw=width * 8,
                          r_cost=spec["sram_read_pj_per_byte"] * width, w_cost=spec["sram_write_pj_per_byte"] * width,
                          area=0, r_port=0, w_port=0, rw_port=1, latency=1)


def _compute_core(spec: dict[str, Any]) -> Core:
    """One Edge-TPU-like PE: U x L MACs (D1 = the U SIMD units, D2 = the L lanes), registers
    at 0 pJ, the register file, and the SRAM (as ``scripts/bench_costs.py`` describes it to
    ZigZag 3, here in ZigZag 2's classes)."""
    u, lanes, bits = int(spec["simd_units"]), int(spec["lanes"]), int(spec["bits"])
    array = MultiplierArray(Multiplier([bits, bits], float(spec["mac_pj"]), 1), {"D1": u, "D2": lanes})
    hierarchy = MemoryHierarchy(operational_array=array)
    reg = lambda name, words, ports: MemoryInstance(
        name=name, size=words * bits, r_bw=words * bits, w_bw=words * bits, r_cost=0.0, w_cost=0.0, area=0,
        r_port=ports, w_port=ports, rw_port=0, latency=1)
    # A weight register per MAC, an input register per lane (broadcast over the U units),
    # L output words per unit (the lanes reduce into them).
    hierarchy.add_memory(reg("reg_w", 1, 1), ("I2",), _ports("rw2", ("I2",)), {(0, 0)})
    hierarchy.add_memory(reg("reg_i", 1, 1), ("I1",), _ports("rw2", ("I1",)), {(1, 0)})
    hierarchy.add_memory(reg("reg_o", lanes, 2), ("O",), _ports("rw2", ("O",)), {(0, 1)})
    if spec.get("rf_bytes"):
        wide = u * lanes * bits  # a word per MAC a cycle: the register file never stalls
        rf = MemoryInstance(name="rf", size=int(spec["rf_bytes"]) * 8, r_bw=wide, w_bw=wide, r_cost=0.0, w_cost=0.0,
                            area=0, r_port=0, w_port=0, rw_port=1, latency=1)
        hierarchy.add_memory(rf, ("I1", "I2", "O"), _ports("rw", ("I1", "I2", "O")), "all")
    # One name for every core's SRAM, as Stream's examples: ZigZag compares cores by their memories'
    # attributes, and equal cores share one mapping search per computation node.
    hierarchy.add_memory(_sram("sram", spec), ("I1", "I2", "O"), _ports("rw", ("I1", "I2", "O")), "all")
    # K on the U units, C on the L lanes (CM.C3a); Gemm's K and C likewise (CM.C3c).
    dataflows = [{"D1": ("K", u), "D2": ("C", lanes)}]
    return Core(int(spec["id"]), array, hierarchy, dataflows)


def _vector_core(core_id: int, spec: dict[str, Any], pooling: bool) -> Core:
    """A SIMD (Add) or pooling core with the compute cores' SRAM and vector units."""
    bits, width = int(spec["bits"]), int(spec["vector_ops_per_cycle"])
    if pooling:
        array = PoolingArray(PoolingUnit([bits, bits], float(spec["vector_op_pj"]), 0), {"D1": 3, "D2": 3})
        dataflows = [{"D1": ("FX", 3), "D2": ("FY", 3)}]
    else:
        array = SimdArray(SimdUnit([bits, bits], float(spec["vector_op_pj"]), 0), {"D1": width})
        dataflows = [{"D1": ("K", width)}]
    hierarchy = MemoryHierarchy(operational_array=array)
    hierarchy.add_memory(_sram(f"{'pool' if pooling else 'simd'}_sram", spec), ("I1", "I2", "O"),
                         _ports("rw", ("I1", "I2", "O")), "all")
    return Core(core_id, array, hierarchy, dataflows)


def _offchip_core(core_id: int, dram: dict[str, Any]) -> Core:
    """Stream's off-chip "core": only its memory matters (the DRAM, one read/write port)."""
    width = int(dram["bandwidth_bytes_per_cycle"])
    memory = MemoryInstance(name="dram", size=int(dram["capacity_bytes"]) * 8, r_bw=width * 8, w_bw=width * 8,
                            r_cost=dram["read_pj_per_byte"] * width, w_cost=dram["write_pj_per_byte"] * width,
                            area=0, r_port=0, w_port=0, rw_port=1, latency=1)
    array = MultiplierArray(Multiplier([8, 8], float("inf"), 0), {"D1": 1, "D2": 1})
    hierarchy = MemoryHierarchy(operational_array=array)
    hierarchy.add_memory(memory, ("I1", "I2", "O"), _ports("rw", ("I1", "I2", "O")), "all")
    return Core(core_id, array, hierarchy)


def build_accelerator(desc: dict[str, Any]) -> Accelerator:
    """Stream's accelerator from ``desc`` (``compare_stream.stream_description``).

    ``desc``: ``name``; ``cores`` (per compute core: ``id``, ``simd_units``, ``lanes``,
    ``bits``, ``mac_pj``, ``rf_bytes``, ``sram_bytes``, ``sram_bandwidth_bytes_per_cycle``,
    ``sram_read_pj_per_byte``, ``sram_write_pj_per_byte``, ``vector_ops_per_cycle``,
    ``vector_op_pj``); ``mesh`` (each link: ``[a, b]``, ``bandwidth_bytes_per_cycle``,
    ``pj_per_byte``); ``dram`` (``capacity_bytes``, ``bandwidth_bytes_per_cycle``,
    ``read_pj_per_byte``, ``write_pj_per_byte``, ``bus_pj_per_byte``).  Core ids are
    0..n-1 in ``cores`` order; the SIMD, pooling and off-chip cores are n, n+1, n+2.
    """
    specs = desc["cores"]
    cores = {int(s["id"]): _compute_core(s) for s in specs}
    if sorted(cores) != list(range(len(cores))):
        raise ValueError(f"{desc['name']}: compute core ids must be 0..{len(cores) - 1}, got {sorted(cores)}")
    n = len(cores)
    simd, pool, offchip = _vector_core(n, specs[0], False), _vector_core(n + 1, specs[0], True), \
        _offchip_core(n + 2, desc["dram"])
    edges = []
    for link in desc["mesh"]:
        a, b = (cores[int(i)] for i in link["between"])
        bits = int(link["bandwidth_bytes_per_cycle"]) * 8
        per_cycle = link["pj_per_byte"] * link["bandwidth_bytes_per_cycle"]  # Stream charges a link per busy cycle
        edges += [(a, b, {"cl": CommunicationLink(a, b, bits, per_cycle)}),
                  (b, a, {"cl": CommunicationLink(b, a, bits, per_cycle)})]
    for core in cores.values():  # Stream's example: the SIMD and pooling cores on free, unbounded links
        for other in (simd, pool):
            edges += [(core, other, {"cl": CommunicationLink(core, other, float("inf"), 0)}),
                      (other, core, {"cl": CommunicationLink(other, core, float("inf"), 0)})]
    edges += [(simd, pool, {"cl": CommunicationLink(simd, pool, float("inf"), 0)}),
              (pool, simd, {"cl": CommunicationLink(pool, simd, float("inf"), 0)})]
    dram = desc["dram"]
    bus_bits = int(dram["bandwidth_bytes_per_cycle"]) * 8
    bus = CommunicationLink(offchip, "Any", bus_bits, dram["bus_pj_per_byte"] * dram["bandwidth_bytes_per_cycle"],
                            bidirectional=True)  # one port: reads and writes share it, as our dram_bus
    for core in (*cores.values(), simd, pool):
        edges += [(core, offchip, {"cl": bus}), (offchip, core, {"cl": bus})]
    return Accelerator(desc["name"], nx.DiGraph(edges), offchip_core_id=n + 2)


# ===================================================================== running Stream
def _set_precision(bits: int) -> None:
    """Stream's ONNX parsers write 8-bit operands (16-bit partial sums) into every node;
    give every operand ``bits`` instead, as our graph's dtype (a weightless pooling
    kernel stays 0 bits)."""
    original = ComputationNode.__init__
    if getattr(original, "monet_bits", None) == bits:
        return
    base = getattr(original, "monet_original", original)

    def init(self: Any, node_id: Any, node_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        precision = node_attrs.get("operand_precision")
        if precision:
            node_attrs["operand_precision"] = {k: (bits if v else 0) for k, v in precision.items()}
        base(self, node_id, node_attrs, *args, **kwargs)

    init.monet_bits = bits  # type: ignore[attr-defined]
    init.monet_original = base  # type: ignore[attr-defined]
    ComputationNode.__init__ = init  # type: ignore[method-assign]


class _LayersParserStage(Stage):
    """Stream's UserDefinedModelParserStage for a workload given as a dict, not a module path."""

    def __init__(self, list_of_callables: list[Any], *, workload_layers: dict[int, dict[str, Any]],
                 mapping: dict[str, Any], accelerator: Accelerator, **kwargs: Any) -> None:
        super().__init__(list_of_callables, **kwargs)
        self.layers, self.mapping, self.accelerator = workload_layers, mapping, accelerator

    def run(self) -> Any:
        workload = DNNWorkload(self.layers, self.mapping, self.accelerator)
        sub = self.list_of_callables[0](self.list_of_callables[1:], workload=workload, accelerator=self.accelerator,
                                        **self.kwargs)
        yield from sub.run()


class _InterCoreMappingStage(InterCoreMappingStage):
    """Stream's inter-core stage, whose GA branch (with plots off) yields an unbound result in
    0.0.8: here it yields the hall of fame's lowest-latency allocation."""

    def run(self) -> Any:
        if self.individual_length == 0:
            yield from super().run()
            return
        ga = GeneticAlgorithm(self.fitness_evaluator, self.individual_length, self.valid_allocations,
                              self.nb_generations, self.nb_individuals)
        _population, hall_of_fame = ga.run()
        fitness = [self.fitness_evaluator.get_fitness(a, return_scme=True) for a in hall_of_fame]
        _energy, _latency, scme = min(fitness, key=lambda f: (f[1], f[0]))
        yield scme, None


def _layers(spec: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A user-defined workload from JSON: integer layer ids and operand sources, tuple paddings."""
    out = {}
    for key, layer in spec.items():
        layer = dict(layer)
        layer["operand_source"] = {op: [int(i) for i in src] for op, src in layer["operand_source"].items()}
        if "padding" in layer:
            layer["padding"] = {dim: tuple(p) for dim, p in layer["padding"].items()}
        out[int(key)] = layer
    return out


def run_stream(desc: dict[str, Any], run: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """One Stream run.

    ``run``: ``name``; ``cache`` (the file name of Stream's per-CN cost cache); ``onnx`` (a
    path) or ``layers`` (Stream's user-defined workload, layer id -> attributes);
    ``mapping`` (node name, op type or operator type -> ``{"core_allocation": id or
    [ids]}``); ``hints``: ``{"loops": [[dim, size], ...]}`` (the outer CN loops of every
    layer; ``[]`` is layer by layer) or ``{"per_range": [loops, ...], "cutoffs": [ids]}``
    (Stream's ``cn_define_mode`` 3: layers with ids below the first cutoff take the
    first loops, and so on); ``candidate_selection``; ``operands_to_prefetch``; ``bits``;
    ``ga`` (``[generations, individuals]``, used where an allocation is a list).
    """
    _set_precision(int(run["bits"]))
    generations, individuals = run.get("ga") or (1, 1)
    random.seed(int(run.get("seed", 0)))  # Stream's GA draws from the global generator
    hints = run["hints"]
    if "per_range" in hints:
        mode = 3
        hint_loops: list[Any] = [[tuple(h) for h in loops] for loops in hints["per_range"]]
        extra: dict[str, Any] = {"layer_cutoffs": [int(c) for c in hints["cutoffs"]]}
    else:
        mode, hint_loops, extra = 1, [tuple(h) for h in hints["loops"]], {}
    accelerator = build_accelerator(desc)
    if "onnx" in run:
        mapping_path = workdir / f"{run['cache']}.mapping.pickle"
        mapping_path.write_bytes(pickle.dumps(run["mapping"]))
        parser: Any = StreamONNXModelParserStage
        inputs: dict[str, Any] = {"workload_path": str(run["onnx"]),
                                  "mapping_path": str(mapping_path)}  # a "/" and ".pickle": ZigZag unpickles it
    else:
        parser = _LayersParserStage
        inputs = {"workload_layers": _layers(run["layers"]), "mapping": run["mapping"]}
    began = time.perf_counter()
    mainstage = MainStage(
        [parser, GenerateCNWorkloadHybridStage, IntraCoreMappingStage, _InterCoreMappingStage],
        accelerator=accelerator,
        **inputs,
        loma_lpf_limit=int(run.get("loma_lpf_limit", 6)),
        nb_ga_individuals=int(individuals),
        nb_ga_generations=int(generations),
        node_hw_performances_path=str(workdir / f"{run['cache']}.hw.pickle"),
        plot_hof=False, plot_file_name="", plot_full_schedule=False, plot_data_transfer=False,
        cn_define_mode=mode,
        hint_loops=hint_loops,
        scheduler_candidate_selection=run.get("candidate_selection", "memory"),
        operands_to_prefetch=list(run.get("operands_to_prefetch", [])),
        **extra,
    )
    answers = mainstage.run()
    scme = answers[0][0]
    seconds = time.perf_counter() - began
    cns = [n for n in scme.workload.nodes() if isinstance(n, ComputationNode)]
    energy = {
        "onchip_pj": scme.total_cn_onchip_energy,
        "offchip_link_pj": scme.total_cn_offchip_link_energy,
        "offchip_memory_pj": scme.total_cn_offchip_memory_energy,
        "eviction_link_pj": scme.total_eviction_to_offchip_link_energy,
        "eviction_memory_pj": scme.total_eviction_to_offchip_memory_energy,
        "sink_output_link_pj": scme.total_sink_layer_output_offchip_link_energy,
        "sink_output_memory_pj": scme.total_sink_layer_output_offchip_memory_energy,
        "core_to_core_link_pj": scme.total_core_to_core_link_energy,
        "core_to_core_memory_pj": scme.total_core_to_core_memory_energy,
    }
    busy: dict[int, float] = {}
    layers: dict[str, dict[str, Any]] = {}
    for n in cns:
        busy[n.core_allocation] = busy.get(n.core_allocation, 0) + n.get_runtime()
        row = layers.setdefault(n.name, {"core": n.core_allocation, "nodes": 0, "runtime_cycles": 0.0,
                                         "onchip_pj": 0.0, "macs": 0, "start": float(n.start), "end": float(n.end)})
        row["nodes"] += 1
        row["runtime_cycles"] += float(n.get_runtime())
        row["onchip_pj"] += float(n.get_onchip_energy())
        row["macs"] += int(n.total_MAC_count)
        row["start"], row["end"] = min(row["start"], float(n.start)), max(row["end"], float(n.end))
    return {
        "name": run["name"],
        "latency_cycles": float(scme.latency),
        "energy_pj": float(scme.energy),
        "energy": {k: float(v) for k, v in energy.items()},
        "computation_nodes": len(cns),
        "layers": len({n.id[0] for n in cns}),
        "busy_cycles_per_core": {str(k): float(v) for k, v in sorted(busy.items())},
        "per_layer": layers,
        "too_large_operands": sorted({f"{n.name}:{op}" for n in cns for op in n.too_large_operands}),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=Path, help="the job JSON, or with --check an accelerator description")
    parser.add_argument("out", type=Path, nargs="?", help="where the results go (JSON)")
    parser.add_argument("--check", action="store_true", help="only build the accelerator and describe it")
    parser.add_argument("--verbose", action="store_true", help="Stream's own INFO log")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    job = json.loads(args.job.read_text())
    if args.check:
        acc = build_accelerator(job)
        cores = sorted(acc.cores.nodes(), key=lambda c: c.id)
        summary = {"name": acc.name, "offchip_core_id": acc.offchip_core_id, "cores": [
            {"id": c.id, "array": list(c.operational_array.dimension_sizes) if hasattr(
                c.operational_array, "dimension_sizes") else None,
             "top_memory_bits": {op: c.get_memory_hierarchy_dict()[op][-1].memory_instance.size
                                 for op in c.get_memory_hierarchy_dict()}} for c in cores],
            "links": acc.cores.number_of_edges()}
        print(json.dumps(summary))
        return 0
    if args.out is None:
        parser.error("give the results' path")
    workdir = args.job.resolve().parent
    results = []
    for run in job["runs"]:
        try:
            results.append(run_stream(run.get("accelerator") or job["accelerator"], run, workdir))
        except Exception as exc:  # one failed run is reported, the others still run
            logging.getLogger("compare_stream").exception("Stream run %s failed", run["name"])
            results.append({"name": run["name"], "error": f"{type(exc).__name__}: {exc}"})
        args.out.write_text(json.dumps({"stream_version": _version(), "runs": results}, indent=1))
    return 0


def _version() -> str:
    from importlib.metadata import version  # only for the report
    return f"stream-dse {version('stream-dse')}, zigzag-dse {version('zigzag-dse')}"


if __name__ == "__main__":
    sys.exit(main())
