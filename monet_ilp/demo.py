"""The demo: a ResNet-18 training step on an analytical Edge-TPU-like model, scheduled four ways, graded with bounds.

ResNet-18 (CIFAR, layer granularity) on a 2x2 mesh of Edge-TPU-like PEs (the analytical
``edge_tpu`` preset and cost model, ``formulations/cost_model.md``; P3) at an SRAM budget
per core where the store-all schedule does not fit.  Four schedules:

* **store-all**: every activation kept, list-scheduled with greedy layer allocation
  (the reference; it breaks the SRAM capacity, which the table says);
* **Chen sqrt(n)**: every ``⌈√n⌉``-th saved activation kept as a checkpoint, the
  others recomputed, decoded by the list scheduler (same allocation);
* **GA**: NSGA-II over keep/offload/recompute and core genes (``monet_ilp.ga.nsga2``);
* **auto**: the default backend, on P3 the portfolio of ``formulations/p3_cpsat.md``
  (the descent, the CP-SAT model, then its LNS, as the graph's size calls for),
  warm-started with the GA's fastest point; the row names the members that ran.

Every schedule goes through the evaluator.  Bounds, each with what it holds for: on
latency and energy the closed-form bounds over every schedule, which grade every row;
and ``auto``'s own bound, which holds within class P3.K3 only (unless ``auto`` says it
holds for every schedule), shown for the ``auto`` row alone when its schedule lies in
that class.  Every bound is checked against every feasible row it holds for (BD.C1 of
``formulations/bounds.md``).  A Gantt chart of the auto schedule and the GA's Pareto
front are saved.
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
from monet_ilp.results import bound_error, gap_of
from monet_ilp.schedule import Schedule, schedule_from_dict
from monet_ilp.solve import solve

#: How the demo's table names ``auto``'s members (``formulations/p3_cpsat.md``, P3A).
_MEMBER_NAMES = {"descent": "descent", "cpsat": "CP-SAT", "lns": "LNS"}


@dataclass(frozen=True)
class DemoRow:
    method: str
    feasible: bool
    violations: dict[str, int]
    latency_cycles: int
    energy_pj: int
    peak_sram_bytes: int
    latency_gap: float | None  # to the latency bound over every schedule
    energy_gap: float | None  # to the energy bound over every schedule
    seconds: float
    class_gap: float | None = None  # the auto row's latency gap to auto's bound over class K3


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
    # The default backend: on P3 the portfolio (descent, CP-SAT, LNS by the graph's size).
    result = solve(inst, "auto", time_limit=time_limit, workers=workers, hint=schedules["GA (fastest point)"])
    ran = [m for m in result.stats.get("members", {"cpsat": None}) if m != "floor"]
    auto_label = f"auto: {', '.join(_MEMBER_NAMES.get(m, m) for m in ran)}"
    # A solve that found nothing better returns its hint: the row says so.
    auto_label += (f" (best from {result.source})" if not result.source.startswith("hint:")
                   else " (returned the GA's point, its hint)")
    schedules[auto_label], seconds[auto_label] = result.schedule, time.perf_counter() - began

    # Over every schedule: the closed forms (BD.B1-B6), and auto's bound when it says so.
    bound_class = str(result.stats.get("bound_class") or "class P3.K3 (auto's CP-SAT model)")
    every = bound_class.startswith("every schedule")
    latency_lb = max([b.value for b in combinatorial_bounds(inst) if b.value is not None]
                     + ([result.bound] if every and result.bound is not None else []))
    energy_lb = max(b.value for b in combinatorial_bounds(energy_inst) if b.value is not None)
    # Within class K3: auto's bound, for auto's own schedule when it is a model solution.
    in_class = not every and result.source in ("cpsat", "lns")
    class_lb = result.bound if in_class else None
    rows = []
    errors = []
    for name, sched in schedules.items():
        if sched is None:
            continue
        m = evaluate(inst, sched)
        peak = max(m.peak_bytes[c.memory] for c in inst.cores)
        checks = [(latency_lb, m.latency_cycles, "latency (every schedule)"),
                  (energy_lb, m.energy.total_pj, "energy (every schedule)")]
        if name == auto_label and class_lb is not None:
            checks.append((class_lb, m.latency_cycles, f"latency ({bound_class})"))
        for bound, value, what in checks if m.feasible else []:
            wrong = bound_error(value, bound, what, what)
            if wrong is not None:
                errors.append(f"{name}: {wrong}")
        rows.append(DemoRow(name, m.feasible, dict(m.violation_counts), m.latency_cycles, m.energy.total_pj, peak,
                            gap_of(m.latency_cycles, latency_lb) if m.feasible else None,
                            gap_of(m.energy.total_pj, energy_lb) if m.feasible else None,
                            seconds[name],
                            gap_of(m.latency_cycles, class_lb) if m.feasible and name == auto_label else None))
    files = {"gantt": out / "gantt_auto.png", "pareto": out / "pareto_ga.png"}
    if result.schedule is not None:
        gantt(inst, result.schedule, files["gantt"], title=f"auto on {inst.name} ({result.status})")
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
            "energy_bound": energy_lb, "class_bound": class_lb, "class": bound_class, "auto": auto_label,
            "solve_status": str(result.status), "errors": errors, "files": files,
            "ga_evaluations": front["evaluations"], "ga_rate": front.get("evaluations_per_second")}
    return rows, info

