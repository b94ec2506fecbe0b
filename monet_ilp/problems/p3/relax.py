"""The pivot relaxation: a lower bound on the energy of every P3 schedule (``formulations/bounds.md`` BD.E).

The closed-form energy bound (BD.B3 with BD.B5) prices every op once on its cheapest
core and lets pinning save as much as the SRAMs' total capacity allows, as if nothing
else needed the room.  In a training graph something else does: the activations the
backward pass reads.  The pivot relaxation couples the two.

Take any op ``p`` and the instant its first run starts.  Every item made before it (by
an ancestor of ``p``) and read after it (by a descendant) is, at that instant, in some
SRAM, or only in a shared memory (it was offloaded and comes back: two transfers), or
it will be made again (a recomputation).  The pinned tensors sit in their SRAMs all the
while, and ``p``'s own inputs and outputs sit in the SRAM of its core.  One capacity row
per SRAM and per pivot, and a choice of core for each op's first run (which decides
which pins it can use and which of its inputs must cross between cores; a pinned tensor
is read on its SRAM's cores only, so a pin also places every op that reads it), make a small
MILP whose optimum, and whose dual bound at any time, is a lower bound on the energy of
every schedule the evaluator accepts.  ``formulations/bounds.md`` BD.E0-BD.E9 states
the model and why every schedule gives one of its solutions.

It is solved as an LP first (milliseconds on a hundred ops), then as a MILP in the
time left; the larger of the two values is the bound.
"""

from __future__ import annotations

import dataclasses
import math
import time
import weakref
from dataclasses import dataclass
from typing import Generic, TypeVar

from monet_ilp.engines.deadline import Deadline
from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import RowModel, safe_ceil
from monet_ilp.evaluate import evaluate
from monet_ilp.heuristics.decisions import Decisions, decode, plan_of
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems.p3.data import P3Data, p3_data
from monet_ilp.problems.p3.latency import latency_floor

__all__ = ["MAX_PAIRS", "EnergyRelaxation", "Recent", "energy_relaxation", "instance_key", "relaxation_decisions"]

_R = TypeVar("_R")

#: At most this many (item, pivot) pairs (the ``κ`` columns per SRAM) are modelled; above
#: it the pivots that see the most bytes in flight are kept (any set of pivots gives a
#: relaxation, BD.E6).
MAX_PAIRS = 60_000


@dataclass(frozen=True)
class EnergyRelaxation:
    """The pivot relaxation's bound on the energy of every schedule (picojoules).

    Attributes
    ----------
    value
        The bound, rounded up after HiGHS's tolerance (``None`` when neither the LP nor
        the MILP was solved in time).
    method
        ``"milp"`` (the MILP proved its optimum), ``"milp-bound"`` (its dual bound at the
        time limit), ``"lp"`` (the LP relaxation), or ``"none"``.
    seconds, columns, rows, pivots
        Cost and size of the model.
    detail
        What the bound is made of, in words.
    """

    value: int | None
    method: str
    seconds: float
    columns: int
    rows: int
    pivots: int
    detail: str


class _Model(RowModel):
    """Columns and rows of BD.E0-BD.E9, built once from the P3 data, and the columns a
    solution is read from: ``z[v, m]``, ``pi[w, m]``, ``rho[f]``, ``o[x]``."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[tuple[int, str], int] = {}
        self.pin: dict[tuple[int, str], int] = {}
        self.again: dict[int, int] = {}
        self.offload: dict[int, int] = {}


def energy_relaxation(
    instance: Instance, *, time_limit: float | None = None, integer: bool = True
) -> EnergyRelaxation:
    """Bound the energy of every schedule of a P3 (or P2) instance by the pivot relaxation.

    Parameters
    ----------
    instance
        A P3 instance, or a P2 instance (bounded through its P3 view); its objective does
        not matter (the energy is bounded).
    time_limit
        Seconds for the LP and the MILP together (``None``: until the MILP is proven).
    integer
        Also solve the MILP after the LP (``False``: the LP alone).

    Returns
    -------
    EnergyRelaxation
        Every schedule the evaluator accepts uses at least ``value`` picojoules, under any
        runtime limit.
    """
    cached = _RECENT.get(instance, integer)
    if cached is not None and (
        cached.method in ("milp", "lp" if not integer else "milp")
        or (time_limit is not None and cached.seconds >= time_limit)
    ):
        return cached
    result = _solve(instance, time_limit, integer)[0]
    _RECENT.put(instance, result, integer)
    return result


class Recent(Generic[_R]):
    """The last few results of a bound over every schedule, by :func:`instance_key` (and
    whatever else the result depends on); an entry holds while its instance's graph lives.

    The bounds read neither the objective nor a runtime limit, so the instances of a
    portfolio, a Pareto sweep or a grading run share one entry.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._entries: dict[tuple[object, ...], tuple[weakref.ref[object], _R]] = {}

    def get(self, instance: Instance, *extra: object) -> _R | None:
        found = self._entries.get((*instance_key(instance), *extra))
        return found[1] if found is not None and found[0]() is instance.graph else None

    def put(self, instance: Instance, result: _R, *extra: object) -> None:
        if len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)))  # the oldest
        self._entries[(*instance_key(instance), *extra)] = (weakref.ref(instance.graph), result)


