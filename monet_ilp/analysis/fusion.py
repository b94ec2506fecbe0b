"""The search over layer-fusion plans (``formulations/fusion.md`` FU.K1, FU.K2).

Each plan is a tiled instance (:func:`~monet_ilp.make.make_instance` with ``fusion=``),
solved by a backend and verified by the evaluator through
:func:`~monet_ilp.solve.solve`.  Plans are screened with a fast backend and the best few
are solved again with the final backend and its time limit; each row keeps the plan, its
verified value and the bound the backend proved for that tiled instance (which holds for
that plan's schedules in the backend's class, not for other plans: FU.K1).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from monet_ilp.analysis.bounds import lower_bounds
from monet_ilp.errors import MonetError
from monet_ilp.graph.fusion import (
    Axis,
    FusionPlan,
    Stack,
    chain_parts,
    chains,
    extent,
    load_fusion,
    op_rows,
)
from monet_ilp.hardware.cost import cost_breakdown
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.make import make_instance
from monet_ilp.results import bound_error, gap_of
from monet_ilp.solve import Result, Status, solve

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.hardware.model import Hardware
    from monet_ilp.schedule import Schedule

__all__ = ["FusionBound", "FusionExact", "FusionRow", "FusionSearch", "class_plans", "count_plans", "dram_bytes",
           "fusion_bound", "fusion_exact", "fusion_search", "plan_from_spec", "stream_rule"]

#: The tile counts tried per stack (FU.K1).
TILES = (2, 4, 8)


@dataclass(frozen=True)
class FusionRow:
    """One plan and what the backend found for it (verified by the evaluator)."""

    strategy: str
    plan: FusionPlan
    result: Result
    instance: Instance
    screened: int | float | None = None  # the screening backend's verified value

    @property
    def objective(self) -> int | float | None:
        return self.result.objective

    @property
    def dram_bytes(self) -> int | None:
        """What the schedule moves to and from DRAM (:func:`dram_bytes`)."""
        schedule = self.result.schedule
        if schedule is None or not hasattr(schedule, "transfers"):
            return None
        return dram_bytes(self.instance, schedule)  # type: ignore[arg-type]

    @property
    def peak_sram_bytes(self) -> int | None:
        """The largest SRAM peak of any core."""
        m = self.result.metrics
        if m is None:
            return None
        srams = {x.id for x in self.instance.memories if x.kind == "sram"}
        return max(v for k, v in m.peak_bytes.items() if k in srams)

    def summary(self) -> str:
        """The plan in a line: its stacks, ops x tiles."""
        fused = self.plan.fused
        if not fused:
            return "layer by layer"
        return "; ".join(f"{s.ops[0].removeprefix('F:')}..{s.ops[-1].removeprefix('F:')} "
                         f"({len(s.ops)} ops) x {s.tiles}" for s in fused)


@dataclass(frozen=True)
class FusionSearch:
    """The plans solved with the final backend, best first, and the layer-by-layer row."""

    rows: tuple[FusionRow, ...]
    layer_by_layer: FusionRow
    screened: int
    seconds: float
    bound: FusionBound
    objective: Objective
    notes: tuple[str, ...] = field(default=())
    errors: tuple[str, ...] = field(default=())
    #: FU.B4: with no chain to fuse, layer by layer is the only plan, and the bounds over
    #: every schedule of its instance (``bounds.md``) hold for every plan.
    only_plan_bound: int | None = None

    @property
    def best(self) -> FusionRow:
        return self.rows[0]

    @property
    def bound_every_plan(self) -> int | None:
        """The bound over every schedule of every plan (FU.B1, FU.B2, FU.B4) on the objective."""
        found = [b for b in (self.bound.of(self.objective), self.only_plan_bound) if b is not None]
        return max(found) if found else None

    def gap_every_plan(self, row: FusionRow) -> float | None:
        """``row``'s gap to :attr:`bound_every_plan` (``None`` without a value or a bound)."""
        bound, value = self.bound_every_plan, row.objective
        if bound is None or value is None or not isinstance(value, int):
            return None
        return gap_of(value, bound)


