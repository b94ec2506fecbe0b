"""A greedy repair heuristic: evict to recompute until the model's memory fits the budget.

Used by the backend for hints when no baseline fits (``formulations/p1_cpsat.md``,
"Hints").  It starts from a set of cells (store-all by default), finds the first slot
whose memory exceeds the budget under the model's semantics (minimal retention, frees
after the last reader), and replaces the retention of one resident item by a
recomputation at its next read, choosing the item read furthest in the future
(Belady's rule).  It is a heuristic: it may fail, and its schedules are not optimal.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from monet_ilp.problems.p1.cpsat.hints import Cell, minimal_retention

if TYPE_CHECKING:
    from monet_ilp.problems.p1.cpsat.variables import Item
    from monet_ilp.problems.p1.data import P1Data


def evict_until_fits(
    grid: P1Data, cells: set[Cell] | None = None, *, budget: int | None = None,
    max_steps: int | None = None, time_limit: float = 5.0, rule: str = "furthest",
) -> set[Cell] | None:
    """Cells whose model memory fits ``budget`` (scaled units), or ``None`` if the repair fails.

    ``rule`` picks the item to evict: ``"furthest"`` next read (Belady), ``"largest"``,
    or ``"area"`` (size times the distance to the next read, in stages).
    """
    budget = grid.budget if budget is None else budget
    last = grid.passes - 1
    cells = set(cells) if cells is not None else {(i, last, i) for i in range(grid.n)}
    max_steps = 20 * grid.n if max_steps is None else max_steps
    deadline = time.perf_counter() + time_limit
    for _ in range(max_steps):
        if time.perf_counter() > deadline:
            return None
        over = _first_overflow(grid, cells, budget)
        if over is None:
            return cells
        if over == "invalid":
            return None
        move = _choose_eviction(grid, cells, *over, rule=rule)
        if move is None:
            return None
        remove, add = move
        if remove is not None:
            cells.discard(remove)
        cells |= _with_closure(grid, cells, add)
    return None


def best_repair(grid: P1Data, *, budget: int | None = None, time_limit: float = 5.0) -> set[Cell] | None:
    """The cheapest of :func:`evict_until_fits` under each eviction rule (None if all fail)."""
    found = []
    for rule in ("furthest", "area", "largest"):
        cells = evict_until_fits(grid, budget=budget, time_limit=time_limit / 3, rule=rule)
        if cells is not None:
            found.append((sum(grid.cost[i] for _, _, i in cells), sorted(cells)))
    return set(min(found)[1]) if found else None


def _with_closure(grid: P1Data, cells: set[Cell], cell: Cell) -> set[Cell]:
    """``cell`` plus the recomputation, in the same stage and pass, of every predecessor
    that is not already resident there (so that no retention is stretched to serve it)."""
    retained = minimal_retention(grid, cells) or set()
    t, r, i = cell
    computed = {(s, j): q for s, q, j in cells}
    added = {cell}
    stack = [i]
    while stack:
        j = stack.pop()
        for p in grid.preds[j]:
            here = computed.get((t, p))
            if here is not None and here <= r or (t, p) in retained:
                continue
            if (r, p) not in grid.slot_rank[t] or here is not None:
                continue
            computed[(t, p)] = r
            added.add((t, r, p))
            stack.append(p)
    return added


def _first_overflow(grid: P1Data, cells: set[Cell], budget: int
                    ) -> tuple[int, int, int, dict[Item, int]] | Literal["invalid"] | None:
    """``(t, r, k, live items)`` at the first computed slot over budget, or None."""
    retained = minimal_retention(grid, cells)
    if retained is None:
        return "invalid"
    by_stage: dict[int, list[tuple[int, int]]] = {}
    for t, r, k in cells:
        by_stage.setdefault(t, []).append((r, k))
    input_last = [max((t for t, _, j in cells if j in readers), default=-1) for readers in grid.input_readers]
    retained_at: dict[int, list[int]] = {}
    for t, i in retained:
        retained_at.setdefault(t, []).append(i)
    for t in range(grid.n):
        slots = sorted(by_stage.get(t, ()))
        rank = grid.slot_rank[t]
        last_read: dict[Item, int] = {}
        for r, j in slots:
            q = rank[(r, j)]
            for p in grid.preds[j]:
                last_read[("node", p)] = q
            for g in grid.node_inputs[j]:
                last_read[("input", g)] = q
        held = {("node", i): grid.size[i] for i in retained_at.get(t, ())}
        held.update({("input", g): grid.input_size[g] for g in range(len(grid.input_ids))
                     if t <= input_last[g]})
        for r, k in slots:
            q = rank[(r, k)]
            if grid.size[k]:
                held[("node", k)] = grid.size[k]
            if sum(held.values()) > budget:
                return t, r, k, dict(held)
            for item in list(held):
                kind, x = item
                carried = (t + 1, x) in retained if kind == "node" else t + 1 <= input_last[x]
                if not carried and last_read.get(item, -1) <= q:
                    held.pop(item)  # P1C.C8: released after its last reader of the stage
    return None


def _choose_eviction(grid: P1Data, cells: set[Cell], t: int, r: int, k: int, live: dict[Item, int],
                     *, rule: str) -> tuple[Cell | None, Cell] | None:
    """The (cell to remove, cell to add) that evicts the live item read furthest ahead."""
    rank = grid.slot_rank
    here = rank[t][(r, k)]
    computed_in: dict[tuple[int, int], int] = {}
    for s, q, i in cells:
        computed_in[(s, i)] = q
    reads: dict[int, list[tuple[int, int, int]]] = {}
    for s, q, j in cells:
        for p in grid.preds[j]:
            reads.setdefault(p, []).append((s, rank[s][(q, j)], q))
    best: tuple[tuple[object, object], Cell | None, Cell] | None = None
    for kind, i in live:
        if kind != "node" or i == k or i in grid.preds[k]:
            continue
        own = computed_in.get((t, i))
        if own is not None:
            if _is_first(cells, t, i):
                continue
            since = rank[t][(own, i)]
        else:
            since = -1
        if any(s == t and since < pos <= here for s, pos, _ in reads.get(i, ())):
            continue  # read between its arrival and the overflow: it must stay
        ahead = sorted((s, pos, q) for s, pos, q in reads.get(i, ()) if (s, pos) > (t, here))
        if not ahead:
            continue
        s, pos, q = ahead[0]
        target = (s, q, i)
        if (q, i) not in rank[s] or (s == t and rank[s][(q, i)] <= here):
            continue
        if s != t and (s, i) in computed_in:
            continue
        remove = (t, own, i) if own is not None else None
        score: tuple[object, object] = {
            "furthest": ((s, pos), grid.size[i]),
            "largest": (grid.size[i], (s, pos)),
            "area": (grid.size[i] * (s - t + 1), (s, pos)),
        }[rule]
        if best is None or score > best[0]:
            best = (score, remove, target)
    if best is None:
        return None
    return best[1], best[2]


def _is_first(cells: set[Cell], t: int, i: int) -> bool:
    return not any(s < t and j == i for s, _, j in cells)