#: BD.E's recent results (by instance, and LP or MILP).
_RECENT: Recent[EnergyRelaxation] = Recent()


def instance_key(instance: Instance) -> tuple[object, ...]:
    """What a bound over every schedule depends on: the graph, costs and hardware, not the
    objective or the runtime limit (a cache key; the graph by identity)."""
    costs = tuple(
        (op, core, c.cycles, c.energy_pj)
        for table in (instance.costs, instance.pinned_costs)
        for op, per_core in table.items()
        for core, c in per_core.items()
    )
    return (
        id(instance.graph),
        hash(costs),
        instance.cores,
        instance.memories,
        instance.links,
        instance.input_home,
        instance.persistent_home,
        instance.static_fj_per_cycle,
    )


def relaxation_decisions(
    instance: Instance, *, time_limit: float | None = None
) -> Decisions | None:
    """The decisions the pivot relaxation's MILP solution suggests: a start for energy.

    Each layer goes to the core of its lead op's first run (``z``), the tensors pinned
    in some SRAM (``pi``) are pinned, a saved activation is ``recompute`` when its
    producer runs twice (``rho``), ``offload`` when it makes the round trip (``o``), and
    kept otherwise.  ``rho`` is a relaxation's choice (BD.E6 takes a recomputation for an
    item that need not be resident at a pivot), and decoded literally it can cost more
    than it saves, so the same decisions with those activations kept (the decoder evicts
    to DRAM where they do not fit) are decoded too, and the cheaper in energy of the two
    that the evaluator accepts is returned (``meta["recompute"]``: ``"rho"`` or
    ``"kept"``; ``meta["energy_pj"]`` both energies).
    :func:`~monet_ilp.heuristics.decisions.decode` turns them into a schedule, which the
    evaluator checks as any other.  ``None`` when the MILP found no solution in time.
    """
    result, data, model, values = _solve(instance, time_limit, True)
    _RECENT.put(instance, result, True)  # the bound of this solve serves energy_relaxation too
    if values is None:
        return None
    plan = plan_of(instance)
    op_index = {op.id: op.index for op in data.ops}
    core_at: dict[str, list[str]] = {}
    for c in data.cores:
        core_at.setdefault(data.memory_of[c], []).append(c)
    cores: dict[str, str] = {}
    weight: dict[str, dict[str, float]] = {}  # layer -> SRAM -> energy of its ops first run there
    for (v, m), j in model.first.items():
        op = data.ops[v]
        share = weight.setdefault(op.layer, {})
        share[m] = share.get(m, 0.0) + values[j] * min(op.energy_pj.values())
    for layer in plan.layers:
        lead = data.ops[op_index[plan.lead_op[layer]]]
        allowed = {data.memory_of[c] for c in lead.energy_pj}
        memory = max(sorted(allowed), key=lambda m: weight.get(layer, {}).get(m, 0.0))
        cores[layer] = min(
            (c for c in core_at[memory] if c in lead.energy_pj), key=lambda c: lead.energy_pj[c]
        )
    pinned = tuple(data.persistent[w].id for (w, m), j in model.pin.items() if values[j] > 0.5)
    item_of = {t: item.index for item in data.items for t in item.tensors}
    tensors: dict[str, str] = {}
    for t in plan.saved:
        x = item_of.get(t)
        producer = None if x is None else data.items[x].producer
        if producer is not None and producer in model.again and values[model.again[producer]] > 0.5:
            tensors[t] = "recompute"
        elif x is not None and x in model.offload and values[model.offload[x]] > 0.5:
            tensors[t] = "offload"
        else:
            tensors[t] = "keep"
    kept = {t: "keep" if policy == "recompute" else policy for t, policy in tensors.items()}
    candidates = {"rho": tensors, "kept": kept} if kept != tensors else {"rho": tensors}
    energy: dict[str, int | None] = {}
    for name, policies in candidates.items():
        metrics = evaluate(instance, decode(instance, Decisions(policies, cores, {}, pinned)))
        energy[name] = metrics.energy.total_pj if metrics.feasible else None
    chosen = min(candidates, key=lambda name: (energy[name] is None, energy[name] or 0, name != "rho"))
    meta = {"source": "energy relaxation (bounds.md BD.E)", "recompute": chosen, "energy_pj": energy}
    return Decisions(candidates[chosen], cores, meta, pinned)


