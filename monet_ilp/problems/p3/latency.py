"""Lower bounds on the latency of every P3 schedule: BD.B1, BD.B2, the pin LP BD.B9 and
the placement MILP BD.B12.

``formulations/bounds.md``.  BD.B1 (the critical path) and BD.B2 (the work over the
cores) price every op at its fastest, pinned or not, as if every persistent tensor could
be pinned at once.  When the weights do not fit in the SRAMs together (ResNet-18's 89 MB
against four 3 MiB SRAMs; an MLP of depth 16 on hetero_quad), most ops run at their
unpinned cost, which is often twice the pinned one.  BD.B9 is the LP that lets the pins
share the room they have: it is the critical path and the work bound at once, with each
op's pinned saving bought by pinning all of its persistent inputs, and the pinned bytes
within the SRAMs' room (as BD.B5 for energy).

BD.B9 pools the SRAMs.  A pin is in one SRAM, though, and every run that reads a pinned
tensor runs on a core of that SRAM: the ops that gain from pins crowd onto the cores
whose SRAMs hold them, and a path that changes SRAMs waits for its data to cross.
BD.B12 places the pins and the runs per SRAM (a MILP, solved by HiGHS within a time
limit; its dual bound holds when it stops early), and its tail rows (BD.B12.10) pack
what must run after an op's earliest end on the cores between that end and the makespan:
the optimizer steps of the weights pinned beside the critical chain, for instance.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import RowModel, SparseMilp, safe_ceil

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p3.data import P3Data

__all__ = ["PLAIN_SHARE", "TAIL_TERMS", "PlacementBound", "latency_floor", "pin_room", "pinned_path_bound",
           "placement_path_bound", "work_bound"]


#: BD.B12: the share of the time left that the MILP without BD.B12.10's rows gets first.
PLAIN_SHARE = 0.5
#: BD.B12.10: about the most (op, descendant) pairs the tail rows take, over all SRAMs.
TAIL_TERMS = 400_000


def work_bound(data: P3Data) -> int:
    """BD.B2: every op runs at least once, at its fastest, on one of the cores."""
    cheapest = [min(list(op.cycles.values()) + list(op.pinned_cycles.values())) for op in data.ops]
    return -(-sum(cheapest) // len(data.cores))


def pin_room(data: P3Data) -> int:
    """The bytes pinned at once at most (BD.B5): the SRAMs' capacity less the largest op's footprint."""
    srams = {data.memory_of[c] for c in data.cores}
    return max(sum(data.capacity[m] for m in srams) - data.min_sram_bytes(), 0)


def pinned_path_bound(data: P3Data) -> int | None:
    """BD.B9: the latency LP over pin fractions; ``None`` when no pin saves anything.

    Columns: the latency ``L``, an end ``F_v`` per op, ``x_v`` (how much of op ``v``'s
    pinned saving ``s_v`` it gets) and ``y_p`` (how much of persistent tensor ``p`` is
    pinned).  Rows, for every op ``v`` with unpinned cost ``u_v`` (its cheapest core):

    * BD.B9.1 ``F_v + s_v x_v >= F_w + u_v`` for each op ``w`` it must follow (the
      producers of its inputs, and ``after``), and ``>= a_i + u_v`` for each graph input
      ``i`` it reads (``a_i``: the input's earliest arrival, as BD.B1);
    * BD.B9.2 ``L >= F_v``;
    * BD.B9.3 ``x_v <= y_p`` for each persistent tensor ``p`` it reads;
    * BD.B9.4 ``Σ_p bytes_p y_p <= room`` (:func:`pin_room`);
    * BD.B9.5 ``|cores| L + Σ_v s_v x_v >= Σ_v u_v`` (the work bound).

    Minimise ``L``.  Every schedule pins a set ``S`` for the whole iteration, and then
    every run of ``v`` takes at least ``u_v − s_v`` if all of ``v``'s persistent inputs
    are in ``S`` and ``u_v`` otherwise; setting ``x``, ``y`` to the indicators of ``S``
    and ``F`` to BD.B1's ends under those durations is a solution of the LP with ``L``
    at most the schedule's latency.  So the LP's optimum is a lower bound.
    """
    unpinned = [min(op.cycles.values()) for op in data.ops]
    saving = [max(0, u - min(op.pinned_cycles.values())) if op.pinned_cycles and op.persistent_reads else 0
              for u, op in zip(unpinned, data.ops, strict=True)]
    if not any(saving):
        return None
    model = RowModel()
    latency = model.col(1.0, integer=False, upper=math.inf)
    end = [model.col(0.0, integer=False, upper=math.inf) for _ in data.ops]
    share = {v: model.col(0.0, integer=False) for v, s in enumerate(saving) if s}
    pinnable = {p.index for p in data.persistent if p.pin_memories}
    pin = {p: model.col(0.0, integer=False) for v in share for p in data.ops[v].persistent_reads if p in pinnable}
    for op in data.ops:
        v = op.index
        gain = {share[v]: float(saving[v])} if v in share else {}
        before = set(op.after)
        earliest = 0
        for i in op.reads:
            producer = data.items[i].producer
            if producer is None:
                earliest = max(earliest, data.input_arrival_cycles(i, v))
            else:
                before.add(producer)
        for w in sorted(before):  # BD.B9.1
            model.row({end[v]: 1.0, end[w]: -1.0, **gain}, unpinned[v], math.inf)
        model.row({end[v]: 1.0, **gain}, earliest + unpinned[v], math.inf)
        model.row({latency: 1.0, end[v]: -1.0}, 0.0, math.inf)  # BD.B9.2
        if v in share:  # BD.B9.3: the saving needs every persistent input pinned
            for p in op.persistent_reads:
                if p in pin:
                    model.row({share[v]: 1.0, pin[p]: -1.0}, -math.inf, 0.0)
                else:
                    model.row({share[v]: 1.0}, -math.inf, 0.0)
    model.row({pin[p]: float(data.persistent[p].bytes) for p in pin}, -math.inf, float(pin_room(data)))  # BD.B9.4
    model.row({latency: float(len(data.cores)), **{share[v]: float(saving[v]) for v in share}},
              float(sum(unpinned)), math.inf)  # BD.B9.5
    run = run_highs(model.milp(), relax=True)
    if run.status != "optimal" or run.objective is None:
        return None
    return safe_ceil(run.objective)


def latency_floor(data: P3Data) -> int:
    """The largest of BD.B1, BD.B2 and BD.B9."""
    return max(data.critical_path_cycles(), work_bound(data), pinned_path_bound(data) or 0)


@dataclass(frozen=True)
class PlacementBound:
    """BD.B12's outcome: ``value`` (``None`` without one), ``method`` (``"milp"`` when
    proven, ``"milp-bound"`` for the dual bound of a run stopped early, ``"lp"``), and
    the model's size."""

    value: int | None
    method: str
    seconds: float
    columns: int
    rows: int


