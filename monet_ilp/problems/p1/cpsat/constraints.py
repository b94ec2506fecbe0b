"""Constraint families of the P1 models, one function each, labelled as in ``formulations/p1_cpsat.md``.

Third step of the backend: the encodings (:mod:`.encodings`) call these on the
variables of :mod:`.variables`.  P1C.C1-C7 and P1C.C12 are shared; P1C.C8-C9 are the stage
encoding's memory, P1C.C10-C11 the interval encoding's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monet_ilp.problems.p1.cpsat.variables import (
    Expr,
    Item,
    Lit,
    P1Vars,
    items_read,
    items_read_or_made,
    readers_of,
)

if TYPE_CHECKING:
    from ortools.sat.python.cp_model_helper import Literal

    from monet_ilp.problems.p1.data import P1Data


def first_computation_once(v: P1Vars) -> None:
    """P1C.C1: every node is first computed once, every stage holds one first computation.

    With ``fixed_order`` the slot of node ``t`` in stage ``t`` is fixed to 1 when
    created; otherwise ``F`` assigns the free nodes one-to-one to the free stages, a
    node is computed in its first stage (``R >= F``) and never before it.
    """
    grid, model = v.grid, v.model
    if grid.fixed_order:
        return
    stages: dict[int, list[Lit]] = {}
    for i, (lo, hi) in enumerate(grid.first):
        if lo == hi:
            continue
        model.add_exactly_one(v.F(t, i) for t in range(lo, hi + 1))
        for t in range(lo, hi + 1):
            stages.setdefault(t, []).append(v.F(t, i))
            model.add(v.R(t, i) >= v.F(t, i))
        for t in range(lo, min(hi, grid.compute_stages[i][1] + 1)):
            # P1C.C1c: computed in stage t only if first computed in stage t or before.
            model.add(v.R(t, i) <= sum(v.F(s, i) for s in range(lo, t + 1)))
    forced = {lo for lo, hi in grid.first if lo == hi}
    for t, firsts in stages.items():
        if t in forced:
            model.add(sum(firsts) == 0)
        else:
            model.add_exactly_one(firsts)


def inputs_resident_when_computing(v: P1Vars) -> None:
    """P1C.C2: computing j needs each predecessor computed earlier in the stage, or retained.

    ``R[t,r,j] <= S[t,i] + sum_{r' <= r} R[t,r',i]`` for ``i in pred(j)`` (``i < j``,
    so the slots of ``i`` in passes ``r' <= r`` come first), and
    ``R[t,r,j] <= S^in[t,g]`` for each input ``g`` of ``j``.
    """
    grid, model = v.grid, v.model
    for t, slots in enumerate(grid.stage_slots):
        v.check("C2", t, grid.n)
        for r, j in slots:
            for i in grid.preds[j]:
                earlier = [v.Rs(t, q, i) for q in range(r + 1)]
                model.add(v.Rs(t, r, j) <= v.S(t, i) + sum(earlier))
            for g in grid.node_inputs[j]:
                model.add(v.Rs(t, r, j) <= v.S_in(t, g))


def retained_only_if_held(v: P1Vars) -> None:
    """P1C.C3: an item is resident at the start of stage t+1 only if it was held in stage t.

    ``S[t+1,i] <= R[t,i] + S[t,i]``; inputs are never recomputed:
    ``S^in[t+1,g] <= S^in[t,g]``.
    """
    model = v.model
    keys = list(v.var)
    for done, key in enumerate(keys):
        v.check("C3", done, len(keys))
        if key[0] == "S":
            _, t, i = key
            model.add(v.S(t, i) <= v.R(t - 1, i) + v.S(t - 1, i))
        elif key[0] == "Sin" and key[1] > 0:
            _, t, g = key
            model.add(v.S_in(t, g) <= v.S_in(t - 1, g))


def once_per_stage(v: P1Vars) -> None:
    """P1C.C4: a node is computed at most once per stage, and not while resident: ``R + S <= 1``.

    Recomputing a resident node rewrites the same bytes; a second computation in the
    same stage is left out of the model (``p1_cpsat.md``, "What the grid leaves out").
    """
    grid = v.grid
    for t, nodes in enumerate(grid.stage_nodes):
        v.check("C4", t, grid.n)
        for i in nodes:
            slots = sum(1 for r in range(grid.passes) if ("R", t, r, i) in v.var)
            if ("S", t, i) in v.var:
                v.model.add(v.R(t, i) + v.S(t, i) <= 1)
            elif slots > 1:
                v.model.add(v.R(t, i) <= 1)


def computations_and_retentions_used(v: P1Vars) -> None:
    """P1C.C5: a recomputation or a retention is read later in its stage or carried to the next.

    Symmetry breaking: a useless computation only costs, a useless retention only
    holds memory, so removing them never hurts.  ``R[t,r,i] - F[t,i] <= S[t+1,i] +
    sum R[t,r',j]`` over reader slots after ``(r, i)``, and ``S[t,i] <= S[t+1,i] +
    sum R[t,r',j]`` over all reader slots of stage ``t``; likewise for inputs.
    """
    grid, model = v.grid, v.model
    # The reader slots of each item in each stage, in slot order (one pass per stage:
    # scanning the stage for every slot and item is quadratic in the stage).
    reader_slots: list[dict[Item, list[tuple[int, Any]]]] = []
    for t, slots in enumerate(grid.stage_slots):
        v.check("C5 readers", t, grid.n)
        rank = grid.slot_rank[t]
        readers: dict[Item, list[tuple[int, Any]]] = {}
        for q, j in slots:
            for item in items_read(grid, j):
                readers.setdefault(item, []).append((rank[(q, j)], v.Rs(t, q, j)))
        reader_slots.append(readers)
    for t, slots in enumerate(grid.stage_slots):
        v.check("C5", t, grid.n)
        rank = grid.slot_rank[t]
        for r, i in slots:
            if grid.first[i] == (t, t):
                continue
            later = [lit for at, lit in reader_slots[t].get(("node", i), ()) if at > rank[(r, i)]]
            carried = v.S(t + 1, i)
            model.add(v.Rs(t, r, i) - v.F(t, i) <= carried + sum(later))
    for key in list(v.var):
        if key[0] not in ("S", "Sin"):
            continue
        _, t, x = key
        item = ("input", x) if key[0] == "Sin" else ("node", x)
        reads = [lit for _, lit in reader_slots[t].get(item, ())]
        model.add(v.var[key] <= v.resident_at_start(t + 1, item) + sum(reads))


def at_most_computes(v: P1Vars, max_computes: int | None) -> None:
    """P1C.C6: ``sum_t R[t,i] <= C`` (``max_computes``; none by default)."""
    if max_computes is None:
        return
    grid = v.grid
    for i, (lo, hi) in enumerate(grid.compute_stages):
        if hi - lo + 1 > max_computes:
            v.model.add(sum(v.R(t, i) for t in range(lo, hi + 1)) <= max_computes)


def first_computations_topological(v: P1Vars) -> None:
    """P1C.C7: without ``fixed_order``, every dependency is first computed in an earlier stage.

    ``sum_t t F[t,i] + 1 <= sum_t t F[t,j]`` for ``i in pred(j) | after(j)``.  For
    ``pred`` it follows from P1C.C1-C3 and only tightens the relaxation; for ``after``
    (a weight gradient read by an optimizer op) it is needed.
    """
    grid, model = v.grid, v.model
    if grid.fixed_order:
        return

    def stage_of(i: int) -> Expr:
        lo, hi = grid.first[i]
        return lo if lo == hi else sum(t * v.F(t, i) for t in range(lo, hi + 1))

    for j in range(grid.n):
        for i in set(grid.preds[j]) | set(grid.after[j]):
            if grid.first[i][1] >= grid.first[j][0]:
                model.add(stage_of(i) + 1 <= stage_of(j))


def passes_canonical(v: P1Vars) -> None:
    """P1C.C12: a node sits in pass r > 0 only if it could not sit in pass r - 1.

    ``R[t,r,k] <= sum_{j>k} R[t,r-1,j] + sum_{j<k} R[t,r,j]``: otherwise moving k to
    the end of pass r-1 gives the same sequence.  With ``fixed_order`` the stage's
    first computation is exempt (its one slot is the last).
    """
    grid, model = v.grid, v.model
    for t, slots in enumerate(grid.stage_slots):
        v.check("C12", t, grid.n)
        for r, k in slots:
            if r == 0 or grid.fixed_order and k == t:
                continue
            before = [v.Rs(t, r - 1, j) for q, j in slots if q == r - 1 and j > k]
            before += [v.Rs(t, r, j) for q, j in slots if q == r and j < k]
            model.add(v.Rs(t, r, k) <= sum(before))


def frees_after_last_reader(v: P1Vars) -> None:
    """P1C.C8: ``FREE[t,i,r,k] <=> R[t,r,k] and not S[t+1,i] and no later reader slot of i computed``."""
    grid, model = v.grid, v.model
    keys = [k for k in v.var if k[0] == "FREE"]
    for done, key in enumerate(keys):
        v.check("C8", done, len(keys))
        _, t, item, r, k = key
        free = v.var[key]
        rank = grid.slot_rank[t]
        readers = set(readers_of(grid, item))
        later = [v.var[("R", t, q, j)] for q, j in grid.stage_slots[t]
                 if j in readers and rank[(q, j)] > rank[(r, k)]]
        carried = v.resident_at_start(t + 1, item)
        lits: list[Literal] = [v.var[("R", t, r, k)]] + [c.Not() for c in later]
        if not isinstance(carried, int):
            lits.append(carried.Not())
        model.add_bool_and(lits).only_enforce_if(free)
        model.add_bool_or([lit.Not() for lit in lits] + [free])


def memory_within_budget_stages(v: P1Vars) -> None:
    """P1C.C9: the memory chain of each stage, ``U[t,r,k] <= B``.

    ``U`` at the first slot is ``sum_i m_i S[t,i] + sum_g m_g S^in[t,g] + m_k R[t,r,k]``;
    at each next slot ``U' = U - sum_{i in D(k)} m_i FREE[t,i,r,k] + m_k' R[t,r',k']``.
    """
    grid, model = v.grid, v.model
    for t, slots in enumerate(grid.stage_slots):
        v.check("C9", t, grid.n)
        held = sum(grid.size[i] * v.S(t, i) for i in range(grid.n) if ("S", t, i) in v.var)
        held += sum(grid.input_size[g] * v.S_in(t, g) for g in range(len(grid.input_ids))
                    if ("Sin", t, g) in v.var)
        previous = None
        for r, k in slots:
            memory = v.var[("U", t, r, k)]
            if previous is None:
                model.add(memory >= held + grid.size[k] * v.Rs(t, r, k))
            else:
                slot, released = previous
                model.add(memory >= v.var[("U", t, *slot)] - released + grid.size[k] * v.Rs(t, r, k))
            model.add(memory <= v.budget)
            released = sum(_size(grid, item) * v.var[("FREE", t, item, r, k)]
                           for item in items_read_or_made(grid, k))
            previous = ((r, k), released)


def retention_pieces_cover_reads(v: P1Vars) -> None:
    """P1C.C10: each piece starts where its item becomes resident and lasts past its readers.

    Start: the stage's first slot if retained (``S``), the computing slot if computed
    (``R[t,r,i]``).  End (exclusive): after every reader slot computed in the stage,
    and the stage's end when the item is retained into the next stage.
    """
    grid, model = v.grid, v.model
    for done, piece in enumerate(v.pieces):
        v.check("C10", done, len(v.pieces))
        t, (kind, x) = piece.stage, piece.item
        if ("start", t, piece.item) in v.var:
            if kind == "node" and ("S", t, x) in v.var:
                model.add(piece.start == v.offset[t]).only_enforce_if(v.S(t, x))
            for r in range(grid.passes):
                if kind == "node" and ("R", t, r, x) in v.var:
                    model.add(piece.start == v.position(t, r, x)).only_enforce_if(v.Rs(t, r, x))
        readers = set(readers_of(grid, piece.item))
        for q, j in grid.stage_slots[t]:
            if j in readers:
                model.add(piece.end >= v.position(t, q, j) + 1).only_enforce_if(v.Rs(t, q, j))
        carried = v.resident_at_start(t + 1, piece.item)
        if not isinstance(carried, int):
            model.add(piece.end == v.offset[t + 1]).only_enforce_if(carried)


def memory_within_budget_cumulative(v: P1Vars) -> None:
    """P1C.C11: the pieces, with demand ``m_i``, never exceed the budget: one cumulative."""
    v.model.add_cumulative([p.interval for p in v.pieces], [p.demand for p in v.pieces], v.budget)


def _size(grid: P1Data, item: Item) -> int:
    kind, x = item
    return grid.size[x] if kind == "node" else grid.input_size[x]
