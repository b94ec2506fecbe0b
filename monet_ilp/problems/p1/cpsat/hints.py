"""Schedules as grid cells: a Sequence's computations placed in stages, completed to every variable.

Used both ways by the backend: a hint (any baseline's :class:`~monet_ilp.schedule.Sequence`)
becomes a full assignment of the model's variables (``AddHint``), and a solver's cells
become a Sequence again (:func:`sequence_of`).  :func:`complete` is the model's own
semantics (``formulations/p1_cpsat.md``, P1C.C1-C10) run forward on a set of cells, so it
also tells whether a hint fits the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.heuristics import chen_greedy_sequence, chen_sqrt_sequence, store_all_sequence
from monet_ilp.heuristics.evict import evict_sequence
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.problems.p1.cpsat.variables import Item, Key, items_read, items_read_or_made
from monet_ilp.schedule import Compute, Release, Sequence

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.instance import Instance
    from monet_ilp.problems.p1.data import P1Data

Cell = tuple[int, int, int]  # (stage t, pass r, node i)


@dataclass(frozen=True)
class Completion:
    """Cells (``R[t,r,i] = 1``) and the value of every model variable they imply.

    ``peak`` is the model's memory peak in scaled units (the largest ``U``), ``cost``
    the objective P1C.O1.
    """

    cells: frozenset[Cell]
    values: Mapping[Key, int]
    cost: int
    peak: int
    source: str = ""

    def fits(self, grid: P1Data) -> bool:
        return self.peak <= grid.budget

    def computations(self, grid: P1Data) -> list[str]:
        """The op ids in execution order."""
        return [grid.ops[i] for _, _, i in sorted(self.cells)]


def stage_cells(grid: P1Data, computations: Iterable[str]) -> set[Cell] | None:
    """Place each computation in its stage (that of the next first computation) and pass.

    A stage's computations go to pass 0 until a node comes with a smaller index than
    the one before, then to pass 1, and so on (the canonical passes of P1C.C12); beyond
    the last pass they stay in it.  A second computation of a node in one stage is
    dropped, and so are recomputations after the last first computation (nothing
    reads them).  Returns ``None`` when the first computations do not follow the
    model's order (with ``fixed_order``: the graph order; otherwise optimizer ops
    must come last).
    """
    index = {op: i for i, op in enumerate(grid.ops)}
    seen: set[int] = set()
    stages: list[list[int]] = [[] for _ in range(grid.n)]
    stage = 0
    for op in computations:
        i = index.get(op)
        if i is None:
            return None
        if i in seen:
            if stage < grid.n and i not in stages[stage]:
                stages[stage].append(i)
            continue
        lo, hi = grid.first[i]
        if not lo <= stage <= hi:
            return None
        seen.add(i)
        stages[stage].append(i)
        stage += 1
    if len(seen) != grid.n:
        return None
    return _in_passes(grid, stages)


def _in_passes(grid: P1Data, stages: list[list[int]]) -> set[Cell]:
    """Cells of each stage's computations, in this order, put in canonical passes (P1C.C12)."""
    cells: set[Cell] = set()
    last = grid.passes - 1
    for t, nodes in enumerate(stages):
        r, previous = 0, -1
        for i in nodes:
            if i < previous:
                r += 1
            previous = i
            slot = (last if grid.fixed_order and i == t else min(r, last), i)
            if slot in grid.slot_rank[t]:
                cells.add((t, *slot))
    return cells