def placement_path_bound(data: P3Data, deadline: Deadline | None = None, *, tails: bool = True) -> PlacementBound:
    """BD.B12: the latency MILP over the pins and the SRAM of each op's runs.

    Notation of ``formulations/bounds.md`` (BD.B12): for op ``v`` and SRAM ``m`` of one
    of its cores, ``u_{v,m}`` is its fastest unpinned cycles there and ``s_{v,m}`` what
    the pinned cost saves.  ``E_v`` is the earliest end of a run of ``v`` and ``R_v`` a
    run that ends then.  Columns: ``L``, ``E_v``; ``y[p,m]`` (``p`` pinned in ``m``),
    ``h[v,m]`` (a run of ``v`` on ``m``), ``a[v,m]`` (``R_v`` on ``m``), all binary;
    ``g[v,m]``, ``q[v,m]`` (the pinned saving on ``R_v``, on some run on ``m``) and
    ``f_m`` (the largest footprint on ``m``) continuous.  Minimise ``L`` subject to the
    rows BD.B12.1-B12.9, and with ``tails`` BD.B12.10: every run after ``E_w`` fits on
    the cores of each SRAM between ``E_w`` and ``L`` (cited in the code).  HiGHS solves the
    LP, the MILP without BD.B12.10 in :data:`PLAIN_SHARE` of the time (it often proves its
    optimum at once), then the MILP with it in what is left; the value is the largest of
    the LP's optimum and the two dual bounds by ``deadline``, rounded up.
    """
    began = time.perf_counter()
    plain = _placement_model(data, tails=False)
    tailed = _placement_model(data, tails=True) if tails else plain
    best: tuple[int, str] | None = None

    def take(value: float | None, method: str) -> None:
        nonlocal best
        if value is not None and math.isfinite(value) and (best is None or safe_ceil(value) > best[0]):
            best = (safe_ceil(value), method)

    lp = run_highs(tailed, relax=True, deadline=deadline)  # BD.B12.10's rows only add to the LP
    if lp.status == "optimal":
        take(lp.objective, "lp")
    # The plain model often proves its optimum at once; BD.B12.10 then gets what it left.
    for milp, share in ((plain, PLAIN_SHARE), (tailed, 1.0)) if tails else ((plain, 1.0),):
        if deadline is not None and deadline.passed():
            break
        run = run_highs(milp, deadline=None if deadline is None else deadline.sub(share), gap_abs=0.5)
        take(run.bound, "milp" if run.status == "optimal" else "milp-bound")
    return PlacementBound(None if best is None else best[0], "none" if best is None else best[1],
                          round(time.perf_counter() - began, 3), tailed.num_cols, tailed.num_rows)


