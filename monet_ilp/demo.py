"""The demo: a real training step on a real accelerator, scheduled four ways, graded with bounds.

ResNet-18 (CIFAR, layer granularity) on a 2x2 Edge-TPU-like mesh (P3) at an SRAM
budget per core where the store-all schedule does not fit.  Four schedules:

* **store-all**: every activation kept, list-scheduled with greedy layer allocation
  (the reference; it breaks the SRAM capacity, which the table says);
* **Chen sqrt(n)**: every ``⌈√n⌉``-th saved activation kept as a checkpoint, the
  others recomputed, decoded by the list scheduler (same allocation);
* **GA**: NSGA-II over keep/offload/recompute and core genes (``monet_ilp.ga.nsga2``);
* **auto**: the default backend, on P3 the CP-SAT model (``formulations/p3_cpsat.md``),
  warm-started with the best of the above.

Every schedule goes through the evaluator.  Bounds: the best certified lower bound on
latency (combinatorial and CP-SAT) and on energy (combinatorial), and each row's gap
to them.  A Gantt chart of the auto schedule and the GA's Pareto front are saved.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monet_ilp.analysis.bounds import combinatorial_bounds
from monet_ilp.evaluate import evaluate
from monet_ilp.ga.nsga2 import run_ga
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.decisions import Decisions, decode, plan_of
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.instance import Instance, Objective
from monet_ilp.make import make_instance
from monet_ilp.plot import gantt, pareto
from monet_ilp.results import gap_of
from monet_ilp.schedule import Schedule, schedule_from_dict
from monet_ilp.solve import solve


@dataclass(frozen=True)
class DemoRow:
    method: str
    feasible: bool
    violations: dict[str, int]
    latency_cycles: int
    energy_pj: int
    peak_sram_bytes: int
    latency_gap: float | None
    energy_gap: float | None
    seconds: float


def _chen_sqrt(instance: Instance, core_of_layer: dict[str, str]) -> Schedule:
    plan = plan_of(instance)
    recomputable = [t for t in plan.saved if t in plan.recomputable]
    step = max(1, math.isqrt(len(recomputable)) + (0 if math.isqrt(len(recomputable)) ** 2 == len(recomputable) else 1))
    tensors = {t: ("keep" if k % step == 0 else "recompute") for k, t in enumerate(recomputable)}
    schedule = decode(instance, Decisions(tensors, core_of_layer, {"tool": "chen-sqrt"}))
    assert isinstance(schedule, Schedule)  # the demo's instance is P3: a timed schedule
    return schedule


def demo_rows(*, sram_bytes: int = 3 * 2**20, batch: int = 1, time_limit: float = 45.0,
              generations: int = 12, population: int = 32, out_dir: str | Path = "monet_demo",
              workers: int = 2) -> tuple[list[DemoRow], dict[str, Any]]:
    """Build, schedule, evaluate and bound; one row per method, and what was written where."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    graph = zoo.resnet18(variant="cifar", batch=batch)
    inst = make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3", sram_budget=sram_bytes,
                         objective="latency")
    energy_inst = make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3",
                                sram_budget=sram_bytes, objective=Objective.ENERGY)
    schedules: dict[str, Any] = {}
    seconds: dict[str, float] = {}

    began = time.perf_counter()
    base = store_all_schedule(inst, allocate="layer")
    # Greedy earliest-finish allocation keeps a chain-like network on few cores: say how many.
    store_all_label = f"store-all ({len({r.core for r in base.ops})} of {len(inst.cores)} cores)"
    schedules[store_all_label], seconds[store_all_label] = base, time.perf_counter() - began
    began = time.perf_counter()
    schedules["Chen sqrt(n)"] = _chen_sqrt(inst, base.meta["core_of_layer"])
    seconds["Chen sqrt(n)"] = time.perf_counter() - began
    began = time.perf_counter()
    seeds = [memory_aware_schedule(inst, allocate=a) for a in ("layer", "op")]
    front = run_ga(inst, ("latency", "energy"), generations=generations, population=population, seed=1,
                   seed_schedules=seeds)
    points = [p for p in front["points"] if p["feasible"]]
    fastest = min(points, key=lambda p: p["latency_cycles"])
    schedules["GA (fastest point)"] = schedule_from_dict(fastest["schedule"])
    seconds["GA (fastest point)"] = time.perf_counter() - began
    began = time.perf_counter()
    # The default backend: on P3, auto is the CP-SAT model (P1 gets the portfolio).
    result = solve(inst, "auto", time_limit=time_limit, workers=workers, hint=schedules["GA (fastest point)"])
    # A solve that found nothing better returns its hint: the row says so.
    cpsat_label = ("auto (cpsat)" if not result.source.startswith("hint:")
                   else "auto (cpsat; returned the GA's point, its hint)")
    schedules[cpsat_label], seconds[cpsat_label] = result.schedule, time.perf_counter() - began

    latency_lb = max([b.value for b in combinatorial_bounds(inst) if b.value is not None]
                     + ([result.bound] if result.bound is not None else []))
    energy_lb = max(b.value for b in combinatorial_bounds(energy_inst) if b.value is not None)
    rows = []
    for name, sched in schedules.items():
        if sched is None:
            continue
        m = evaluate(inst, sched)
        peak = max(m.peak_bytes[c.memory] for c in inst.cores)
        rows.append(DemoRow(name, m.feasible, dict(m.violation_counts), m.latency_cycles, m.energy.total_pj, peak,
                            gap_of(m.latency_cycles, latency_lb) if m.feasible else None,
                            gap_of(m.energy.total_pj, energy_lb) if m.feasible else None,
                            seconds[name]))
    files = {"gantt": out / "gantt_auto.png", "pareto": out / "pareto_ga.png"}
    if result.schedule is not None:
        gantt(inst, result.schedule, files["gantt"], title=f"auto (cpsat) on {inst.name} ({result.status})")
    front_points: list[dict[str, Any]] = [
        {"latency_cycles": p["latency_cycles"], "energy_pj": p["energy_pj"], "energy_bound_pj": energy_lb,
         "latency_bound_cycles": latency_lb, "status": "feasible", "schedule": None} for p in points]
    front_file = {"instance": inst.name, "points": front_points}
    if result.metrics is not None and result.metrics.feasible:
        front_points.append({"latency_cycles": result.metrics.latency_cycles,
                                     "energy_pj": result.metrics.energy.total_pj, "energy_bound_pj": energy_lb,
                                     "latency_bound_cycles": latency_lb, "status": str(result.status),
                                     "schedule": None})
    pareto(front_file, files["pareto"])
    info = {"instance": inst.name, "sram_bytes": sram_bytes, "latency_bound": latency_lb,
            "energy_bound": energy_lb, "solve_status": str(result.status), "files": files,
            "ga_evaluations": front["evaluations"], "ga_rate": front.get("evaluations_per_second")}
    return rows, info