def _solve(
    instance: Instance, time_limit: float | None, integer: bool
) -> tuple[EnergyRelaxation, P3Data, _Model, list[float] | None]:
    """Build and solve the relaxation; also the data, the model and the MILP's best solution."""
    began = time.perf_counter()
    deadline = Deadline(time_limit)
    view = dataclasses.replace(
        instance, problem=Problem.P3, objective=Objective.LATENCY, runtime_limit_cycles=None
    )
    data = p3_data(view)
    model, pivots = _build(data)
    offset = float(data.static_pj(latency_floor(data)))  # static energy grows with the latency
    milp = model.milp(offset)
    best: tuple[int, str] | None = None
    values = None
    lp = run_highs(milp, relax=True, deadline=deadline.sub(0.25) if integer else deadline)
    if lp.status == "optimal" and lp.objective is not None:
        best = (safe_ceil(lp.objective), "lp")
    if integer and not deadline.passed():
        run = run_highs(milp, deadline=deadline, gap_abs=0.5)
        values = run.values
        if run.bound is not None and math.isfinite(run.bound):
            value = safe_ceil(run.bound)
            if best is None or value >= best[0]:
                best = (value, "milp" if run.status == "optimal" else "milp-bound")
    cols, rows = milp.num_cols, milp.num_rows
    detail = (
        f"pivot relaxation over {pivots} pivots ({cols} columns, {rows} rows): first-run cores, pins "
        "per SRAM, transfers between cores, and what each SRAM holds when each op first starts"
    )
    result = EnergyRelaxation(
        None if best is None else best[0],
        "none" if best is None else best[1],
        round(time.perf_counter() - began, 3),
        cols,
        rows,
        pivots,
        detail,
    )
    return result, data, model, values


