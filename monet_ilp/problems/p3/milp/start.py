"""Warm starts of the P3 MILP: a timed schedule read into every column (P3M.X1-X8).

:func:`start_values` reads a schedule completely (runs, cores and variants, pins,
transfers with route and source, every copy's free, reads, every order binary) and keeps
it only if it meets every row of the model (``formulations/p3_milp.md`` §7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pulp

    from monet_ilp.problems.p3.milp.model import P3Milp
    from monet_ilp.schedule import OpRun, Schedule

__all__ = ["Outside", "StartValues", "start_values"]

#: A copy's life in a schedule: allocation, ready and free times, memory.
Life = tuple[int, int, int, str]


def start_values(model: P3Milp, schedule: Schedule) -> dict[str, float] | None:
    """Values of every column for a timed schedule of P3.K3 that satisfy every row, or None.

    The schedule is read completely (runs, variants, pins, transfers and their
    sources, frees, reads, every order binary), after the symmetry of P3M.M15
    (:meth:`~.model.P3Milp.canonical`); a schedule outside P3.K3 as the model spells it,
    or one that breaks a row (e.g. a capacity), gives None.  The values are left on
    the model's columns (:meth:`~.model.P3Milp.accepts`).
    """
    values = StartValues(model, model.canonical(schedule)).values()
    if values is None or not model.accepts(values):
        return None
    return values


class Outside(Exception):
    """The schedule is not in P3.K3 as the model spells it (then it is no warm start)."""


class StartValues:
    """Reads a timed schedule into the model's columns (P3M.X1-X8)."""

    def __init__(self, model: P3Milp, schedule: Schedule):
        self.model = model
        self.schedule = schedule
        self.v: dict[str, float] = {}

    def set(self, var: pulp.LpVariable | float | None, value: float) -> None:
        """Give column ``var`` the value (constants and None are not columns)."""
        if var is not None and not isinstance(var, (int, float)):
            self.v[var.name] = float(value)

    def values(self) -> dict[str, float] | None:
        try:
            return self._read()
        except (Outside, KeyError, IndexError, StopIteration):
            return None

    def _read(self) -> dict[str, float]:
        m, data, s = self.model, self.model.data, self.schedule
        op_index = {op.id: op.index for op in data.ops}
        p_index = {p.id: p.index for p in data.persistent}
        pinned_at: dict[int, str] = {}
        for t, mem in s.pinned:
            if (p_index.get(t), mem) not in m.pin or p_index[t] in pinned_at:
                raise Outside
            pinned_at[p_index[t]] = mem
        for (p, mem), x in m.pin.items():
            self.set(x, pinned_at.get(p) == mem)
        # runs (P3M.X1, P3M.X2)
        timed: dict[int, tuple[int, int, str]] = {}  # run -> start, end, memory
        by_op: dict[int, list[OpRun]] = {}
        for op_run in s.ops:
            by_op.setdefault(op_index[op_run.op], []).append(op_run)
        for op in data.ops:
            given = sorted(by_op.get(op.index, []), key=lambda r: (r.start, r.end))
            if not given or len(given) > op.max_runs:
                raise Outside
            for run in m.runs_of[op.index]:
                chosen = None
                if run.number < len(given):
                    g = given[run.number]
                    mem = data.memory_of[g.core]
                    use_pin = (g.core in op.pinned_cycles and bool(op.persistent_reads)
                               and all(pinned_at.get(p) == mem for p in op.persistent_reads))
                    chosen = (g.core, use_pin)
                    if chosen not in run.z or run.cycles[chosen] != g.end - g.start:
                        raise Outside
                    timed[run.index] = (g.start, g.end, mem)
                for key, z in run.z.items():
                    self.set(z, key == chosen)
                self.set(run.start, timed[run.index][0] if chosen else 0)
        # transfers (P3M.X4)
        item_of = {it.tensors[0]: it.index for it in data.items}
        moves: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
        for tr in sorted(s.transfers):
            i = item_of[tr.tensor]
            item = data.items[i]
            if len(item.tensors) != 1:
                raise Outside
            route = next(r for r, rt in enumerate(item.routes)
                         if (rt.src, rt.dst, rt.link) == (tr.src, tr.dst, tr.link))
            moves.setdefault((i, tr.dst), []).append((tr.start, tr.end, route))
        placed: dict[int, tuple[int, int, str, int]] = {}  # transfer -> start, end, dst, route
        slots = {(x.item, x.dst, x.number): x for x in m.transfers}
        for (i, dst), moved in moves.items():
            for n, (start, end, route) in enumerate(moved):
                x = slots.get((i, dst, n))
                if x is None or route not in x.w:
                    raise Outside
                placed[x.index] = (start, end, dst, route)
        for x in m.transfers:
            got = placed.get(x.index)
            for route_index, w in x.w.items():
                self.set(w, got is not None and got[3] == route_index)
            self.set(x.start, got[0] if got else 0)
        # copies (P3M.X5): alloc, ready, memory, free (the first free at or after the alloc)
        frees: dict[tuple[str, str], list[int]] = {}
        for f in s.frees:
            frees.setdefault((f.tensor, f.memory), []).append(f.time)
        makespan = s.makespan
        life: dict[int, Life] = {}
        for q in m.copies:
            if q.home is not None:  # a graph input's copy
                alloc, ready, mem = 0, 0, q.home
            elif q.run is not None and q.run.index in timed:
                alloc, ready, mem = timed[q.run.index]
            elif q.transfer is not None and q.transfer.index in placed:
                alloc, ready, mem, _ = placed[q.transfer.index]
            else:
                self.set(q.free, 0)
                continue
            tensor = data.items[q.item].tensors[0]
            # A free at a copy's own allocation belongs to the copy before it (EV.E1.6), except
            # for a graph input's copy, which may be freed at time 0.
            free = min((t for t in frees.get((tensor, mem), ())
                        if t > alloc or (q.kind == "input" and t >= alloc)), default=makespan)
            life[q.index] = (alloc, ready, free, mem)
            self.set(q.free, free)
        # reads and sources (P3M.X6)
        for (reader, _), choice in m.reads.items():
            pick: tuple[int, str] | None = None  # (copy, memory)
            if reader in timed:
                st, en, mem = timed[reader]
                pick = next(key for key in choice if key[1] == mem and key[0] in life
                            and life[key[0]][3] == mem and life[key[0]][1] <= st
                            and life[key[0]][2] >= en)
            for option, y in choice.items():
                self.set(y, option == pick)
        for transfer, choice in m.sources.items():
            pick = None
            if transfer in placed:
                st, en, _, route = placed[transfer]
                src = m.transfers[transfer].routes[route].src
                pick = next(key for key in choice if key[1] == src and key[0] in life
                            and life[key[0]][3] == src and life[key[0]][1] <= st
                            and life[key[0]][2] >= en)
            for option, y in choice.items():
                self.set(y, option == pick)
        # order binaries (P3M.X7) from the times, and the makespan (P3M.X8)
        layers = sorted({op.layer for op in data.ops if op.layer})
        for var in m.problem.variables():
            name = var.name
            if name in self.v:
                continue
            parts = name.split("_")
            tag = parts[0]
            if tag == "o9":
                a, b = int(parts[1]), int(parts[2])
                self.set(var, a in timed and b in timed and timed[a][1] <= timed[b][0])
            elif tag == "o10":
                a, b = int(parts[1]), int(parts[2])
                self.set(var, a in placed and b in placed and placed[a][1] <= placed[b][0])
            elif tag == "oq":  # 1: a's copy first, or a not in this memory
                a, b, mem = int(parts[1]), int(parts[2]), data.memories[int(parts[3])]
                a_here = a in life and life[a][3] == mem
                b_here = b in life and life[b][3] == mem
                self.set(var, not a_here or (b_here and life[a][2] <= life[b][0]))
            elif tag in ("mB12", "mB21", "mC12"):
                b12, b21, c12 = _memory_order(life.get(int(parts[1])), life.get(int(parts[2])))
                self.set(var, {"mB12": b12, "mB21": b21, "mC12": c12}[tag])
            elif tag in ("mG12", "mG21"):
                la, lb = life.get(int(parts[1])), life.get(int(parts[2]))
                if tag == "mG21":
                    la, lb = lb, la
                self.set(var, la is None or (lb is not None and la[2] <= lb[0]))
            elif tag == "layer":
                li, ci = int(parts[1]), int(parts[2])
                ops = [op.index for op in data.ops if op.layer == layers[li]]
                run = m.runs_of[ops[0]][0]
                self.set(var, any(self.v[z.name] > 0.5 for (c, _), z in run.z.items()
                                  if c == data.cores[ci]))
        self.set(m.makespan, makespan)
        if m.static is not None:
            self.set(m.static, data.static_pj(makespan))
        return self.v


def _memory_order(la: Life | None, lb: Life | None) -> tuple[bool, bool, bool]:
    """P3M.M11's B12, B21 and C12 for the lives of copies q1 and q2 (None: absent): q1 gone
    before q2 arrives, else q2 gone before q1 arrives, else whether q1 arrives first."""
    if la is None or (lb is not None and la[2] <= lb[0]):
        return True, False, False
    if lb is None or lb[2] <= la[0]:
        return False, True, False
    return False, False, la[0] <= lb[0]
