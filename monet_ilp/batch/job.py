"""One job of a batch: the expanded parameters of a single solve, its stable key, and how to run it.

A :class:`Job` is plain data (JSON-able parameters), so it crosses process and
machine boundaries unchanged.  :func:`run_job` is what a worker process executes:
build the instance, call :func:`monet_ilp.solve.solve`, and return the verified
result as a record fragment plus the schedule.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from monet_ilp.analysis.fusion import plan_from_spec
from monet_ilp.errors import MonetError
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.load import GENERATED, KINDS, load_graph
from monet_ilp.hardware.presets import preset
from monet_ilp.hardware.schema import load_hardware
from monet_ilp.make import make_instance
from monet_ilp.problems.p4.instance import p4_instance_from_dict
from monet_ilp.problems.p4.search import plan_search
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.hardware.model import Hardware
    from monet_ilp.instance import Instance

__all__ = [
    "RECORD_FORMAT",
    "RECORD_VERSION",
    "SEEDED_BACKENDS",
    "Job",
    "build_graph",
    "build_instance",
    "canonical_json",
    "job_key",
    "run_job",
]

RECORD_FORMAT = "monet-ilp/batch-record"
RECORD_VERSION = 1

#: Backends that take a random seed, and the option it is passed as.  For the
#: others a manifest's ``seeds`` are plain repetitions (useful to measure time).
SEEDED_BACKENDS: Mapping[str, str] = MappingProxyType({"cpsat": "seed", "auto": "seed", "lns": "seed",
                                                        "interval": "seed", "heuristic:lp-round": "seed"})

#: Bumped whenever the meaning of a key changes, so old results are never mistaken for new.
_KEY_SCHEME = "monet-ilp/batch-job/1"


def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces: equal data gives equal text (and so equal hashes)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def job_key(params: Mapping[str, Any]) -> str:
    """The stable key of a job: 16 hex digits of the SHA-256 of its canonical parameters.

    The parameters hold everything that changes the answer (model spec with file
    hashes, hardware spec with every resolved preset parameter, problem, budget,
    objective, backend and its options, time limit, seed, solver threads, plugins);
    the set's name and the paths files are read from do not count.
    """
    return hashlib.sha256((_KEY_SCHEME + canonical_json(params)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    """One solve of a batch.

    Attributes
    ----------
    key
        :func:`job_key` of ``params``.
    set
        Name of the manifest (instance set) it came from.
    params
        The expanded, JSON-able parameters (see ``instances/README.md``).
    paths
        Absolute paths of the files the model and hardware specs name (``model``,
        ``hardware``), for the worker to read; not part of the key.
    """

    key: str
    set: str
    params: Mapping[str, Any]
    paths: Mapping[str, str] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        name: str = self.params["backend"]
        return name

    @property
    def label(self) -> str:
        label: str = self.params["label"]
        return label

    @property
    def time_limit(self) -> float:
        return float(self.params["time_limit"])

    def payload(self) -> dict[str, Any]:
        """What is sent to the worker process (JSON)."""
        return {"key": self.key, "set": self.set, "params": json.loads(canonical_json(self.params)),
                "paths": dict(self.paths)}

    def describe(self) -> str:
        """A short human name: model, hardware, budget, objective, backend."""
        p = self.params
        if "p4" in p:  # a plan: model, cluster, batch, objective
            spec = p["p4"]
            model = spec["model"]
            cluster = spec["cluster"]
            what = "-".join(str(model[k]) for k in ("family", "preset") if k in model) or str(model.get("name"))
            where = f"{cluster.get('preset') or cluster.get('name')}x{cluster.get('nodes', 1)}"
            return f"{what} {where} B={spec['global_batch']} {spec['objective']} plan"
        model = p["model"]
        kind = next(k for k in KINDS if k in model)
        what = model[kind] if isinstance(model[kind], str) else kind
        if kind in GENERATED:
            main = model[kind].get(GENERATED[kind])
            what = f"{kind}{main}"
        hw = p["hardware"]
        if model.get("phase") == "inference":
            what = f"{what} (inference)"
        if p.get("fusion"):
            spec = p["fusion"]
            what = f"{what} fused {' '.join(f'{k}={v}' for k, v in spec.items() if k != 'path')}"
        parts = [what, "-" if hw is None else hw.get("name", "hw"), p["problem"]]
        if p["budget"] is not None:
            parts.append(f"b={p['budget']}")
        if p["objective"] is not None:
            parts.append(p["objective"])
        parts.append(p["label"])
        return " ".join(str(x) for x in parts)


# ================================================================ building
def build_graph(model: Mapping[str, Any], path: str | None) -> TrainingGraph:
    """The training graph of a model spec (one of :data:`monet_ilp.graph.load.KINDS` as its key);
    with ``phase: inference``, its forward part (:func:`~monet_ilp.graph.analysis.inference_graph`)."""
    kind = next((k for k in KINDS if k in model), None)
    if kind is None:
        raise MonetError(f"unknown model spec {sorted(model)}", field="model",
                         fix=f"use one of {', '.join(KINDS)}")
    if kind in GENERATED:
        graph = load_graph(kind, **dict(model[kind]))
    else:
        source = model[kind] if kind == "zoo" else path or model[kind]
        graph = load_graph(kind, source, **dict(model.get("params", {})))
    return inference_graph(graph) if model.get("phase") == "inference" else graph


def build_hardware(spec: Mapping[str, Any] | None, path: str | None) -> Hardware | None:
    """The hardware of a hardware spec (a preset with its parameters, or a file); ``None`` for none."""
    if spec is None:
        return None
    if "preset" in spec:
        return preset(spec["preset"], **dict(spec["params"]))
    return load_hardware(path or spec["file"])


def build_instance(params: Mapping[str, Any], paths: Mapping[str, str] | None = None) -> Instance:
    """The :class:`~monet_ilp.instance.Instance` of a job's parameters."""
    paths = paths or {}
    graph = build_graph(params["model"], paths.get("model"))
    hardware = build_hardware(params["hardware"], paths.get("hardware"))
    options = {"problem": params["problem"], "budget": params["budget"], "objective": params["objective"],
               "offload": params.get("offload", "dram"), "alpha": params.get("alpha", 0.5),
               "runtime_limit_cycles": params.get("runtime_limit_cycles")}
    plain = make_instance(graph, hardware, **options)
    spec = params.get("fusion")
    if spec is None:
        return plain
    assert hardware is not None  # the manifest makes fused points only with hardware
    return make_instance(graph, hardware, fusion=plan_from_spec(graph, plain, spec), **options)