def _build(data: P3Data) -> tuple[_Model, int]:
    """The columns and rows of BD.E0-BD.E9 (the objective's constant is the static part)."""
    model = _Model()
    srams = list(dict.fromkeys(data.memory_of[c] for c in data.cores))
    shared = [m for m in data.memories if m not in srams]

    # BD.E2 pins: pi[w, m], each tensor in at most one SRAM.
    pin = model.pin
    for tensor in data.persistent:
        for m in tensor.pin_memories:
            pin[tensor.index, m] = model.col(0.0)
        if len(tensor.pin_memories) > 1:
            model.row([(pin[tensor.index, m], 1.0) for m in tensor.pin_memories], -math.inf, 1.0)

    # BD.E1 and BD.E3: the first run of each op on the cores of one SRAM, at its cheapest
    # unpinned energy there, less the pinned saving when all it reads is pinned there.
    first = model.first
    for op in data.ops:
        by_memory: dict[str, list[str]] = {}
        for c in op.energy_pj:
            by_memory.setdefault(data.memory_of[c], []).append(c)
        for m, cores in by_memory.items():
            plain = min(op.energy_pj[c] for c in cores)
            z = first[op.index, m] = model.col(plain)
            pinned = [op.pinned_energy_pj[c] for c in cores if c in op.pinned_energy_pj]
            saving = plain - min(pinned, default=plain)
            if saving > 0 and all((w, m) in pin for w in op.persistent_reads):
                g = model.col(-saving, integer=False)
                model.row([(g, 1.0), (z, -1.0)], -math.inf, 0.0)
                for w in op.persistent_reads:
                    model.row([(g, 1.0), (pin[w, m], -1.0)], -math.inf, 0.0)
        model.row([(first[op.index, m], 1.0) for m in by_memory], 1.0, 1.0)

    # BD.E9 pinned readers: a tensor pinned in m is read from m only (EV.E2 not_resident),
    # so every op that reads it first runs on a core of m; one that cannot forbids the pin.
    for op in data.ops:
        for w in op.persistent_reads:
            for m in data.persistent[w].pin_memories:
                if (op.index, m) in first:
                    model.row([(first[op.index, m], 1.0), (pin[w, m], -1.0)], 0.0, math.inf)
                else:
                    model.upper[pin[w, m]] = 0.0

    # rho[f]: op f runs at least twice, at its cheapest energy anywhere.
    cheapest = [
        min(list(op.energy_pj.values()) + list(op.pinned_energy_pj.values())) for op in data.ops
    ]
    again = model.again

    def rerun(f: int) -> int:
        if f not in again:
            again[f] = model.col(cheapest[f])
        return again[f]

    # tau[x, m]: at least one transfer of item x into SRAM m, at the cheapest route into m.
    into: dict[tuple[int, str], int | None] = {}

    def moved_in(x: int, m: str) -> int | None:
        if (x, m) not in into:
            pj = min((r.energy_pj for r in data.items[x].routes if r.dst == m), default=None)
            into[x, m] = None if pj is None else model.col(pj)
        return into[x, m]

    # BD.E4 reads: the first run of reader r on m reads x from a copy in m.
    for item in data.items:
        leave = _leave_home(data, item.index, srams, shared) if item.producer is None else None
        lam = None if leave is None else model.col(leave)
        for r in item.readers:
            for m in srams:
                if (r, m) not in first:
                    continue
                z = first[r, m]
                if item.producer is None:
                    if m == data.input_home:
                        continue
                    t = moved_in(item.index, m)
                    if t is not None:
                        model.row([(t, 1.0), (z, -1.0)], 0.0, math.inf)
                    if lam is not None:
                        model.row([(lam, 1.0), (z, -1.0)], 0.0, math.inf)
                    continue
                f = item.producer
                terms = [(rerun(f), 1.0), (z, -1.0)]
                if (f, m) in first:
                    terms.append((first[f, m], 1.0))
                t = moved_in(item.index, m)
                if t is not None:
                    terms.append((t, 1.0))
                model.row(terms, 0.0, math.inf)

    # BD.E5-BD.E7: what each SRAM holds when each op first starts.
    anc, desc = data.ancestry()
    # (pivot, items in flight with their producers, bytes in flight)
    crossing: list[tuple[int, list[tuple[int, int]], int]] = []
    for p in range(data.n):
        op = data.ops[p]
        own = set(op.reads) | set(op.writes)
        flying = [
            (x.index, x.producer)
            for x in data.items
            if x.producer is not None
            and x.producer != p
            and x.bytes > 0
            and x.index not in own
            and (anc[p] >> x.producer) & 1
            and any((desc[p] >> b) & 1 for b in x.readers)
        ]
        crossing.append((p, flying, sum(data.items[x].bytes for x, _ in flying)))
    chosen: list[tuple[int, list[tuple[int, int]]]] = []
    pairs = 0
    for p, flying, _ in sorted(crossing, key=lambda c: -c[2]):
        if pairs + len(flying) > MAX_PAIRS and flying:
            continue
        pairs += len(flying)
        chosen.append((p, flying))
    offload = model.offload

    def offloaded(x: int) -> int:
        # o[x] (BD.E5): the item went to a shared memory and came back into an SRAM.
        if x not in offload:
            o = offload[x] = model.col(0.0, integer=False)
            out_pj = min(
                (r.energy_pj for r in data.items[x].routes if r.dst in shared), default=None
            )
            back = [t for t in (moved_in(x, m) for m in srams) if t is not None]
            if out_pj is None or not back:
                model.upper[o] = 0.0
            else:
                delta = model.col(out_pj)
                model.row([(o, 1.0), (delta, -1.0)], -math.inf, 0.0)
                model.row([(o, 1.0)] + [(t, -1.0) for t in back], -math.inf, 0.0)
        return offload[x]

    pinned_in = {
        m: [(pin[w, mm], float(data.persistent[w].bytes)) for (w, mm) in pin if mm == m]
        for m in srams
    }
    for p, flying in chosen:
        op = data.ops[p]
        footprint = float(sum(data.items[i].bytes for i in set(op.reads) | set(op.writes)))
        held = {}
        for x, maker in flying:
            held[x] = [model.col(0.0, integer=False) for _ in srams]
            model.row(
                [(k, 1.0) for k in held[x]] + [(rerun(maker), 1.0), (offloaded(x), 1.0)],
                1.0,
                math.inf,
            )  # BD.E6
        for j, m in enumerate(srams):  # BD.E7
            terms = list(pinned_in[m]) + [
                (held[x][j], float(data.items[x].bytes)) for x, _ in flying
            ]
            if (p, m) in first:
                terms.append((first[p, m], footprint))
            if terms:
                model.row(terms, -math.inf, float(data.capacity[m]))
    return model, len(chosen)


def _leave_home(data: P3Data, item: int, srams: list[str], shared: list[str]) -> int | None:
    """BD.E4: what a graph input's first move out of its home costs beyond the ``tau`` columns.

    That transfer goes into an SRAM ``m`` (costing at least the cheapest route from home
    into ``m``, of which ``tau[x, m]`` already pays the cheapest route into ``m``) or into
    a shared memory (which no ``tau`` column pays).  ``None`` when no reader can be away
    from home (the home is an SRAM) or nothing is left to pay.
    """
    home = data.input_home
    if home in srams:
        return None
    routes = data.items[item].routes
    extra = []
    for m in srams:
        from_home = [r.energy_pj for r in routes if r.src == home and r.dst == m]
        anywhere = [r.energy_pj for r in routes if r.dst == m]
        if from_home:
            extra.append(min(from_home) - min(anywhere))
    extra += [r.energy_pj for r in routes if r.src == home and r.dst in shared]
    least = min(extra, default=0)
    return least if least > 0 else None