def complete(grid: P1Data, cells: Iterable[Cell], *, source: str = "",
             deadline: Deadline | None = None) -> Completion | None:
    """The canonical assignment of a set of cells, or ``None`` if a read is never served.

    Useless computations are dropped (P1C.C5; recomputations outside the domains P1C.D1 are
    useless too), retentions are the minimal ones (an item is held from its last
    computation to its next read), frees follow P1C.C8 and memory P1C.C9/P1C.C10.  With a
    ``deadline``, :class:`~monet_ilp.engines.deadline.OutOfTime` once it passes.
    """
    cells = {c for c in cells if (c[1], c[2]) in grid.slot_rank[c[0]]}
    first_stage: dict[int, int] = {}
    for t, _, i in sorted(cells):
        first_stage.setdefault(i, t)
    if len(first_stage) != grid.n or len(set(first_stage.values())) != grid.n:
        return None
    if any(lo == hi and first_stage[i] != lo for i, (lo, hi) in enumerate(grid.first)):
        return None
    while True:
        retained = minimal_retention(grid, cells)
        if retained is None:
            return None
        useless = {
            (t, r, i) for t, r, i in cells
            if first_stage[i] != t
            and (t + 1, i) not in retained
            and not any((t, q, j) in cells for j in grid.consumers[i] for q in range(r, grid.passes))
        }
        if not useless:
            break
        cells -= useless
    if grid.passes > 1:  # dropping cells may leave a pass without its reason (P1C.C12)
        stages: list[list[int]] = [[] for _ in range(grid.n)]
        for t, _, i in sorted(cells):
            stages[t].append(i)
        cells = _in_passes(grid, stages)
    return _values(grid, frozenset(cells), retained, first_stage, source, deadline)


def minimal_retention(grid: P1Data, cells: set[Cell]) -> set[tuple[int, int]] | None:
    """``S[t,i] = 1`` exactly from the last computation of i up to its next read."""
    computed: dict[int, dict[int, int]] = {}
    for t, r, j in cells:
        if t in computed.setdefault(j, {}):
            return None  # twice in one stage (P1C.C4)
        computed[j][t] = r
    read: dict[int, set[int]] = {}
    for t, r, j in cells:
        for i in grid.preds[j]:
            here = computed.get(i, {}).get(t)
            if here is None:
                read.setdefault(i, set()).add(t)
            elif here > r:
                return None  # computed later in the stage than read, and not retained (P1C.C4)
    retained: set[tuple[int, int]] = set()
    for i, stages in read.items():
        done = sorted(computed.get(i, ()))
        for t in stages:
            before = [s for s in done if s < t]
            if not before:
                return None
            retained.update((s, i) for s in range(before[-1] + 1, t + 1))
    return retained


def _values(grid: P1Data, cells: frozenset[Cell], retained: set[tuple[int, int]],
            first_stage: dict[int, int], source: str, deadline: Deadline | None = None) -> Completion:
    values: dict[Key, int] = {}
    for t, slots in enumerate(grid.stage_slots):
        for r, i in slots:
            values[("R", t, r, i)] = int((t, r, i) in cells)
    for i, (lo, hi) in enumerate(grid.first):
        if lo < hi:
            for t in range(lo, hi + 1):
                values[("F", t, i)] = int(first_stage[i] == t)
    for t, i in retained:
        values[("S", t, i)] = 1
    input_last = [max(t for t, _, j in cells if j in readers) for readers in grid.input_readers]
    for g, last in enumerate(input_last):
        for t in range(last + 1):
            values[("Sin", t, g)] = 1

    def resident_at_start(t: int, item: Item) -> bool:
        kind, x = item
        return (t, x) in retained if kind == "node" else t <= input_last[x]

    offset = [0]
    for slots in grid.stage_slots:
        offset.append(offset[-1] + len(slots))
    peak = 0
    for t, slots in enumerate(grid.stage_slots):
        if deadline is not None:
            deadline.check(f"completing the {source or 'given'} schedule",
                           f"stage {t:,} of {grid.n:,}")
        rank = grid.slot_rank[t]
        held: dict[Item, int] = {}
        for i in range(grid.n):
            if (t, i) in retained:
                held[("node", i)] = grid.size[i]
        for g in range(len(grid.input_ids)):
            if t <= input_last[g]:
                held[("input", g)] = grid.input_size[g]
        start = {item: offset[t] for item in held}
        end: dict[Item, int] = {}
        # The rank of the last computed slot of the stage that reads each item: one pass
        # over the stage instead of one per slot and item (quadratic in the stage).
        last_read: dict[Item, int] = {}
        for q, j in slots:
            if (t, q, j) in cells:
                for item in items_read(grid, j):
                    last_read[item] = rank[(q, j)]
        for r, k in slots:
            here = (t, r, k) in cells
            if here and grid.size[k] > 0:
                held[("node", k)] = grid.size[k]
                start[("node", k)] = offset[t] + rank[(r, k)]
            memory = sum(held.values())
            values[("U", t, r, k)] = memory
            peak = max(peak, memory)
            for item in items_read_or_made(grid, k):
                later = last_read.get(item, -1) > rank[(r, k)]
                free = here and not later and not resident_at_start(t + 1, item)
                values[("FREE", t, item, r, k)] = int(free)
                if free:
                    held.pop(item)
                    end[item] = offset[t] + rank[(r, k)] + 1
        for item, begin in start.items():
            values[("present", t, item)] = 1
            values[("start", t, item)] = begin
            values[("end", t, item)] = end.get(item, offset[t + 1])
    cost = sum(grid.cost[i] for _, _, i in cells)
    return Completion(cells, values, cost, peak, source)