def _placement_model(data: P3Data, *, tails: bool) -> SparseMilp:
    """BD.B12's MILP (rows BD.B12.1-B12.9), with BD.B12.10's tail rows when ``tails``."""
    srams = list(dict.fromkeys(data.memory_of[c] for c in data.cores))
    per_sram = {m: sum(1 for c in data.cores if data.memory_of[c] == m) for m in srams}
    model = RowModel()
    latency = model.col(1.0, integer=False, upper=math.inf)
    end = [model.col(0.0, integer=False, upper=math.inf) for _ in data.ops]
    pin: dict[tuple[int, str], int] = {}
    for tensor in data.persistent:
        for m in tensor.pin_memories:
            pin[tensor.index, m] = model.col(0.0)
        if len(tensor.pin_memories) > 1:  # BD.B12.1 one SRAM per pin
            model.row({pin[tensor.index, m]: 1.0 for m in tensor.pin_memories}, -math.inf, 1.0)
    largest = {m: model.col(0.0, integer=False, upper=math.inf) for m in srams}
    work: dict[str, dict[int, float]] = {m: {latency: float(per_sram[m])} for m in srams}
    ran: dict[tuple[int, str], int] = {}
    path: dict[tuple[int, str], int] = {}
    duration: list[dict[int, float]] = []
    busy_on: dict[tuple[int, str], dict[int, float]] = {}  # -(BD.B12.9's terms of v on m)
    for op in data.ops:
        v = op.index
        fastest: dict[str, int] = {}
        for c, cycles in op.cycles.items():
            m = data.memory_of[c]
            fastest[m] = min(fastest.get(m, cycles), cycles)
        pinned: dict[str, int] = {}
        for c, cycles in op.pinned_cycles.items():
            m = data.memory_of[c]
            pinned[m] = min(pinned.get(m, cycles), cycles)
        footprint = float(sum(data.items[i].bytes for i in set(op.reads) | set(op.writes)))
        length: dict[int, float] = {}
        for m, u in fastest.items():
            h = ran[v, m] = model.col(0.0)
            a = path[v, m] = model.col(0.0)
            model.row({a: 1.0, h: -1.0}, -math.inf, 0.0)  # BD.B12.2 R_v is a run on m
            length[a] = float(u)
            busy = {h: -float(u)}
            saving = u - pinned.get(m, u)
            if saving > 0 and all((p, m) in pin for p in op.persistent_reads):
                g = model.col(0.0, integer=False)
                q = model.col(0.0, integer=False)
                for j, on in ((g, a), (q, h)):  # BD.B12.3 the pinned cost needs every read pinned
                    model.row({j: 1.0, on: -1.0}, -math.inf, 0.0)
                    for p in op.persistent_reads:
                        model.row({j: 1.0, pin[p, m]: -1.0}, -math.inf, 0.0)
                length[g] = -float(saving)
                busy[q] = float(saving)
            for j, weight in busy.items():
                work[m][j] = work[m].get(j, 0.0) + weight
            busy_on[v, m] = busy
            if footprint:  # BD.B12.8 the largest footprint on m
                model.row({largest[m]: 1.0, h: -footprint}, 0.0, math.inf)
        model.row({path[v, m]: 1.0 for m in fastest}, 1.0, 1.0)  # BD.B12.2 R_v on one SRAM
        duration.append(length)
        for p in op.persistent_reads:  # BD.B12.4 a pinned tensor's readers run on its SRAM
            for home in data.persistent[p].pin_memories:
                if home not in fastest:
                    model.upper[pin[p, home]] = 0.0
                for m in fastest:
                    if m != home:
                        model.row({ran[v, m]: 1.0, pin[p, home]: 1.0}, -math.inf, 1.0)
    if tails:
        for before, after in _descendants(data, TAIL_TERMS // max(1, 2 * len(srams))):
            for m in srams:  # BD.B12.10 every run of a descendant of w starts after E_w
                row = {latency: float(per_sram[m]), end[before]: -float(per_sram[m])}
                for later in after:
                    for j, weight in busy_on.get((later, m), {}).items():
                        row[j] = row.get(j, 0.0) + weight
                if len(row) > 2:
                    model.row(row, 0.0, math.inf)
    for m in srams:
        model.row({**{j: float(data.persistent[p].bytes) for (p, mm), j in pin.items() if mm == m},
                   largest[m]: 1.0}, -math.inf, float(data.capacity[m]))  # BD.B12.8
        model.row(work[m], 0.0, math.inf)  # BD.B12.9 the runs on m fit in L on its cores
    for op in data.ops:
        v = op.index
        start = {end[v]: 1.0, **{j: -c for j, c in duration[v].items()}}  # R_v's start
        earliest = 0
        for i in op.reads:
            item = data.items[i]
            w = item.producer
            if w is None:
                earliest = max(earliest, data.input_arrival_cycles(i, v))
                continue
            model.row({**start, end[w]: -1.0}, 0.0, math.inf)  # BD.B12.5
            for m in srams:  # BD.B12.6 from another SRAM, the item crosses first
                crossing = min((r.cycles for r in item.routes if r.dst == m), default=0)
                if (v, m) not in path or not crossing:
                    continue
                row = {**start, end[w]: -1.0}
                row[path[v, m]] = row.get(path[v, m], 0.0) - crossing
                if (w, m) in ran:
                    row[ran[w, m]] = row.get(ran[w, m], 0.0) + crossing
                model.row(row, 0.0, math.inf)
        for w in op.after:
            model.row({**start, end[w]: -1.0}, 0.0, math.inf)  # BD.B12.5
        model.row(start, float(earliest), math.inf)
        model.row({latency: 1.0, end[v]: -1.0}, 0.0, math.inf)  # BD.B12.7
    return model.milp()


def _descendants(data: P3Data, terms: int) -> list[tuple[int, list[int]]]:
    """Each op with its descendants over item reads and ``after`` (BD.B12.10), at most
    about ``terms`` of them in all: past that, the ops are taken evenly over the
    instance's (topological) order."""
    below = [[v for v in range(data.n) if bits >> v & 1] for bits in data.ancestry()[1]]
    total = sum(len(after) for after in below)
    step = max(1, math.ceil(total / terms)) if terms > 0 else data.n + 1
    return [(w, below[w]) for w in range(0, data.n, step) if below[w]]