def instance_hash(instance: Instance) -> str:
    """16 hex digits of the SHA-256 of the instance's canonical JSON: equal data, equal hash."""
    return hashlib.sha256(canonical_json(instance.to_dict()).encode()).hexdigest()[:16]


# ================================================================= running
def _error_text(err: BaseException) -> str:
    if isinstance(err, MonetError):
        return err.message
    return f"{type(err).__name__}: {err}"


def run_job(payload: Mapping[str, Any],
            on_solving: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Build and solve one job; never raises for a failure of the job itself.

    Parameters
    ----------
    payload
        :meth:`Job.payload`.
    on_solving
        Called once the instance is built, right before the solver starts, with
        the instance's name and hash and the building time (the parent starts the
        clock of the time limit there, and keeps them for a job it has to kill).

    Returns
    -------
    dict
        ``{"fields": {...}, "schedule": dict | None}``: the record fields the
        worker knows (status, objective, bound, gap, evaluator verdict, metrics,
        message, times, instance name and hash) and the schedule as JSON.
    """
    params = payload["params"]
    if "p4" in params:
        return _run_plan(params, on_solving)
    fields: dict[str, Any] = {"instance": None, "instance_hash": None, "status": "error", "objective": None,
                              "bound": None, "gap": None, "feasible": None, "latency_cycles": None,
                              "energy_pj": None, "compute_cycles": None, "message": "", "source": "",
                              "wall_time_s": None,
                              "build_s": None, "stats": {}}
    start = time.perf_counter()
    try:
        for module in params.get("plugins", []):
            importlib.import_module(module)
        instance = build_instance(params, payload.get("paths"))
        fields["instance"] = instance.name
        fields["instance_hash"] = instance_hash(instance)
    except Exception as err:  # noqa: BLE001  (any failure is the job's result, not the batch's)
        fields["build_s"] = round(time.perf_counter() - start, 4)
        fields["message"] = f"building the instance failed: {_error_text(err)}"
        return {"fields": fields, "schedule": None}
    fields["build_s"] = round(time.perf_counter() - start, 4)
    if on_solving is not None:
        on_solving({k: fields[k] for k in ("instance", "instance_hash", "build_s")})
    options = dict(params.get("options", {}))
    seed = params.get("seed")
    if seed is not None and params["backend"] in SEEDED_BACKENDS:
        options.setdefault(SEEDED_BACKENDS[params["backend"]], seed)
    solve_start = time.perf_counter()
    try:
        result = solve(instance, params["backend"], time_limit=params["time_limit"],
                       workers=params.get("workers", 1), **options)
    except Exception as err:  # noqa: BLE001
        fields["wall_time_s"] = round(time.perf_counter() - solve_start, 4)
        fields["message"] = _error_text(err)
        return {"fields": fields, "schedule": None}
    metrics = result.metrics
    verified = metrics if metrics is not None and metrics.feasible else None
    fields.update(
        status=str(result.status),
        objective=result.objective,
        bound=result.bound,
        gap=result.gap,
        feasible=None if metrics is None else bool(metrics.feasible),
        latency_cycles=None if verified is None else verified.latency_cycles,
        energy_pj=None if verified is None else verified.energy.total_pj,
        compute_cycles=None if verified is None else verified.compute_cycles,
        message=result.message,
        source=result.source,
        wall_time_s=round(result.wall_time_s, 4),
        stats=json.loads(json.dumps(dict(result.stats), default=str)),
    )
    schedule = result.schedule.to_dict() if result.schedule is not None else None
    return {"fields": fields, "schedule": schedule}


def _run_plan(params: Mapping[str, Any], on_solving: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
    """A P4 job: the plan search on a model and a cluster; the plan the evaluator measured.

    The record's objective is the plan's time (s) or energy (J) per iteration, its bound
    the search's bound over the class; ``stats`` adds the plan, its time, energy and
    MFU, and the devices; the plan is what is saved as the job's "schedule".
    """
    fields: dict[str, Any] = {"instance": None, "instance_hash": None, "status": "error", "objective": None,
                              "bound": None, "gap": None, "feasible": None, "latency_cycles": None,
                              "energy_pj": None, "compute_cycles": None, "message": "", "source": "plan",
                              "wall_time_s": None, "build_s": None, "stats": {}}
    start = time.perf_counter()
    try:
        instance = p4_instance_from_dict(dict(params["p4"]))
    except Exception as err:  # noqa: BLE001  (any failure is the job's result, not the batch's)
        fields["build_s"] = round(time.perf_counter() - start, 4)
        fields["message"] = f"building the instance failed: {_error_text(err)}"
        return {"fields": fields, "schedule": None}
    fields["instance"] = f"{instance.model.name}_{instance.cluster.name}_B{instance.global_batch}"
    fields["instance_hash"] = hashlib.sha256(canonical_json(instance.to_dict()).encode()).hexdigest()[:16]
    fields["build_s"] = round(time.perf_counter() - start, 4)
    if on_solving is not None:
        on_solving({k: fields[k] for k in ("instance", "instance_hash", "build_s")})
    solve_start = time.perf_counter()
    try:
        result = plan_search(instance.model, instance.cluster, global_batch=instance.global_batch,
                             objective=instance.objective, alpha=instance.alpha, time_limit=params["time_limit"])
    except Exception as err:  # noqa: BLE001
        fields["wall_time_s"] = round(time.perf_counter() - solve_start, 4)
        fields["message"] = _error_text(err)
        return {"fields": fields, "schedule": None}
    metrics = result.metrics
    fields.update(status=result.status, objective=result.value, bound=result.bound, gap=result.gap,
                  feasible=None if metrics is None else metrics.feasible,
                  message=f"{result.status}; bound over {result.holds_for}",
                  wall_time_s=round(time.perf_counter() - solve_start, 4),
                  stats={**json.loads(json.dumps(result.stats, default=str)), "devices": instance.cluster.devices,
                         "time_per_iteration_s": None if metrics is None else metrics.time_s,
                         "energy_j": None if metrics is None else metrics.energy_j,
                         "mfu": None if metrics is None else metrics.mfu,
                         "plan": None if result.plan is None else result.plan.to_dict()})
    return {"fields": fields, "schedule": None if result.plan is None else {"format": "monet-ilp/p4-plan",
                                                                            **result.plan.to_dict()}}