@dataclass(frozen=True)
class FusionBound:
    """FU.B1/FU.B2: bounds on latency and energy that hold for every schedule of every
    fusion plan of the graph (layer by layer included), and what they count."""

    latency_cycles: int
    energy_pj: int
    compute_cycles: int   # the least compute work, summed over ops, before it is shared by the cores
    cores: int

    def of(self, objective: str | Objective) -> int | None:
        """The bound on ``objective`` (``None`` for one this family does not bound)."""
        return {"latency": self.latency_cycles, "energy": self.energy_pj}.get(str(Objective(objective)))


def fusion_bound(graph: TrainingGraph, hardware: Hardware, plain: Instance, axis: Axis | str = Axis.ROWS
                 ) -> FusionBound:
    """FU.B1 (latency) and FU.B2 (energy) over every plan along ``axis`` (``formulations/fusion.md``).

    ``plain`` is the layer-by-layer instance (its cores and static power).  Per op, the
    least compute over its cores (MAC and vector cycles, CM.C5, CM.C6, in the reference
    clock; for an op that a stack may tile, its vector FLOPs less the ``2E`` that rounding
    each of at most ``E`` tiles' shares up can take away) and the least compute energy
    (less ``E/2`` for the tiles' own rounding, CM.C11).
    """
    axis = Axis(axis)
    tileable = {op: op_rows(graph, op, axis) for run in chains(graph, axis) for op in run}
    cores = [hardware.core(c.id) for c in plain.cores]
    work = 0
    energy = 0
    for op in graph.ops:
        best_cycles: int | None = None
        best_pj: int | None = None
        for core in cores:
            if op.id not in plain.costs or core.id not in plain.costs[op.id]:
                continue
            b = cost_breakdown(op, graph, core, hardware)
            rows = tileable.get(op.id, 0)
            vector = max(0, b.vector_flops - 2 * rows)
            core_cycles = b.mac_core_cycles + -(-vector // core.vector_ops_per_cycle)
            cycles = core_cycles * hardware.clock_hz // core.clock_hz  # floor: a lower bound
            pj = _exact_pj(op.macs, core.mac_pj) + _exact_pj(vector, core.vector_op_pj) - rows / 2
            best_cycles = cycles if best_cycles is None else min(best_cycles, cycles)
            best_pj = int(max(0.0, pj)) if best_pj is None else min(best_pj, int(max(0.0, pj)))
        work += best_cycles or 0
        energy += best_pj or 0
    latency = -(-work // len(cores))
    static = plain.static_fj_per_cycle * latency // 1000
    return FusionBound(latency, energy + static, work, len(cores))


def _exact_pj(count: int, pj: float) -> float:
    return count * float(Fraction(repr(float(pj))))


def stream_rule(graph: TrainingGraph, capacity: int, tiles: int, axis: Axis = Axis.ROWS) -> FusionPlan:
    """Stream's rule (FU.K2): cut each chain into stacks whose weights fit in ``capacity``
    bytes; a stack of one op stays layer by layer."""
    stacks: list[Stack] = []
    for run in chains(graph, axis):
        current: list[str] = []
        held = 0
        for op_id in run:
            op = graph.op(op_id)
            weights = sum(graph.tensor(t).bytes for t in dict.fromkeys(op.inputs) if graph.tensor(t).persistent)
            if current and held + weights > capacity:
                stacks.append(Stack(tuple(current), tiles, axis))
                current, held = [], 0
            current.append(op_id)
            held += weights
        stacks.append(Stack(tuple(current), tiles, axis))
    parts = [Stack(tuple(p), s.tiles, axis) for s in stacks for p in chain_parts(graph, s.ops)]
    return FusionPlan(tuple(s for s in parts if len(s.ops) > 1 and _fits(graph, s)))


def plan_from_spec(graph: TrainingGraph, instance: Instance, spec: Mapping[str, Any]) -> FusionPlan:
    """The plan a batch manifest's ``fusion`` entry asks for: ``{chains: n}`` (every chain
    fused whole, at most ``n`` tiles, FU.S3, cut at each layer whose weight outgrows the
    smallest SRAM), ``{stream: n}`` (Stream's rule at the smallest
    SRAM of ``instance``) or ``{file: ..., path: ...}``; ``axis`` rows or batch."""
    axis = Axis(spec.get("axis", "rows"))
    if "file" in spec:
        return load_fusion(spec.get("path") or spec["file"])
    if "stream" in spec:
        capacity = min(m.capacity_bytes for m in instance.memories if m.kind == "sram")
        return stream_rule(graph, capacity, int(spec["stream"]), axis)
    tiles = int(spec["chains"])
    capacity = min(m.capacity_bytes for m in instance.memories if m.kind == "sram")
    stacks = []
    for run in chains(graph, axis):
        # A layer whose weight outgrows the smallest SRAM cannot be staged (FU.T4): it cuts
        # the chain and stays layer by layer.
        for piece in _split_where(run, lambda op: _largest_weight(graph, op) > capacity):
            for part in chain_parts(graph, piece):
                fewest = min((op_rows(graph, op, axis) for op in part), default=1)
                if len(part) > 1 and min(tiles, fewest) > 1:
                    stacks.append(Stack(tuple(part), min(tiles, fewest), axis))
    return FusionPlan(tuple(stacks))


def _largest_weight(graph: TrainingGraph, op_id: str) -> int:
    return max((graph.tensor(t).bytes for t in graph.op(op_id).inputs if graph.tensor(t).persistent), default=0)


def _split_where(run: Sequence[str], cut: Callable[[str], bool]) -> list[list[str]]:
    """The runs of ``run`` between the ops ``cut`` holds for (which are left out)."""
    parts: list[list[str]] = [[]]
    for op in run:
        if cut(op):
            parts.append([])
        else:
            parts[-1].append(op)
    return [p for p in parts if p]


def _fits(graph: TrainingGraph, stack: Stack) -> bool:
    """Whether every op of ``stack`` has at least ``stack.tiles`` rows (FU.S3)."""
    for op_id in stack.ops:
        first = next(graph.tensor(t) for t in graph.op(op_id).outputs if not graph.tensor(t).persistent)
        length = extent(first, stack.axis)
        if length is None or length < stack.tiles:
            return False
    return True


def dram_bytes(instance: Instance, schedule: Schedule) -> int:
    """Bytes a schedule moves to and from shared memories: its transfers that touch one,
    and what its runs stream (persistent tensors not pinned in the run's SRAM, CM.C7)."""
    shared = {m.id for m in instance.memories if m.kind != "sram"}
    graph = instance.graph
    moved = sum(graph.tensor(t.tensor).bytes for t in schedule.transfers if t.src in shared or t.dst in shared)
    pins = {(t, m) for t, m in schedule.pinned}
    sram_of = {c.id: c.memory for c in instance.cores}
    for run in schedule.ops:
        op = graph.op(run.op)
        for t in dict.fromkeys(op.inputs + op.outputs + op.updates):
            tensor = graph.tensor(t)
            if tensor.persistent and (t, sram_of[run.core]) not in pins:
                moved += op.reads.get(t, tensor.bytes)
    return moved


def fusion_search(graph: TrainingGraph, hardware: Hardware, *, problem: str | Problem = Problem.P3,
                  objective: str | Objective = Objective.LATENCY, sram_budget: int | None = None,
                  budget: float | int | None = None, axis: Axis | str = Axis.ROWS,
                  tiles: Sequence[int] = TILES, backend: str = "auto", time_limit: float = 60.0,
                  screen_backend: str = "heuristic:memory_aware", screen_time_limit: float = 10.0,
                  finalists: int = 3, search_time: float | None = None, workers: int | None = None,
                  greedy: bool = True, log: Callable[[str], None] | None = None,
                  make_options: Mapping[str, Any] | None = None) -> FusionSearch:
    """Search fusion plans of ``graph`` on ``hardware`` (FU.K2) and solve the best.

    Candidates: layer by layer; each chain fused whole at each tile count; Stream's rule
    at each tile count; then, with ``greedy``, from the best so far, merging neighbouring
    stacks and changing tile counts while the screened value improves (within
    ``search_time`` seconds of screening, unlimited by default).  The ``finalists`` best
    screened plans and layer by layer are solved with ``backend`` in ``time_limit`` s.
    """
    began = time.perf_counter()
    axis = Axis(axis)
    say = log or (lambda _line: None)
    options = dict(make_options or {})

    def instance_of(plan: FusionPlan) -> Instance:
        return make_instance(graph, hardware, problem=problem, objective=objective, sram_budget=sram_budget,
                             budget=budget, fusion=plan, **options)

    plain = instance_of(FusionPlan())
    capacity = min(m.capacity_bytes for m in plain.memories if m.kind == "sram")
    runs = chains(graph, axis)
    notes = []
    if not runs:
        notes.append(f"no chain of {graph.name} is fusable along {axis} (fusion.md FU.F): "
                     "every plan is layer by layer")
    screened: dict[FusionPlan, tuple[str, int | float | None]] = {}

    def screen(strategy: str, plan: FusionPlan) -> int | float | None:
        key = FusionPlan(tuple(sorted(plan.fused, key=lambda s: s.ops)))
        if key in screened:
            return screened[key][1]
        try:
            result = solve(instance_of(key), screen_backend, time_limit=screen_time_limit, workers=workers)
        except MonetError as exc:  # a plan whose staged weights or tiles cannot fit anywhere
            say(f"  {strategy}: not schedulable ({exc})")
            screened[key] = (strategy, None)
            return None
        value = result.objective if result.status in (Status.OPTIMAL, Status.FEASIBLE) else None
        screened[key] = (strategy, value)
        say(f"  {strategy}: {value} ({_describe(key)})")
        return value

    screen("layer by layer", FusionPlan())
    for t in tiles:
        whole = FusionPlan(tuple(s for s in (Stack(tuple(r), t, axis) for r in runs) if _fits(graph, s)))
        if whole.fused:
            screen(f"chains x {t}", whole)
        rule = stream_rule(graph, capacity, t, axis)
        if rule.fused:
            screen(f"stream rule x {t}", rule)
    if greedy and runs:
        _greedy(graph, runs, axis, tiles, screened, screen,
                None if search_time is None else began + search_time)
    ranked = sorted(((v, s, p) for p, (s, v) in screened.items() if v is not None and p.fused),
                    key=lambda x: x[0])
    chosen = [(s, p, v) for v, s, p in ranked[:finalists]]
    lbl_value = screened[FusionPlan()][1]
    rows: list[FusionRow] = []
    for strategy, plan, value in [("layer by layer", FusionPlan(), lbl_value), *chosen]:
        say(f"solving {strategy} with {backend} ({time_limit:g} s): {_describe(plan)}")
        inst = instance_of(plan)
        result = solve(inst, backend, time_limit=time_limit, workers=workers)
        rows.append(FusionRow(strategy, plan, result, inst, value))
    lbl = rows[0]
    done = sorted(rows, key=lambda r: (r.objective is None, r.objective if r.objective is not None else 0))
    bound = fusion_bound(graph, hardware, plain, axis)
    only = None
    if not runs:  # FU.B4: one plan, so its bounds over every schedule hold for every plan
        found = lower_bounds(plain, time_limit=min(60.0, time_limit), workers=workers)
        only = found.get("best_all")
        notes.append(f"the bound over every plan is layer by layer's over every schedule ({only}, "
                     f"{found.get('best_all_source')})")
    every = max(b for b in (bound.of(plain.objective), only) if b is not None) \
        if bound.of(plain.objective) is not None or only is not None else None
    errors = []
    for row in done:  # BD.C1: a bound above a verified schedule is a bug, reported, never capped
        if every is not None and row.result.status in (Status.OPTIMAL, Status.FEASIBLE):
            wrong = bound_error(row.objective, every, "FU.B", "every schedule of every fusion plan")
            if wrong:
                errors.append(f"{row.summary()}: {wrong}")
    return FusionSearch(tuple(done), lbl, len(screened), time.perf_counter() - began, bound,
                        Objective(plain.objective), tuple(notes), tuple(errors), only)


def _describe(plan: FusionPlan) -> str:
    fused = plan.fused
    return "layer by layer" if not fused else ", ".join(f"{len(s.ops)} ops x {s.tiles}" for s in fused)


def _greedy(graph: TrainingGraph, runs: list[list[str]], axis: Axis, tiles: Sequence[int],
            screened: Mapping[FusionPlan, tuple[str, int | float | None]],
            screen: Callable[[str, FusionPlan], int | float | None], stop_at: float | None) -> None:
    """FU.K2 greedy: from the best plan screened so far, the best improving move (merge two
    neighbouring segments of a chain, or change a segment's tile count), until none
    improves or the time is up."""
    best_plan, best_value = min(((p, v) for p, (_s, v) in screened.items() if v is not None),
                                key=lambda pv: pv[1])
    while stop_at is None or time.perf_counter() < stop_at:
        segments = _segments(best_plan, runs)
        moves: list[FusionPlan] = []
        for c, segs in enumerate(segments):
            for k, (ops, t) in enumerate(segs):
                for other in tiles:
                    if other != t and len(ops) > 1:
                        moves.append(_plan_from(segments, axis, c, k, k + 1, ops, other))
                for cut in range(1, len(ops)) if t > 1 else ():  # split a stack in two
                    moves.append(_split(segments, axis, c, k, ops[:cut], ops[cut:], t))
                if k + 1 < len(segs):
                    merged = ops + segs[k + 1][0]
                    for other in tiles:
                        moves.append(_plan_from(segments, axis, c, k, k + 2, merged, other))
        improved = False
        for plan in moves:
            if stop_at is not None and time.perf_counter() >= stop_at:
                break
            plan = FusionPlan(tuple(Stack(tuple(p), s.tiles, s.axis) for s in plan.fused
                                    for p in chain_parts(graph, s.ops) if len(p) > 1))
            if not all(_fits(graph, s) for s in plan.fused):
                continue
            value = screen("greedy", plan)
            if value is not None and value < best_value:
                best_plan, best_value, improved = plan, value, True
        if not improved:
            return


def _split(segments: list[list[tuple[tuple[str, ...], int]]], axis: Axis, chain: int, k: int,
           left: tuple[str, ...], right: tuple[str, ...], tiles: int) -> FusionPlan:
    """The plan of ``segments`` with segment ``k`` of chain ``chain`` split into two stacks."""
    parts = [list(segs) for segs in segments]
    parts[chain][k:k + 1] = [(left, tiles), (right, tiles)]
    return _plan_from(parts, axis, chain, 0, 0, (), 1)


def _segments(plan: FusionPlan, runs: list[list[str]]) -> list[list[tuple[tuple[str, ...], int]]]:
    """Each chain as segments (ops, tiles): the plan's stacks, and single ops between them."""
    stack_of = {s.ops[0]: s for s in plan.fused}
    out = []
    for run in runs:
        segs: list[tuple[tuple[str, ...], int]] = []
        i = 0
        while i < len(run):
            s = stack_of.get(run[i])
            if s is not None:
                segs.append((s.ops, s.tiles))
                i += len(s.ops)
            else:
                segs.append(((run[i],), 1))
                i += 1
        out.append(segs)
    return out


def _plan_from(segments: list[list[tuple[tuple[str, ...], int]]], axis: Axis, chain: int, a: int, b: int,
               ops: tuple[str, ...], tiles: int) -> FusionPlan:
    """The plan of ``segments`` with segments ``a..b-1`` of chain ``chain`` replaced by one."""
    stacks: list[Stack] = []
    for c, segs in enumerate(segments):
        items: Iterable[tuple[tuple[str, ...], int]] = segs
        if c == chain and ops:
            items = [*segs[:a], (ops, tiles), *segs[b:]]
        stacks += [Stack(o, t, axis) for o, t in items if t > 1 and len(o) > 1]
    return FusionPlan(tuple(stacks))


# -- FU.X: exact over the class, by enumeration ------------------------------------------


def _segments_of(graph: TrainingGraph, run: Sequence[str], axis: Axis,
                 counts: Sequence[int]) -> list[list[tuple[int, tuple[int, ...]]]]:
    """FU.X1: per start ``i`` of ``run``, each end ``j`` of a stack ``run[i:j]`` (two ops or
    more, one chain part: FU.S1) with its tile counts, lowered to its fewest rows (FU.S3)."""
    rows = [op_rows(graph, o, axis) for o in run]
    out: list[list[tuple[int, tuple[int, ...]]]] = []
    for i in range(len(run)):
        ends: list[tuple[int, tuple[int, ...]]] = []
        made = set(graph.op(run[i]).outputs)
        for j in range(i + 1, len(run)):
            op = graph.op(run[j])
            if not any(t in made for t in op.inputs):  # a new chain part starts here
                break
            made.update(op.outputs)
            fewest = min(rows[i:j + 1])
            lowered = tuple(sorted({min(c, fewest) for c in counts} - {0, 1}))
            if lowered:
                ends.append((j + 1, lowered))
        out.append(ends)
    return out


def _chain_count(segments: list[list[tuple[int, tuple[int, ...]]]]) -> int:
    n = len(segments)
    ways = [0] * n + [1]
    for i in range(n - 1, -1, -1):
        ways[i] = ways[i + 1] + sum(len(t) * ways[j] for j, t in segments[i])
    return ways[0]


def _chain_plans(run: Sequence[str], axis: Axis,
                 segments: list[list[tuple[int, tuple[int, ...]]]], i: int = 0) -> Iterable[tuple[Stack, ...]]:
    """Every plan of one chain from position ``i`` (each exactly once: distinct cuts or
    counts give distinct stacks), ``run[i]`` layer by layer first."""
    if i == len(run):
        yield ()
        return
    yield from _chain_plans(run, axis, segments, i + 1)
    for j, counts in segments[i]:
        for t in counts:
            head = Stack(tuple(run[i:j]), t, axis)
            for rest in _chain_plans(run, axis, segments, j):
                yield (head, *rest)


def count_plans(graph: TrainingGraph, axis: Axis | str = Axis.ROWS, tiles: Sequence[int] = TILES) -> int:
    """FU.X2: how many plans class FU.X1 holds (layer by layer included), without listing them."""
    axis = Axis(axis)
    return math.prod(_chain_count(_segments_of(graph, run, axis, tiles)) for run in chains(graph, axis))


def class_plans(graph: TrainingGraph, axis: Axis | str = Axis.ROWS, tiles: Sequence[int] = TILES,
                max_plans: int | None = None) -> list[FusionPlan]:
    """FU.X1: every plan of the class, layer by layer first.

    Raises :class:`MonetError` when there are more than ``max_plans``.
    """
    axis = Axis(axis)
    runs = chains(graph, axis)
    segments = [_segments_of(graph, run, axis, tiles) for run in runs]
    n = math.prod(_chain_count(s) for s in segments)
    if max_plans is not None and n > max_plans:
        raise MonetError(f"{graph.name}: the class of fusion plans (FU.X1) holds {n:,} plans along {axis} with "
                         f"tile counts {', '.join(map(str, tiles))}, more than the {max_plans:,} allowed",
                         field="tiles",
                         fix="allow more (--max-plans), try fewer tile counts (--tiles), or search the plans "
                             "instead (`monet-ilp fusion search`)")
    per_chain = [list(_chain_plans(run, axis, s)) for run, s in zip(runs, segments, strict=True)]
    return [FusionPlan(tuple(s for part in combo for s in part)) for combo in itertools.product(*per_chain)]


@dataclass(frozen=True)
class FusionExact:
    """Every plan of class FU.X1 solved by an exact backend (FU.X): the best verified
    schedule over the class and the bound over the class."""

    rows: tuple[FusionRow, ...]  # every plan, best first
    plans: int
    seconds: float
    objective: Objective
    #: FU.X3: the least of the plans' proven bounds (``None`` when one plan has none).
    class_bound: int | float | None
    bound_holds_for: str
    #: FU.X4: every plan proved optimal or proved to have no schedule.
    proven: bool
    bound: FusionBound
    unschedulable: tuple[str, ...] = field(default=())
    errors: tuple[str, ...] = field(default=())

    @property
    def best(self) -> FusionRow | None:
        found = [r for r in self.rows if r.objective is not None]
        return found[0] if found else None

    @property
    def gap(self) -> float | None:
        """The best schedule's gap to :attr:`class_bound`."""
        best = self.best
        if best is None or self.class_bound is None or not isinstance(best.objective, int):
            return None
        return gap_of(best.objective, self.class_bound)


def fusion_exact(graph: TrainingGraph, hardware: Hardware, *, problem: str | Problem = Problem.P3,
                 objective: str | Objective = Objective.LATENCY, sram_budget: int | None = None,
                 budget: float | int | None = None, axis: Axis | str = Axis.ROWS, tiles: Sequence[int] = TILES,
                 backend: str = "cpsat", time_limit: float = 60.0, workers: int | None = None,
                 max_plans: int = 64, log: Callable[[str], None] | None = None,
                 make_options: Mapping[str, Any] | None = None) -> FusionExact:
    """FU.X: solve every plan of class FU.X1 with the exact ``backend``, ``time_limit`` s each.

    The best verified schedule is optimal over the class when every plan is proved
    optimal or proved to have no schedule; the class bound is the least of the plans'
    proven bounds, and holds for every schedule of every plan of the class.
    """
    from monet_ilp.problems.registry import find

    began = time.perf_counter()
    axis = Axis(axis)
    say = log or (lambda _line: None)
    problem = Problem(problem)
    if find(backend, problem).heuristic:
        raise MonetError(f"backend {backend!r} is a heuristic: it proves no bound over a plan",
                         field="backend", fix="use an exact backend (cpsat, milp or auto)")
    plans = class_plans(graph, axis, tiles, max_plans)
    say(f"class FU.X1: {len(plans)} plans of {graph.name} along {axis}, tile counts "
        f"{', '.join(map(str, tiles))}")
    options = dict(make_options or {})
    rows: list[FusionRow] = []
    unschedulable: list[str] = []
    bounds: list[int | float | None] = []
    holds: set[str] = set()
    proven = True
    plain: Instance | None = None
    for i, plan in enumerate(plans):
        inst = make_instance(graph, hardware, problem=problem, objective=objective, sram_budget=sram_budget,
                             budget=budget, fusion=plan, **options)
        plain = plain or inst  # layer by layer comes first
        try:
            result = solve(inst, backend, time_limit=time_limit, workers=workers)
        except MonetError as exc:  # FU.G2: staged weights larger than every SRAM: no schedule
            say(f"  {i + 1}/{len(plans)} {_describe(plan)}: not schedulable ({exc})")
            unschedulable.append(f"{_describe(plan)}: {exc}")
            continue
        say(f"  {i + 1}/{len(plans)} {_describe(plan)}: {result.status} {result.objective} "
            f"(bound {result.bound}, {result.wall_time_s:.1f} s)")
        rows.append(FusionRow("exact", plan, result, inst))
        if result.status is Status.INFEASIBLE:  # proved by an exact backend: no schedule
            continue
        proven &= result.status is Status.OPTIMAL
        bounds.append(result.bound if result.status is not Status.ERROR else None)
        if result.bound_holds_for:
            holds.add(result.bound_holds_for)
    assert plain is not None  # layer by layer is always a plan
    known = [b for b in bounds if b is not None]
    class_bound = min(known) if known and len(known) == len(bounds) else None
    done = sorted(rows, key=lambda r: (r.objective is None, r.objective if r.objective is not None else 0))
    every = fusion_bound(graph, hardware, plain, axis)
    errors = [f"{r.summary()}: {r.result.status}" for r in done if r.result.status is Status.ERROR]
    for row in done:  # BD.C1: never capped
        if row.objective is None:
            continue
        for b, name, where in ((every.of(plain.objective), "FU.B", "every schedule of every fusion plan"),
                               (class_bound, "FU.X3", "every schedule of every plan of class FU.X1")):
            wrong = bound_error(row.objective, b, name, where) if b is not None else None
            if wrong:
                errors.append(f"{row.summary()}: {wrong}")
    holds_for = (f"every schedule of every plan of class FU.X1 ({len(plans)} plans along {axis}, tile counts "
                 f"{', '.join(map(str, tiles))}), each in {' / '.join(sorted(holds)) or 'its backend class'}")
    return FusionExact(tuple(done), len(plans), time.perf_counter() - began, Objective(plain.objective),
                       class_bound, holds_for, proven and not errors, every, tuple(unschedulable), tuple(errors))
