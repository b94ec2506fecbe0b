"""P1 over the schedules PyTorch's checkpointing can run (``formulations/torch_checkpoint.md``, class TC).

``torch.utils.checkpoint`` around a module drops what the module's forward made inside
it and keeps what it reads from outside and what it hands on; just before the module's
backward needs a dropped tensor its forward runs again.  The regions are the graph's
modules: the module paths its ops' ``layer`` names carry (TC.K1).  A plan checkpoints a
set of disjoint regions; its P1 sequence (TC.K2) is what torch runs (each region's
dropped tensors brought back together by a rerun of its forward, stopped early as the
non-reentrant checkpoint stops), and the evaluator measures it.  The search (TC.K4) is
a 0-1 model over the regions (CP-SAT): each region's recompute cost and memory effect,
measured alone, are added up (TC.K3), and the plan it picks is measured again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.cpsat import run_cpsat
from monet_ilp.engines.deadline import Deadline
from monet_ilp.graph.ir import OpKind
from monet_ilp.heuristics.checkpointing import FORWARD_PASS, plan_order
from monet_ilp.heuristics.liveness import replay, require_sequence_form
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Compute, Release, Sequence

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.instance import Instance

__all__ = ["SELECTIVE", "TC_CLASS", "Region", "region_sequence", "regions_of", "rerun_computations", "solve_torch_class"]

#: The class of schedules the search is exact over (TC.K1-K2).
TC_CLASS = ("class TC (formulations/torch_checkpoint.md): torch.utils.checkpoint around a set of disjoint "
            "modules of the graph, each rerun once at its backward, in full or saving its matrix products' "
            "outputs (selective)")


#: The suffix of a region checkpointed selectively (TC.K7): ``blocks.0@mm`` saves the outputs
#: of its matrix products and convolutions and reruns the rest.
SELECTIVE = "@mm"


@dataclass(frozen=True)
class Region:
    """A module the plan may checkpoint: its path and its forward ops, contiguous in the graph's
    order; ``saved``, under selective checkpointing (TC.K7), the ops whose outputs it saves."""

    path: str
    ops: tuple[str, ...]
    saved: tuple[str, ...] = ()


def selective(graph: TrainingGraph, region: Region) -> Region | None:
    """TC.K7: ``region`` checkpointed selectively, the outputs of its MAC ops (matrix products,
    convolutions) saved; None when it has no MAC op or nothing else."""
    saved = tuple(op for op in region.ops if graph.op(op).macs > 0)
    if not saved or len(saved) == len(region.ops):
        return None
    return Region(region.path + SELECTIVE, region.ops, saved)


def module_paths(layer: str) -> list[str]:
    """The module paths an op's ``layer`` names, outermost first (TC.K1).

    torch's TorchScript exporter names a node ``/layers/layers.0/layers.0.0/Gemm``: each
    component but the last is a module's path.  A zoo graph names a layer
    ``layer1.0.conv1``: each dotted prefix is one.
    """
    if layer.startswith("/"):
        parts = [p for p in layer.split("/") if p]
        return parts[:-1]
    pieces = layer.split(".")
    return [".".join(pieces[:k]) for k in range(1, len(pieces) + 1)] if layer else []


def regions_of(graph: TrainingGraph, allowed: set[str] | None = None) -> list[Region]:
    """TC.K1: the modules whose forward ops are a contiguous run of the graph's forward ops, and
    the runs of two or more consecutive child modules (``layers[0..2]``: children ``0`` to
    ``2`` of ``layers``, as ``checkpoint_sequential`` cuts an ``nn.Sequential``), the whole
    model apart, each also checkpointed selectively (TC.K7, ``path@mm``); with ``allowed``,
    only the paths it names."""
    forward = [op for op in graph.ops if op.kind is OpKind.FORWARD]
    members: dict[str, list[int]] = {}
    for i, op in enumerate(forward):
        for path in module_paths(op.layer):
            members.setdefault(path, []).append(i)

    def contiguous(index: list[int]) -> bool:
        return index == list(range(index[0], index[-1] + 1)) and len(index) < len(forward)

    out = [Region(path, tuple(forward[i].id for i in index)) for path, index in members.items()
           if contiguous(index)]
    children: dict[str, list[str]] = {}
    for path, index in members.items():  # the model itself is the parent "" of the outermost modules
        parent = path.rpartition(".")[0]
        if (parent == "" or parent in members) and contiguous(index):
            children.setdefault(parent, []).append(path)
    for parent, kids in children.items():
        kids.sort(key=lambda k: members[k][0])
        size = len(members[parent]) if parent else len(forward)
        for a in range(len(kids)):
            for b in range(a + 1, len(kids)):
                index = sorted(i for k in kids[a:b + 1] for i in members[k])
                if not contiguous(index) or len(index) == size:
                    continue
                first, last = kids[a].rpartition(".")[2], kids[b].rpartition(".")[2]
                out.append(Region(f"{parent}[{first}..{last}]", tuple(forward[i].id for i in index)))
    out += [q for q in (selective(graph, r) for r in out) if q is not None]
    if allowed is not None:
        out = [r for r in out if r.path in allowed]
    return out


def _kept(instance: Instance, regions: list[Region]) -> set[str]:
    graph = instance.graph
    region_of = {op: k for k, r in enumerate(regions) for op in r.ops}
    cached = {op for r in regions for op in r.saved}  # TC.K7: selective checkpointing saves these
    keep: set[str] = set()
    for op in graph.ops:
        if op.kind not in FORWARD_PASS:
            continue
        for t in op.outputs:
            tensor = graph.tensor(t)
            if tensor.persistent:
                continue
            home = region_of.get(op.id)
            readers = [graph.op(c) for c in tensor.consumers if graph.op(c).kind in FORWARD_PASS]
            # what only the backward reads (a dropout's noise, a norm's statistics) is dropped
            # with the rest and made again by the region's rerun
            if (home is None or op.id in cached or any(region_of.get(r.id) != home for r in readers)
                    or not tensor.consumers):
                keep.add(t)
    return keep


def rerun_computations(instance: Instance, regions: list[Region]) -> list[str]:
    """TC.K2: the computations of checkpointing ``regions``: the forward and backward passes in
    the graph's order, and each region's rerun just before the first backward op of the
    region's ops that reads a forward tensor.

    Every tensor a region's op saves for its backward is dropped (what the region hands on
    included) and the rerun stops once the last of them is saved again, as torch's
    non-reentrant checkpoint stops: an op saves its inputs before it runs and its outputs
    after, so the rerun runs the region's ops up to the last that saves anything, that one
    included only when it saves an output of its own.  All the region's dropped tensors
    come back together, as torch brings them back.
    """
    graph = instance.graph
    order = plan_order(graph)
    home = {op: k for k, r in enumerate(regions) for op in r.ops}
    activation = {t.id for t in graph.tensors if not t.persistent and (
        t.producer is None or graph.op(t.producer).kind in FORWARD_PASS)}
    saves: set[str] = set()
    saves_output: set[str] = set()
    for op in graph.ops:
        if op.forward_of is None or op.kind in FORWARD_PASS:
            continue
        for t in op.inputs:
            if t in activation:
                saves.add(op.forward_of)
                if graph.tensor(t).producer == op.forward_of:
                    saves_output.add(op.forward_of)
    rerun = []
    for r in regions:
        last = max((i for i, op in enumerate(r.ops) if op in saves), default=-1)
        ops = r.ops[:last + 1] if last >= 0 and r.ops[last] in saves_output else r.ops[:max(last, 0)]
        rerun.append([op for op in ops if op not in r.saved])  # TC.K7: a cached op returns its output
    done: set[int] = set()
    out: list[str] = []
    for op_id in order:
        op = graph.op(op_id)
        k = home.get(op.forward_of) if op.forward_of is not None and op.kind not in FORWARD_PASS else None
        if k is not None and k not in done and any(t in activation for t in op.inputs):
            done.add(k)
            out += rerun[k]
        out.append(op_id)
    return out


def region_sequence(instance: Instance, regions: list[Region]) -> Sequence:
    """TC.K2: the P1 sequence of checkpointing ``regions`` (disjoint).

    Kept: every activation but those a region's op makes and only that region's ops read
    (what it hands on to an op outside it is kept, as torch keeps a module's output); the
    dropped ones come back in the region's rerun (:func:`rerun_computations`).
    """
    graph = instance.graph
    kept = _kept(instance, regions)
    computations = rerun_computations(instance, regions)
    home = {op: k for k, r in enumerate(regions) for op in r.ops}
    last_backward: dict[int, int] = {}  # a region's last backward op
    rerun_at: dict[str, int] = {}  # a forward op's place in its region's rerun
    hold: dict[str, int] = {}  # a kept output's last reader outside its region (TC.K2)
    seen: set[str] = set()
    for i, c in enumerate(computations):
        step = graph.op(c)
        own = home.get(step.forward_of or "") if step.kind not in FORWARD_PASS else None
        if own is not None:
            last_backward[own] = i
        if c in seen and c in home:
            rerun_at[c] = i
        seen.add(c)
        for t in step.inputs:  # the region's own backward reads the rerun's copy, others the first one
            maker = graph.tensor(t).producer
            if t in kept and maker is not None and maker in home and own != home[maker]:
                hold[t] = i
    until: dict[str, int] = {}
    for k, r in enumerate(regions):  # the checkpoint holds a region's inputs to the end of its backward
        if k not in last_backward:
            continue
        for op in r.ops:
            for t in graph.op(op).inputs:
                tensor = graph.tensor(t)
                if not tensor.persistent and home.get(tensor.producer or "") != k:
                    until[t] = max(until.get(t, -1), last_backward[k])
        for op in r.saved:  # TC.K7: its cache of saved outputs, until the rerun takes them (or to its end)
            later = [rerun_at[c] for c in r.ops[r.ops.index(op) + 1:] if c in rerun_at]
            for t in graph.op(op).outputs:
                if not graph.tensor(t).persistent:
                    until[t] = max(until.get(t, -1), min(later) if later else last_backward[k])
    steps = release_each(graph, computations, hold=hold, until=until)
    cost = replay(instance, steps)
    return Sequence(tuple(steps), meta={"heuristic": "torch_checkpoint", "checkpointed": [r.path for r in regions],
                                 "compute_cycles": cost.compute_cycles, "peak_bytes": cost.peak_bytes,
                                 "recomputations": cost.recomputations})


def memory_profile(instance: Instance, steps: list[Compute | Release]) -> list[int]:
    """TC.K4: per first computation, in order, the most memory held while it runs or while the
    recomputations just before it run (EV.E3's count, as :func:`replay`)."""
    graph = instance.graph
    resident = {t.id for t in graph.tensors if not t.persistent and t.producer is None}
    held = sum(graph.tensor(t).bytes for t in resident)
    seen: set[str] = set()
    out: list[int] = []
    block = 0
    for step in steps:
        if isinstance(step, Release):
            if step.tensor in resident:
                resident.remove(step.tensor)
                held -= graph.tensor(step.tensor).bytes
            continue
        op = graph.op(step.op)
        new = [t for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent and t not in resident]
        held += sum(graph.tensor(t).bytes for t in new)
        resident.update(new)
        block = max(block, held)
        if op.id not in seen:  # a first computation closes its block
            seen.add(op.id)
            out.append(block)
            block = 0
    return out


def release_each(graph: TrainingGraph, computations: list[str], hold: dict[str, int] | None = None,
                 until: dict[str, int] | None = None) -> list[Compute | Release]:
    """TC.K2: each tensor freed right after its last reader, on its own (as torch frees it).

    P1's models free an op's outputs together (``place_releases``, Checkmate's
    convention); torch frees a batch norm's output while its statistics live on to the
    backward.  Each copy of a non-persistent tensor (a graph input's from the start) is
    released after the last computation that reads it before its producer runs again, or
    right after it is made when nothing reads it.  A tensor of ``hold`` keeps its copy
    through a rerun of its producer before the computation ``hold`` names (a region's kept
    output, which ops outside the region read until then): the rerun makes no new one.  A
    tensor of ``until`` lives at least to the computation it names (a checkpointed region's
    input, which torch's checkpoint holds for the rerun until the region's backward ends).
    """
    hold, until = hold or {}, until or {}
    release_after: dict[int, list[str]] = {}
    live: dict[str, int] = {}  # tensor -> index of the last computation that made or read its copy
    for tensor in graph.tensors:
        if not tensor.persistent and tensor.producer is None:
            live[tensor.id] = -1
    for i, op_id in enumerate(computations):
        op = graph.op(op_id)
        for t in dict.fromkeys(op.inputs):
            if t in live:
                live[t] = i
        for t in dict.fromkeys(op.outputs):
            if graph.tensor(t).persistent:
                continue
            if t in live and hold.get(t, -1) > i:  # still held: the rerun makes no copy
                continue
            if t in live:  # a recomputation makes a new copy: the old one ends at its last reader
                release_after.setdefault(live[t], []).append(t)
            live[t] = i
    for t, last in live.items():
        release_after.setdefault(max(last, until.get(t, -1)), []).append(t)
    steps: list[Compute | Release] = [Release(t) for t in release_after.get(-1, [])]
    for i, op_id in enumerate(computations):
        steps.append(Compute(op_id))
        steps += [Release(t) for t in release_after.get(i, [])]
    return steps


def solve_torch_class(instance: Instance, *, time_limit: float | None = None, workers: int | None = None,
                      hint: Any = None, **options: Any) -> BackendResult:
    """TC.K4: the cheapest set of checkpointed modules whose sequence fits the budget.

    Each region's effect is measured alone: its recompute cost (TC.K3) and, at every
    first computation, the memory it adds or saves there.  Taking a plan's memory at each
    point as the store-all memory plus its regions' effects, a 0-1 model (CP-SAT) picks
    disjoint regions of least cost under the budget at every point.  Its plan is then
    built and measured by :func:`region_sequence`: should its peak break the budget, the
    plan is cut off and the model solved again; should it fit with a memory that is not
    the effects' sum somewhere, the model is not exact there and the plan comes back
    feasible, with no bound.  ``regions`` (option) names the modules and runs a model can checkpoint
    (``monet_ilp.torch`` passes the ones it can wrap); a region that drops nothing is left
    out.
    """
    from ortools.sat.python import cp_model  # OR-Tools takes a second to import: only when solving

    require_sequence_form(instance, "torch_checkpoint")
    deadline = Deadline(time_limit)
    allowed = options.get("regions")
    everything = _kept(instance, [])
    regions = [r for r in regions_of(instance.graph, None if allowed is None else set(allowed))
               if _kept(instance, [r]) != everything]  # a region that drops nothing changes nothing
    base = region_sequence(instance, [])
    base_cycles = int(base.meta["compute_cycles"])
    base_profile = memory_profile(instance, list(base.steps))
    singles = [region_sequence(instance, [r]) for r in regions]
    cost = [int(q.meta["compute_cycles"]) - base_cycles for q in singles]
    effect = [[m - b for m, b in zip(memory_profile(instance, list(q.steps)), base_profile, strict=True)]
              for q in singles]
    budget = instance.budget_bytes
    stats: dict[str, Any] = {"regions": len(regions), "bound_class": TC_CLASS, "rounds": 0}
    model, x = _disjoint_regions(regions)
    for point, used in enumerate(base_profile):  # TC.K4 the budget at every first computation
        terms = [(effect[k][point], x[k]) for k in range(len(regions)) if effect[k][point]]
        if used > budget or terms:
            model.add(sum(c * v for c, v in terms) <= budget - used)
    model.minimize(sum(c * v for c, v in zip(cost, x, strict=True)))
    bound: float | None = None
    while True:
        if deadline.passed():
            return BackendResult(Status.UNKNOWN, bound=bound, stats=stats,
                                 message="torch_checkpoint: time limit before a plan was found")
        run = run_cpsat(model, deadline=deadline, workers=workers)
        stats["rounds"] += 1
        if run.status == cp_model.INFEASIBLE:
            least = _least_peak(instance, regions, base_profile, effect, deadline, workers)
            stats.update(least_peak_bytes=least)
            return BackendResult(Status.INFEASIBLE, stats=stats, message=(
                f"no set of checkpointed modules fits in {budget} bytes; the least peak of the class is {least} "
                f"bytes (give a budget of at least that)"))
        if not run.has_solution:
            return BackendResult(Status.UNKNOWN, bound=bound, stats=stats,
                                 message=f"torch_checkpoint: CP-SAT stopped ({run.status_name})")
        bound = base_cycles + run.solver.best_objective_bound
        chosen = [k for k in range(len(regions)) if run.solver.value(x[k])]
        sequence = region_sequence(instance, [regions[k] for k in chosen])
        cycles, peak = int(sequence.meta["compute_cycles"]), int(sequence.meta["peak_bytes"])
        if peak <= budget and cycles == base_cycles + sum(cost[k] for k in chosen):
            stats.update(checkpointed=list(sequence.meta["checkpointed"]))
            predicted = [b + sum(effect[k][point] for k in chosen) for point, b in enumerate(base_profile)]
            if memory_profile(instance, list(sequence.steps)) != predicted:
                # TC.K4: the effects did not add up on this plan, so the model is not exact here:
                # the plan is verified, its optimality and the model's bound are not proved
                stats["effects_added_up"] = False
                return BackendResult(Status.FEASIBLE, sequence, cycles, bound=None, stats=stats, message=(
                    f"over {TC_CLASS}; the regions' memory effects did not add up on this plan, so no bound"))
            status = Status.OPTIMAL if run.status == cp_model.OPTIMAL else Status.FEASIBLE
            return BackendResult(status, sequence, cycles, bound=bound, stats=stats, message=f"over {TC_CLASS}")
        # TC.K4: the effects did not add up on this plan; cut it off and solve again
        stats["cut"] = stats.get("cut", 0) + 1
        model.add_bool_or([x[k].Not() for k in chosen] + [x[k] for k in range(len(regions)) if k not in chosen])


def _disjoint_regions(regions: list[Region]) -> tuple[Any, list[Any]]:
    """A CP-SAT model with one 0-1 variable per region, overlapping regions never both chosen (TC.K1)."""
    from ortools.sat.python import cp_model  # OR-Tools takes a second to import: only when solving

    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x[{r.path}]") for r in regions]
    ops_of = [set(r.ops) for r in regions]
    for a in range(len(regions)):
        for b in range(a + 1, len(regions)):
            if ops_of[a] & ops_of[b]:
                model.add_at_most_one(x[a], x[b])
    return model, x


def _least_peak(instance: Instance, regions: list[Region], base_profile: list[int], effect: list[list[int]],
                deadline: Deadline, workers: int | None) -> int:
    """TC.K4: the least peak of any plan of the class (the least budget it can meet), by the same model."""
    model, x = _disjoint_regions(regions)
    peak = model.new_int_var(0, max(base_profile), "peak")
    for point, used in enumerate(base_profile):
        model.add(peak >= used + sum(effect[k][point] * x[k] for k in range(len(regions)) if effect[k][point]))
    model.minimize(peak)
    run = run_cpsat(model, deadline=deadline, workers=workers)
    if not run.has_solution:
        return max(base_profile)
    chosen = [regions[k] for k in range(len(regions)) if run.solver.value(x[k])]
    return int(region_sequence(instance, chosen).meta["peak_bytes"])
