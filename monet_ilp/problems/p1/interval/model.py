"""The retention-interval CP-SAT model of P1: variables P1I.V1-V6, constraints P1I.C1-C11.

Its size grows with ``n * C`` plus the edges (``formulations/p1_interval.md`` §6), not
with the stage grid's ``n^2``.  :func:`build_interval_model` makes it from a
:class:`~monet_ilp.problems.p1.data.P1Data` and the number of copies of each node;
:func:`assignment` gives the value of every variable for a :class:`Plan` (the hint, and
the LNS's fixed part); :func:`plan_of_solution` reads a solution back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from monet_ilp.problems.p1.interval.plan import Plan, canonical_plan

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p1.data import P1Data

__all__ = ["Ceiling", "IntervalModel", "assignment", "build_interval_model", "copies_per_node", "plan_of_solution"]

Copy = tuple[int, int]  # (node v, copy j)
Read = tuple[int, int, int, int]  # (producer u, its copy j, reader v, its copy i)
Check = Callable[[str, int], None]  # the deadline check of one build step at one node

_STEP = "building the P1 interval model"


def copies_per_node(data: P1Data, max_computes: int) -> list[int]:
    """``C_v`` of P1I.D1: ``max_computes``, or 1 where a recomputation is never allowed or
    never useful (optimizer ops and nodes from the first one on, nodes nobody reads)."""
    return [1 if v >= data.first_update or not data.consumers[v] else max_computes
            for v in range(data.n)]


@dataclass
class Ceiling:
    """P1I.C12's variables: the memory cap ``cap`` of the cumulative, and a filler of
    demand ``fill`` over the positions ``[first, end)`` (``p1_interval.md`` §9, P1I.L5)."""

    cap: cp_model.IntVar
    fill: cp_model.IntVar
    first: cp_model.IntVar
    end: cp_model.IntVar


@dataclass
class IntervalModel:
    """A built model and its variables (``p1_interval.md`` §2).

    ``present`` has no entry for copy 0 (always present); ``reads`` holds ``z`` only
    where the producer has several copies (with one, the read is the constraint
    itself); ``last``/``own`` exist with ``tight_ends``.
    """

    data: P1Data
    model: cp_model.CpModel
    copies: tuple[int, ...]
    horizon: int
    canonical: bool
    tight_ends: bool
    present: dict[Copy, cp_model.IntVar] = field(default_factory=dict)
    start: dict[Copy, cp_model.IntVar] = field(default_factory=dict)
    end: dict[Copy, cp_model.IntVar] = field(default_factory=dict)
    length: dict[Copy, cp_model.IntVar] = field(default_factory=dict)
    input_end: list[cp_model.IntVar] = field(default_factory=list)
    reads: dict[Read, cp_model.IntVar] = field(default_factory=dict)
    last: dict[Read, cp_model.IntVar] = field(default_factory=dict)
    own: dict[Copy, cp_model.IntVar] = field(default_factory=dict)
    start_domain: dict[Copy, tuple[int, int]] = field(default_factory=dict)
    #: P1I.C12 (``capacity`` above the budget): the cumulative's capacity and the filler.
    ceiling: Ceiling | None = None

    def slots(self) -> list[Copy]:
        return [(v, j) for v in range(self.data.n) for j in range(self.copies[v])]

    def is_present(self, key: Copy) -> cp_model.IntVar | bool:
        return True if key[1] == 0 else self.present[key]


def build_interval_model(data: P1Data, copies: Sequence[int], *, tight_ends: bool = False,
                         canonical: bool = True, slack: int = 0, capacity: int | None = None,
                         deadline: Deadline | None = None) -> IntervalModel:
    """The model of ``p1_interval.md`` over ``copies[v]`` copies of each node.

    Parameters
    ----------
    data
        The P1 data (its ``fixed_order`` picks P1I.C4's form).
    copies
        ``C_v`` per node (1 for nodes at or after the first optimizer op).
    tight_ends
        Add P1I.C10: each end is its copy's own start or the start of a reader it serves.
    canonical
        The canonical form of §5 (P1I.D1 compacted positions, P1I.C1 copies in order,
        P1I.C11 absent copies pinned): the backend's model.  ``False`` (the LNS) keeps
        only what every plan satisfies with its copies in any slots and ``slack`` empty
        positions anywhere: copies of one node ordered pairwise when present.
    slack
        Extra positions in the horizon (``canonical=False``).
    capacity
        Above the budget: P1I.C12, the cumulative's capacity becomes a variable between
        the budget and ``capacity``, with a filler interval (:class:`Ceiling`), for the
        LNS's descent to the budget from a schedule over it (P1I.L5).  Every solution
        still has the memory of §2, but only within ``capacity``.
    deadline
        Checked once per node; :class:`~monet_ilp.engines.deadline.OutOfTime` once past.
    """
    n = data.n
    copies = tuple(copies)
    if any(copies[v] != 1 for v in range(data.first_update, n)):
        raise ValueError("nodes from the first optimizer op on have one copy")
    model = cp_model.CpModel()
    horizon = sum(copies) + (0 if canonical else slack)
    im = IntervalModel(data, model, copies, horizon, canonical, tight_ends)
    fu = data.first_update
    domains = _start_domains(data, copies, horizon, canonical)
    im.start_domain = domains

    def check(stage: str, v: int) -> None:
        if deadline is not None:
            deadline.check(_STEP, lambda: f"{stage}, node {v:,} of {n:,}; "
                                          f"{len(model.proto.variables):,} variables")

    # P1I.V1-V4: presence, start, end, length; P1I.C2 one computation per position;
    # P1I.C3 memory (the cumulative gets the intervals below).
    units, retention = [], []
    demands: list[int | cp_model.IntVar] = []
    end_hi = _end_upper(data, copies, domains, horizon)
    for v in range(n):
        check("variables", v)
        for j in range(copies[v]):
            lo, hi = domains[(v, j)]
            s = model.new_int_var(lo, hi, f"s_{v}_{j}")
            e = model.new_int_var(lo, max(hi, end_hi[v]), f"e_{v}_{j}")
            d = model.new_int_var(1, max(hi, end_hi[v]) - lo + 1, f"d_{v}_{j}")
            im.start[(v, j)], im.end[(v, j)], im.length[(v, j)] = s, e, d
            if j == 0:
                units.append(model.new_fixed_size_interval_var(s, 1, f"run_{v}_{j}"))
                held = model.new_interval_var(s, d, e + 1, f"hold_{v}_{j}")
            else:
                a = model.new_bool_var(f"a_{v}_{j}")
                im.present[(v, j)] = a
                units.append(model.new_optional_fixed_size_interval_var(s, 1, a, f"run_{v}_{j}"))
                held = model.new_optional_interval_var(s, d, e + 1, a, f"hold_{v}_{j}")
            if data.size[v] > 0:
                retention.append(held)
                demands.append(data.size[v])
    model.add_no_overlap(units)  # P1I.C2
    for g in range(len(data.input_ids)):
        x = model.new_int_var(0, horizon - 1, f"ex_{g}")  # P1I.V6
        im.input_end.append(x)
        if data.input_size[g] > 0:
            retention.append(model.new_interval_var(0, x + 1, x + 1, f"hold_x{g}"))
            demands.append(data.input_size[g])
    if capacity is not None and capacity > data.budget:
        # P1I.C12: memory at most cap, and at most cap - fill inside [first, end).
        cap = model.new_int_var(data.budget, capacity, "cap")
        fill = model.new_int_var(0, capacity - data.budget, "fill")
        first = model.new_int_var(0, horizon, "fill_first")
        end = model.new_int_var(0, horizon, "fill_end")
        span = model.new_int_var(0, horizon, "fill_span")
        retention.append(model.new_interval_var(first, span, end, "filler"))
        demands.append(fill)
        model.add_cumulative(retention, demands, cap)  # P1I.C3 with P1I.C12
        im.ceiling = Ceiling(cap, fill, first, end)
    else:
        model.add_cumulative(retention, demands, data.budget)  # P1I.C3

    # P1I.C1 copies in order (canonical: a chain; else pairwise), P1I.C5 recomputation after
    # release, P1I.C6 no recomputation from the first optimizer op on, P1I.C11 absent copies pinned.
    for v in range(n):
        check("copies", v)
        for j in range(1, copies[v]):
            a = im.present[(v, j)]
            s = im.start[(v, j)]
            if canonical:
                if j > 1:
                    model.add_implication(a, im.present[(v, j - 1)])
                model.add(s >= im.end[(v, j - 1)] + 1).only_enforce_if(a)
                model.add(s == domains[(v, j)][0]).only_enforce_if(~a)
                model.add(im.end[(v, j)] == domains[(v, j)][0]).only_enforce_if(~a)
            else:
                for i in range(j):
                    both = [a] if i == 0 else [a, im.present[(v, i)]]
                    model.add(s >= im.end[(v, i)] + 1).only_enforce_if(both)
            if fu < n:
                model.add(s + 1 <= im.start[(fu, 0)]).only_enforce_if(a)  # P1I.C6

    _order(im)
    _reads(im, check)
    if tight_ends:
        _tight_ends(im, check)

    # P1I.O1
    recomputations = list(im.present.items())
    model.minimize(cp_model.LinearExpr.weighted_sum([a for _, a in recomputations],
                                                    [data.cost[v] for (v, _), a in recomputations])
                   + sum(data.cost))
    return im


def _start_domains(data: P1Data, copies: tuple[int, ...], horizon: int,
                   canonical: bool) -> dict[Copy, tuple[int, int]]:
    """P1I.D1: the positions each copy may take.

    First computations: at least the number of nodes that must come first; in the
    canonical form, at most the copies of the nodes that may come first (positions are
    compact, §5).  Recomputations: after the first computation, before the first
    optimizer op and before the last position of some reader.
    """
    n = data.n
    fu = data.first_update
    before = [0] * (n + 1)
    for v in range(n):
        before[v + 1] = before[v] + copies[v]
    free_copies = before[min(fu, n)]
    domains: dict[Copy, tuple[int, int]] = {}
    for v in range(n):
        ef, lf = data.first[v]
        if not canonical:
            hi = horizon - 1
        elif data.fixed_order or v >= fu:
            hi = before[v]
        else:
            hi = lf + free_copies - fu
        domains[(v, 0)] = (ef, hi)
    last_any = [domains[(v, 0)][1] for v in range(n)]
    recompute_hi = (domains[(fu, 0)][1] if fu < n else horizon) - 1
    for v in reversed(range(n)):
        if copies[v] == 1:
            continue
        readers_hi = max(last_any[w] for w in data.consumers[v])
        hi = min(recompute_hi, readers_hi - 1, horizon - 1)
        lo0 = domains[(v, 0)][0]
        for j in range(1, copies[v]):
            domains[(v, j)] = (lo0 + (j if canonical else 1), max(hi, lo0 + j))
        last_any[v] = max(last_any[v], domains[(v, copies[v] - 1)][1])
    return domains


def _end_upper(data: P1Data, copies: tuple[int, ...], domains: Mapping[Copy, tuple[int, int]],
               horizon: int) -> list[int]:
    """The last position a reader of each node may take (ends are at most that)."""
    last = [max(domains[(v, j)][1] for j in range(copies[v])) for v in range(data.n)]
    return [min(horizon - 1, max([last[v]] + [last[w] for w in data.consumers[v]]))
            for v in range(data.n)]


def _order(im: IntervalModel) -> None:
    """P1I.C4: first computations in the fixed order, or topological (free order)."""
    data, model, s = im.data, im.model, im.start
    n, fu = data.n, data.first_update
    for v in range(n - 1):
        if data.fixed_order or v >= fu:
            if im.canonical and v >= fu:
                model.add(s[(v + 1, 0)] == s[(v, 0)] + 1)  # nothing runs between optimizer ops
            else:
                model.add(s[(v + 1, 0)] >= s[(v, 0)] + 1)
    if data.fixed_order:
        return
    for v in range(min(fu, n)):
        for u in dict.fromkeys(data.preds[v] + data.after[v]):
            model.add(s[(v, 0)] >= s[(u, 0)] + 1)
        if fu < n:
            model.add(s[(fu, 0)] >= s[(v, 0)] + 1)


def _reads(im: IntervalModel, check: Check) -> None:
    """P1I.C7 (reads served by a live copy), P1I.C8 (inputs held until read), P1I.C9
    (recomputations serve a reader)."""
    data, model = im.data, im.model
    serves: dict[Copy, list[cp_model.IntVar]] = {}
    for v in range(data.n):
        check("reads", v)
        for i in range(im.copies[v]):
            a_vi = im.is_present((v, i))
            s_vi = im.start[(v, i)]
            enforce = [] if a_vi is True else [a_vi]
            for u in data.preds[v]:
                if im.copies[u] == 1:
                    model.add(im.end[(u, 0)] >= s_vi).only_enforce_if(enforce)
                    continue
                zs = []
                for j in range(im.copies[u]):
                    z = model.new_bool_var(f"z_{u}_{j}_{v}_{i}")
                    im.reads[(u, j, v, i)] = z
                    zs.append(z)
                    model.add(im.end[(u, j)] >= s_vi).only_enforce_if(z)
                    if j > 0:
                        model.add_implication(z, im.present[(u, j)])
                        model.add(im.start[(u, j)] + 1 <= s_vi).only_enforce_if(z)
                        serves.setdefault((u, j), []).append(z)
                    if a_vi is not True:
                        model.add_implication(z, a_vi)
                model.add(sum(zs) == (1 if a_vi is True else a_vi))
            for g in data.node_inputs[v]:
                model.add(im.input_end[g] >= s_vi).only_enforce_if(enforce)
    for key, a in im.present.items():
        model.add(sum(serves.get(key, [])) >= 1).only_enforce_if(a)  # P1I.C9


def _tight_ends(im: IntervalModel, check: Check) -> None:
    """P1I.C10: each end is its copy's start or the start of one reader copy it serves."""
    data, model = im.data, im.model
    readers: dict[Copy, list[tuple[Copy, cp_model.IntVar | bool]]] = {}
    for v in range(data.n):
        for i in range(im.copies[v]):
            for u in data.preds[v]:
                for j in range(im.copies[u]):
                    z = im.reads.get((u, j, v, i))
                    served: cp_model.IntVar | bool = z if z is not None else im.is_present((v, i))
                    readers.setdefault((u, j), []).append(((v, i), served))
    for u in range(data.n):
        check("tight ends", u)
        if data.size[u] == 0:
            continue
        for j in range(im.copies[u]):
            own = model.new_bool_var(f"own_{u}_{j}")
            im.own[(u, j)] = own
            model.add(im.end[(u, j)] == im.start[(u, j)]).only_enforce_if(own)
            choice = [own]
            for (v, i), served in readers.get((u, j), []):
                last = model.new_bool_var(f"last_{u}_{j}_{v}_{i}")
                im.last[(u, j, v, i)] = last
                choice.append(last)
                if served is not True:
                    model.add_implication(last, served)
                model.add(im.end[(u, j)] == im.start[(v, i)]).only_enforce_if(last)
            present = im.is_present((u, j))
            model.add(sum(choice) == (1 if present is True else present))


# ------------------------------------------------------------------ plans <-> values
def assignment(im: IntervalModel, plan: Plan, *, positions: Sequence[int] | None = None,
               slots: Sequence[int] | None = None,
               absent_start: Mapping[Copy, int] | None = None) -> dict[cp_model.IntVar, int]:
    """The value of every variable of ``im`` for ``plan`` (the hint; the LNS's fixed part).

    ``positions[k]`` is the position of the plan's ``k``-th computation (default ``k``)
    and ``slots[k]`` its copy slot (default its copy number); absent slots start at
    ``absent_start`` (default: the canonical pin, the lower end of the domain).

    Raises
    ------
    ValueError
        A node has more computations than slots.
    """
    data = im.data
    pos = list(range(len(plan))) if positions is None else list(positions)
    slot = list(plan.copy) if slots is None else list(slots)
    values: dict[cp_model.IntVar, int] = {}
    start: dict[Copy, int] = {}
    end: dict[Copy, int] = {}
    for k, v in enumerate(plan.nodes):
        key = (v, slot[k])
        if key not in im.start:
            raise ValueError(f"{data.ops[v]!r} is computed more often than the model has copies")
        start[key] = pos[k]
        end[key] = pos[plan.end[k]]
    for key, s in im.start.items():
        if key in start:
            values[s] = start[key]
            values[im.end[key]] = end[key]
        else:
            lo = (absent_start or {}).get(key, im.start_domain[key][0])
            values[s] = values[im.end[key]] = lo
        values[im.length[key]] = values[im.end[key]] - values[s] + 1
    for key, a in im.present.items():
        values[a] = int(key in start)
    for g, x in enumerate(im.input_end):
        values[x] = pos[plan.input_end[g]] if plan.input_end[g] >= 0 else 0
    for (u, j, v, i), z in im.reads.items():
        live = (u, j) in start and (v, i) in start and start[(u, j)] < start[(v, i)] <= end[(u, j)]
        values[z] = int(live)
    for (u, j, v, i), last in im.last.items():
        values[last] = int((u, j) in start and (v, i) in start and start[(u, j)] < start[(v, i)]
                           and end[(u, j)] == start[(v, i)])
    for key, own in im.own.items():
        values[own] = int(key in start and end[key] == start[key])
    return values


def plan_of_solution(im: IntervalModel, value: object) -> Plan:
    """The canonical plan of a solution: present copies sorted by start (``value`` is the
    solver's ``value`` method)."""
    if not callable(value):
        raise TypeError("value must be the solver's value method")
    ran = [(int(value(s)), v) for (v, j), s in im.start.items()
           if j == 0 or int(value(im.present[(v, j)]))]
    ran.sort()
    return canonical_plan(im.data, [v for _, v in ran])