def hint_from(grid: P1Data, sequence: Sequence, source: str = "hint") -> Completion | None:
    """The completion of a Sequence's computations, or ``None`` if the model cannot follow it."""
    cells = stage_cells(grid, sequence.computations)
    return None if cells is None else complete(grid, cells, source=source)


def evict_or_store_all(instance: Instance) -> Sequence:
    """The eviction heuristic's sequence (feasible first), store-all when it finds none."""
    return evict_sequence(instance) or store_all_sequence(instance)


def baseline_completions(instance: Instance, grid: P1Data,
                         deadline: Deadline | None = None) -> list[Completion]:
    """Completions of the baselines (store-all, Chen sqrt(n), Chen greedy, the eviction
    heuristic) the model can follow.

    With a ``deadline`` (:class:`~monet_ilp.engines.deadline.Deadline`), the ones
    completed before it passes: the greedy search stops early, and a completion cut
    short is left out.
    """
    makers: dict[str, Callable[[Instance], Sequence]] = {
        "store_all": store_all_sequence,
        "sqrt": chen_sqrt_sequence,
        "greedy": lambda inst: chen_greedy_sequence(inst, grid.capacity_bytes, deadline=deadline),
        "evict": evict_or_store_all,
        "repair": lambda inst: repair_sequence(inst) or store_all_sequence(inst),
    }
    found: list[Completion] = []
    for name, make in makers.items():
        if found and deadline is not None and deadline.passed():
            break
        try:
            sequence = make(instance)
            cells = stage_cells(grid, sequence.computations)
            completion = None if cells is None else complete(grid, cells, source=name,
                                                             deadline=deadline)
        except MonetError:
            continue
        except OutOfTime:
            break
        if completion is not None:
            found.append(completion)
    return found


def sequence_of(graph: TrainingGraph, computations: list[str],
                meta: Mapping[str, Any] | None = None) -> Sequence:
    """A Sequence running ``computations`` with every copy released right after its last reader.

    A copy of a non-persistent tensor lives from its producer's computation (graph
    inputs: from the start) to the last computation reading it before the tensor is
    produced again; graph inputs nothing reads are released before the first
    computation, and outputs nothing reads right after their producer.  This is the
    EV.E3 memory of ``formulations/evaluator.md`` at its smallest, never more than the
    model's (``p1_cpsat.md``, "From cells to a Sequence").
    """
    def live(t: str) -> bool:
        return not graph.tensor(t).persistent

    release_after: dict[int, list[str]] = {}
    last_read: dict[str, int] = {}
    born: dict[str, int] = {t.id: -1 for t in graph.tensors if not t.persistent and t.producer is None}

    def close(t: str) -> None:
        release_after.setdefault(last_read.pop(t, born[t]), []).append(t)

    for step, op_id in enumerate(computations):
        op = graph.op(op_id)
        for t in op.inputs:
            if live(t):
                last_read[t] = step
        for t in dict.fromkeys(op.outputs):
            if live(t):
                if t in born:
                    close(t)
                born[t] = step
    for t in list(born):
        close(t)
    steps: list[Compute | Release] = [Release(t) for t in release_after.get(-1, ())]
    for step, op_id in enumerate(computations):
        steps.append(Compute(op_id))
        steps.extend(Release(t) for t in release_after.get(step, ()))
    return Sequence(tuple(steps), meta=dict(meta or {}))
