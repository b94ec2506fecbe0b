"""The exact dynamic programme for training chains (rotor-style, after Beaumont et al. 2019).

Place in the pipeline: an Instance whose graph is a *training chain* (``formulations/dp.md``
§1) -> a P1 :class:`~monet_ilp.schedule.Sequence` of least compute cost over the DP's
schedule class (dp.md §2), or the least budget of that class when nothing fits.  The
labels DP.D1..D9 in the comments are the equations of dp.md.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from monet_ilp.errors import MonetError
from monet_ilp.problems.p1.data import check_p1, persistent_bytes_held
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Compute, Release, Sequence

if TYPE_CHECKING:
    from monet_ilp.graph.ir import Op, TrainingGraph
    from monet_ilp.instance import Instance

__all__ = [
    "DEFAULT_MAX_TABLE_BYTES",
    "TrainingChain",
    "chain_of",
    "is_chain",
    "solve_dp",
]

#: Largest DP table (bytes) :func:`solve_dp` allocates unless told otherwise.
DEFAULT_MAX_TABLE_BYTES = 1 << 30

#: What the DP's optimality is relative to (in every result's message and stats).
SCHEDULE_CLASS = "stack schedules of a training chain (formulations/dp.md §2)"

_INF = 1 << 60  # "no schedule": sums of three stay below 2**63
_NEG = -(1 << 60)  # "no computation" in peak tables
_OPTIONS = ("max_computes", "fixed_order", "max_table_bytes")
_FIX = "use --backend cpsat or milp"

#: The DP's tables and branch columns: integer numpy arrays.
Ints = npt.NDArray[np.int64]
#: A state or position index, or an array of them (the branch builders work elementwise).
Index = int | np.integer[Any] | npt.NDArray[np.integer[Any]] | npt.NDArray[np.bool_]


# ================================================================ the chain view
@dataclass(frozen=True)
class TrainingChain:
    """A graph seen as a training chain (dp.md §1).

    Attributes
    ----------
    forward
        ``F_1 .. F_L``: a path, ``F_j`` reading only ``F_{j-1}``'s outputs (``F_1``: only
        graph inputs); their outputs ``a_1 .. a_L`` are what the DP stores or recomputes.
    tail
        ``O_1 .. O_K``: the ops after the path (loss, backward), each computed once.
    trailing
        Ops without non-persistent inputs or outputs at the end (optimizer updates).
    first_inputs
        ``a_0``: the graph inputs ``F_1`` reads (never recomputed).
    reads
        For each tail op, the forward indices it reads (0 = ``a_0``): none, one ``j``, or
        two consecutive ``j-1, j``; both ends non-increasing along the tail (DP.D0).
    """

    forward: tuple[str, ...]
    tail: tuple[str, ...]
    trailing: tuple[str, ...]
    first_inputs: tuple[str, ...]
    reads: tuple[tuple[int, ...], ...]

    @property
    def length(self) -> int:
        return len(self.forward)


def _not_chain(reason: str) -> MonetError:
    return MonetError(f"dp needs a chain graph: {reason}", field="backend", fix=_FIX)


def chain_of(graph: TrainingGraph) -> TrainingChain:
    """The training-chain view of ``graph`` (dp.md §1), or a :class:`MonetError` saying why not.

    The forward path is the longest prefix of the op order that is a path; if the ops
    after it do not read it in the admissible pattern, the path is shortened (its last
    ops then run once, as tail ops) until they do.

    Raises
    ------
    MonetError
        ``"dp needs a chain graph: ..."`` with ``field="backend"``.
    """
    persistent = {t.id for t in graph.tensors if t.persistent}
    producer = {t.id: t.producer for t in graph.tensors}
    ops = graph.ops
    n = len(ops)
    live_in = [tuple(t for t in dict.fromkeys(op.inputs) if t not in persistent) for op in ops]
    live_out = [tuple(t for t in dict.fromkeys(op.outputs) if t not in persistent) for op in ops]
    preds = [tuple(dict.fromkeys(p for t in ins if (p := producer[t]) is not None)) for ins in live_in]
    graph_inputs = [tuple(t for t in ins if producer[t] is None) for ins in live_in]

    end = n
    while end > 0 and not live_in[end - 1] and not live_out[end - 1]:
        end -= 1
    if end == 0:
        raise _not_chain("no op has a non-persistent output")
    for op in ops[:end]:
        if op.updates:
            raise _not_chain(f"op {op.id!r} updates tensors in place but is not among the last ops")
    if not live_out[0]:
        raise _not_chain(f"the first op {ops[0].id!r} has no non-persistent output")
    longest = 1
    while (longest < end and live_out[longest] and not graph_inputs[longest]
           and preds[longest] == (ops[longest - 1].id,)):
        longest += 1

    first_reason = None
    for length in range(longest, max(longest - 2, 0), -1):  # dp.md §1.1: the loss may end the path
        reads = _tail_reads(ops, preds, graph_inputs, length, end)
        if isinstance(reads, str):
            first_reason = first_reason or reads
            continue
        return TrainingChain(
            forward=tuple(op.id for op in ops[:length]),
            tail=tuple(op.id for op in ops[length:end]),
            trailing=tuple(op.id for op in ops[end:]),
            first_inputs=graph_inputs[0],
            reads=reads,
        )
    raise _not_chain(f"{first_reason} (forward path {ops[0].id!r}..{ops[longest - 1].id!r})")


def _tail_reads(ops: tuple[Op, ...], preds: list[tuple[str, ...]], graph_inputs: list[tuple[str, ...]],
                length: int, end: int) -> tuple[tuple[int, ...], ...] | str:
    """DP.D0: the forward indices each tail op reads, or why the tail is not admissible."""
    index = {ops[j].id: j + 1 for j in range(length)}
    first = set(graph_inputs[0])
    out: list[tuple[int, ...]] = []
    prev: tuple[int, int, str] | None = None
    for q in range(length, end):
        gradients = [p for p in preds[q] if p not in index]
        if len(gradients) > 1:
            return (f"op {ops[q].id!r} reads the outputs of {len(gradients)} ops after the forward "
                    f"path ({', '.join(repr(g) for g in gradients[:3])}); a chain's backward ops "
                    "read one gradient each")
        reads = {index[p] for p in preds[q] if p in index}
        if first.intersection(graph_inputs[q]):
            reads.add(0)
        name = ops[q].id
        if len(reads) > 2 or (len(reads) == 2 and max(reads) - min(reads) != 1):
            shown = ", ".join(repr(ops[j - 1].id) if j else "the graph inputs" for j in sorted(reads))
            return (f"op {name!r} reads {shown}; an op after the forward path may read one "
                    "forward output or two consecutive ones")
        if reads:
            lo, hi = min(reads), max(reads)
            if prev is not None and (hi > prev[1] or lo > prev[0]):
                return (f"op {name!r} reads forward output {hi} after op {prev[2]!r} read "
                        f"{prev[1]}; the backward ops must visit the forward path in reverse")
            prev = (lo, hi, name)
        out.append(tuple(sorted(reads)))
    return tuple(out)


def is_chain(graph: TrainingGraph) -> bool:
    """Whether :func:`solve_dp` accepts ``graph`` (see :func:`chain_of`)."""
    try:
        chain_of(graph)
    except MonetError:
        return False
    return True


# ================================================================ data of the DP
class _ChainData:
    """The numbers of dp.md §1.2, as integer numpy arrays indexed as in the document."""

    def __init__(self, instance: Instance, chain: TrainingChain):
        graph = instance.graph
        core = instance.cores[0].id

        def cycles(op: str) -> int:
            return instance.cost(op, core).cycles

        def nbytes(tensors: Iterable[str]) -> int:
            return sum(graph.tensor(t).bytes for t in tensors)

        def live(tensors: Iterable[str]) -> tuple[str, ...]:
            return tuple(t for t in dict.fromkeys(tensors) if not graph.tensor(t).persistent)

        self.chain = chain
        L, K = len(chain.forward), len(chain.tail)
        self.L, self.K = L, K
        self.forward = ("",) + chain.forward  # 1-based
        self.tail = ("",) + chain.tail  # 1-based
        self.w = np.array([nbytes(chain.first_inputs)]
                          + [nbytes(live(graph.op(v).outputs)) for v in chain.forward], dtype=np.int64)
        self.f = np.array([0] + [cycles(v) for v in chain.forward], dtype=np.int64)
        self.c = np.array([0] + [cycles(v) for v in chain.tail], dtype=np.int64)
        self.fcum = np.cumsum(self.f)
        self.ccum = np.cumsum(self.c)
        self.trailing_cycles = sum(cycles(v) for v in chain.trailing)
        self.hi = np.full(K + 2, -1, dtype=np.int64)
        self.lo = np.full(K + 2, -1, dtype=np.int64)
        for q, r in enumerate(chain.reads, start=1):
            if r:
                self.hi[q], self.lo[q] = max(r), min(r)
        self.pair = (self.hi >= 0) & (self.hi != self.lo)
        self.pairs_cum = np.concatenate([[0], np.cumsum(self.pair[1:K + 1])]).astype(np.int64)
        # First and last tail op reading the pair (j-1, j); K+1 / 0 when there is none.
        self.first_pair = np.full(L + 2, K + 1, dtype=np.int64)
        self.last_pair = np.zeros(L + 2, dtype=np.int64)
        for q in range(K, 0, -1):
            if self.pair[q]:
                self.first_pair[self.hi[q]] = q
        for q in range(1, K + 1):
            if self.pair[q]:
                self.last_pair[self.hi[q]] = q

        # DP.D1: tail memory.  A tail op's outputs live from it to their last tail reader;
        # an input read only by tail ops lives from the start to its last reader.
        position = {v: q for q, v in enumerate(chain.tail, start=1)}
        gap = np.zeros(K + 2, dtype=np.int64)  # difference arrays
        run = np.zeros(K + 2, dtype=np.int64)
        for q, v in enumerate(chain.tail, start=1):
            outs = live(graph.op(v).outputs)
            size = nbytes(outs)
            last = max([q] + [position[r] for t in outs for r in graph.tensor(t).consumers if r in position])
            gap[q] += size
            gap[last] -= size
            run[q] += size
            run[last + 1] -= size
        first = set(chain.first_inputs)
        self.dead_inputs: list[str] = []
        for t in graph.tensors:
            if t.persistent or t.producer is not None or t.id in first:
                continue
            readers = [position[r] for r in t.consumers if r in position]
            if not readers:
                self.dead_inputs.append(t.id)
                continue
            gap[0] += t.bytes
            gap[max(readers)] -= t.bytes
            run[1] += t.bytes
            run[max(readers) + 1] -= t.bytes
        self.tgap = np.cumsum(gap)[:K + 1]  # Tgap[p], p = 0..K
        self.trun = np.cumsum(run)[:K + 1]  # Trun[q], q = 1..K (index 0 unused)
        self.trun[0] = 0

        # e[s]: the last tail op that reads a forward output of index >= s (0: none).
        self.e = np.zeros(L + 2, dtype=np.int64)
        for q in range(1, K + 1):
            if self.hi[q] >= 1:
                self.e[1:self.hi[q] + 1] = q
        zero_readers = [q for q in range(1, K + 1) if self.lo[q] == 0]
        self.last_zero = max(zero_readers, default=0)
        self.keep_zero = int(any(self.hi[q] == 0 for q in range(1, K + 1)) and self.w[0] > 0)
        # P*: the positions where a state can start (dp.md §3.1).
        positions = {-1, 0} | {int(x) for x in self.e[1:]}
        for p in sorted(positions):
            while 0 <= p < K and self.hi[p + 1] < 0:
                p += 1
                positions.add(p)
        self.positions = np.array(sorted(positions), dtype=np.int64)
        self.pos_index = np.full(K + 2, -1, dtype=np.int64)  # position -> index; -1 at index K+1
        for i, p in enumerate(self.positions):
            self.pos_index[p] = i  # p = -1 lands on the last slot
        # First non-empty read after each position (for the largest useful checkpoint).
        self.next_hi = np.full(K + 2, -1, dtype=np.int64)
        nxt = -1
        for q in range(K, -1, -1):
            self.next_hi[q] = nxt
            if q >= 1 and self.hi[q] >= 0:
                nxt = self.hi[q]
        # Sparse table of Trun for range maxima over (a, b].
        levels = [np.concatenate([self.trun, [_NEG]])]
        span = 1
        while 2 * span <= K:
            prev = levels[-1]
            nxt_level = prev.copy()
            nxt_level[:len(prev) - span] = np.maximum(prev[:len(prev) - span], prev[span:])
            levels.append(nxt_level)
            span *= 2
        self.sparse = np.stack(levels)

    def range_max(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``max Trun[q]`` over ``a < q <= b`` (``_NEG`` where the range is empty)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        n = b - a
        ok = n > 0
        k = np.zeros_like(n)
        k[ok] = np.floor(np.log2(n[ok])).astype(np.int64)
        k = np.minimum(k, len(self.sparse) - 1)
        lo = np.where(ok, a + 1, 0)
        hi = np.where(ok, b - (1 << k) + 1, 0)
        out = np.maximum(self.sparse[k, lo], self.sparse[k, hi])
        return np.where(ok, out, _NEG)


class _Timeout(Exception):
    pass


_FIELDS = ("child", "child_keep", "cont", "cost", "local0", "local1", "shift0", "shift1",
           "sweep_to", "direct", "direct_to", "w_from", "w_to")


class _Rows:
    """The branches (DP.D3-D5, DP.D9) of every state with one base index s, grouped by state.

    A branch is: the sweep ``F_s .. F_{sweep_to - 1}`` from the base; a child (a state
    of the table, seeing the base as outside memory when ``shift``; the zero state when
    there is none); the tail ops ``(direct, direct_to]`` then ``(w_from, w_to]``; then
    the continuation ``cont``, on the same base.  ``cost`` counts the sweep and those
    tail ops; ``local0/1`` is the branch's own peak with kb = 0/1, outside memory
    excluded.  The rows of ``states[i]`` are ``bounds[i]:bounds[i+1]``.
    """

    def __init__(self, cols: dict[str, np.ndarray], row_state: np.ndarray, states: list[int]):
        lookup = {state: i for i, state in enumerate(states)}
        ids = np.array(states, dtype=np.int64)
        where = np.argsort(ids)
        key = where[np.searchsorted(ids[where], row_state)] if len(row_state) else row_state
        order = np.argsort(key, kind="stable")
        self.cols = {k: np.ascontiguousarray(v[order]) for k, v in cols.items()}
        self.states = states
        self.bounds = np.searchsorted(key[order], np.arange(len(states) + 1))
        self.slot = lookup


class _ChainDP:
    """The tables of dp.md §3: least cost V (DP.D6) and least peak P (DP.D8) per state (DP.D2) and kb.

    State ids: ``S(s, p)`` is ``s * npos + index(p)`` (``s = L+1``: the zero state;
    ``S(s, p)`` with ``p >= e(s)`` is empty); ``U(s, j)`` follow, for each ``j`` that a
    tail op reads together with ``j-1``, and ``1 <= s < j``.
    """

    def __init__(self, data: _ChainData, budget: int, deadline: float | None, max_table_bytes: int):
        d = self.d = data
        self.budget = budget
        self.deadline = deadline
        self.max_table_bytes = max_table_bytes
        self.npos = len(d.positions)
        n = (d.L + 2) * self.npos
        self.u_base = np.full(d.L + 2, -1, dtype=np.int64)
        for j in range(2, d.L + 1):
            if d.first_pair[j] <= d.K:
                self.u_base[j] = n - 1  # U(s, j) = u_base[j] + s, s = 1 .. j-1
                n += j - 1
        self.n_states = n
        self.zero = int(self.sid_s(d.L + 1, 0))
        self.state_s = np.zeros(n, dtype=np.int64)
        self.empty = np.ones(n, dtype=bool)
        self.by_base: dict[int, list[int]] = {}  # s -> its states, in computing order
        for s in range(d.L, 0, -1):
            items = [(int(d.first_pair[j]) - 1, 0, int(self.sid_u(s, j)))
                     for j in range(s + 1, d.L + 1) if self.u_base[j] >= 0]
            items += [(int(p), 1, int(self.sid_s(s, int(p)))) for p in d.positions if p < 0 or p < d.e[s]]
            items.sort(key=lambda x: (-x[0], x[1]))  # later positions first; U before S (dp.md §3.3)
            self.by_base[s] = [sid for _, _, sid in items]
            self.empty[self.by_base[s]] = False
            self.state_s[self.by_base[s]] = s
        self._rows: dict[int, _Rows] = {}

    def sid_s(self, s: Index, p: Index) -> Ints:
        """The id of state ``S(s, p)`` (of each, elementwise)."""
        ids: Ints = np.asarray(s) * self.npos + self.d.pos_index[p]
        return ids

    def sid_u(self, s: Index, j: Index) -> Ints:
        """The id of state ``U(s, j)`` (of each, elementwise)."""
        ids: Ints = self.u_base[j] + s
        return ids

    def _tick(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise _Timeout

    # ------------------------------------------------------------ branches
    def rows(self, s: int, only: int | None = None) -> _Rows:
        """The branches of every state with base s, or of state ``only`` (cached)."""
        if only is None:
            return self._build(s)
        rows = self._rows.get(only)
        if rows is None:
            rows = self._rows[only] = self._build(s, only)
        return rows

    def _after_keep(self, s: int, c: np.ndarray, p1: np.ndarray) -> dict[str, np.ndarray]:
        """DP.D5: after a child that kept its base a_c, at position p1: W, then S(s, e(c)) or U(s, c)."""
        d, e, w = self.d, self.d.e, self.d.w
        fp = d.first_pair[c]
        blocking = (c > s) & (fp <= e[c]) & (fp > p1)  # a reader of (c-1, c), c-1 above the base
        w_to = np.maximum(np.where(blocking, fp - 1, e[c]), p1)
        pairs_in = d.pairs_cum[w_to] - d.pairs_cum[p1]
        valid = (e[c] > p1) & ((pairs_in == 0) | (c == s))
        cont = np.where(blocking, self.u_base[c] + s, self.sid_s(s, e[c]))
        needed = blocking | (e[c] < e[s]) | ((c == s) & (pairs_in > 0))
        wmax = d.range_max(p1, w_to)
        reads_base = valid & (c == s) & (pairs_in > 0)  # W reads the base up to its last pair reader
        last = np.full(len(c), int(d.last_pair[s]))
        held = d.range_max(p1, last) + w[s - 1] + w[s]
        rest = d.range_max(last, w_to) + w[s]
        out = {"valid": valid, "w_to": w_to, "cont": cont, "needed": needed,
               "cost": d.ccum[w_to] - d.ccum[p1]}
        for kb in (0, 1):
            keep = (needed | bool(kb)).astype(np.int64)
            loc = np.where(w_to > p1, w[c] + keep * w[s - 1] + wmax, _NEG)
            out[f"local{kb}"] = np.where(reads_base, np.maximum(held, rest + kb * w[s - 1]), loc)
        return out

    def _build(self, s: int, only: int | None = None) -> _Rows:
        """All branches of the states with base index s (or of state ``only``), vectorised."""
        d, e, w, L = self.d, self.d.e, self.d.w, self.d.L
        # inner[s'] = max_{s < j < s'} (w[j-1] + w[j]): the later sweep steps (DP.D4).
        inner_tab = np.full(L + 2, _NEG, dtype=np.int64)
        if L - s > 0:
            inner_tab[s + 2:L + 2] = np.maximum.accumulate(w[s:L] + w[s + 1:L + 1])
        parts: dict[str, list[np.ndarray]] = {k: [] for k in _FIELDS + ("state", "needed", "first", "inner")}

        def add(mask: npt.NDArray[np.bool_], **cols: Index) -> None:
            n = len(mask)
            for k, v in cols.items():
                v = np.asarray(v, dtype=np.int64)
                parts[k].append(np.broadcast_to(v, (n,))[mask] if v.ndim == 0 else v[mask])

        def expand(counts: Ints) -> tuple[Ints, Ints]:
            owner = np.repeat(np.arange(len(counts)), counts)
            starts = np.cumsum(counts) - counts
            return owner, np.arange(int(counts.sum())) - np.repeat(starts, counts)

        # ---- S(s, p): checkpoint at s' (DP.D4, DP.D5) and run (DP.D3)
        states = self.by_base[s] if only is None else [only]
        ps = np.array([int(p) for p in d.positions if (p < 0 or p < e[s])
                       and (only is None or self.sid_s(s, int(p)) == only)], dtype=np.int64)
        p0 = np.maximum(ps, 0)
        top = np.where(ps < 0, L + 1, np.minimum(L + 1, d.next_hi[p0] + 1))
        owner, k = expand(top - s)
        P, P0 = ps[owner], p0[owner]
        SP = s + 1 + k
        TG = d.tgap[P0]
        state = self.sid_s(s, P)
        cost = d.fcum[SP - 1] - d.fcum[s - 1]
        first = w[s - 1] + w[s] + TG
        inner = np.where(inner_tab[SP] > _NEG, inner_tab[SP] + TG, _NEG)
        p1 = np.maximum(P0, e[SP])
        child = self.sid_s(SP, P)
        common = {"state": state, "child": child, "first": first, "inner": inner, "sweep_to": SP,
                  "direct": 0, "direct_to": 0, "w_from": p1}
        ak = self._after_keep(s, SP - 1, p1)
        add((p1 > P) | (P < 0), **common, child_keep=0, cont=self.sid_s(s, p1), cost=cost,
            needed=p1 < e[s], local0=_NEG, local1=_NEG, w_to=p1)
        add(ak["valid"], **common, child_keep=1, cont=ak["cont"], cost=cost + ak["cost"],
            needed=ak["needed"], local0=ak["local0"], local1=ak["local1"], w_to=ak["w_to"])
        runs = ps[(ps >= 0) & (ps < e[s])]
        runs = runs[d.hi[runs + 1] < 0]  # the next tail op reads no forward output
        local = w[s - 1] + d.trun[runs + 1]
        add(np.ones(len(runs), dtype=bool), state=self.sid_s(s, runs), child=self.zero, child_keep=0,
            cont=self.sid_s(s, runs + 1), cost=d.c[runs + 1], needed=1, local0=local, local1=local,
            first=_NEG, inner=_NEG, sweep_to=s, direct=runs, direct_to=runs + 1, w_from=0, w_to=0)

        # ---- U(s, j): sweep to a_{j-1} holding a_j (DP.D9)
        js = np.array([j for j in range(s + 1, L + 1) if self.u_base[j] >= 0
                       and (only is None or self.sid_u(s, j) == only)], dtype=np.int64)
        if len(js):
            owner, k = expand(js - s)
            J = js[owner]
            SP = s + 1 + k
            pu = d.first_pair[J] - 1
            TG = d.tgap[pu]
            WJ = w[J]
            state = self.u_base[J] + s
            cost = d.fcum[SP - 1] - d.fcum[s - 1]
            first = w[s - 1] + w[s] + TG + WJ
            inner = np.where(inner_tab[SP] > _NEG, inner_tab[SP] + TG + WJ, _NEG)
            p1 = e[SP]
            direct = SP == J
            child = np.where(direct, self.zero, self.u_base[J] + SP)
            run_cost = np.where(direct, d.ccum[e[J]] - d.ccum[pu], 0)
            last = d.last_pair[J]
            with_pairs = d.range_max(pu, last) + WJ + w[J - 1]
            after_pairs = d.range_max(last, e[J]) + WJ
            common = {"state": state, "child": child, "first": first, "inner": inner, "sweep_to": SP,
                      "direct": np.where(direct, pu, 0), "direct_to": np.where(direct, e[J], 0),
                      "w_from": p1}
            ak = self._after_keep(s, SP - 1, p1)
            more: Index
            for child_keep in (0, 1):
                run_local = np.maximum(with_pairs, after_pairs + child_keep * w[J - 1])
                if child_keep == 0:
                    ok = np.ones(len(SP), dtype=bool)
                    cont, needed, more, w_to = self.sid_s(s, p1), p1 < e[s], 0, p1
                    loc = [np.full(len(SP), _NEG), np.full(len(SP), _NEG)]
                else:
                    ok, cont, needed = ak["valid"], ak["cont"], ak["needed"]
                    more, w_to = ak["cost"], ak["w_to"]
                    loc = [ak["local0"], ak["local1"]]
                for kb in (0, 1):
                    keep = (needed | bool(kb)).astype(np.int64)
                    loc[kb] = np.where(direct, np.maximum(loc[kb], keep * w[s - 1] + run_local), loc[kb])
                add(ok, **common, child_keep=child_keep, cont=cont, cost=cost + run_cost + more,
                    needed=needed, local0=loc[0], local1=loc[1], w_to=w_to)

        cols = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in parts.items()}
        for kb in (0, 1):  # DP.D4: F_s holds the base; later sweep steps only if it is kept
            keep = (cols["needed"] | kb).astype(bool)
            sweep = np.maximum(cols["first"], np.where(keep, w[s - 1], 0) + cols["inner"])
            sweep = np.where(cols["sweep_to"] > s, sweep, _NEG)
            cols[f"local{kb}"] = np.maximum(sweep, cols[f"local{kb}"])
            cols[f"shift{kb}"] = (keep & (cols["child"] != self.zero)).astype(np.int64)
        row_state = cols.pop("state")
        for name in ("needed", "first", "inner"):
            del cols[name]
        return _Rows(cols, row_state, states)

    # ------------------------------------------------------------ least peak (DP.D8)
    def least_peak(self) -> int:
        d = self.d
        peak = np.full((self.n_states, 2), _NEG, dtype=np.int64)
        for s in range(d.L, 0, -1):
            rows = self.rows(s)
            c = rows.cols
            for i, sid in enumerate(rows.states):
                self._tick()
                a, b = rows.bounds[i], rows.bounds[i + 1]
                child = peak[c["child"][a:b], c["child_keep"][a:b]]
                cont = peak[c["cont"][a:b]]
                for kb in (0, 1):
                    inside = np.where(c[f"shift{kb}"][a:b] > 0, child + d.w[s - 1], child)
                    peak[sid, kb] = np.maximum(np.maximum(c[f"local{kb}"][a:b], inside), cont[:, kb]).min()
        return max(int(peak[int(self.sid_s(1, -1)), d.keep_zero]), self.root_local())

    def root_local(self) -> int:
        """DP.D7: peak of the tail ops after e(1), which read only a_0."""
        d = self.d
        best = _NEG
        for q in range(max(0, int(d.e[1])) + 1, d.K + 1):
            held = d.w[0] if (d.keep_zero and q <= d.last_zero) else 0
            best = max(best, int(held + d.trun[q]))
        return best

    # ------------------------------------------------------------ least cost (DP.D6)
    def grid(self) -> np.ndarray:
        """The outside memories z: subset sums of w_0..w_{L-1} up to the budget (dp.md §3.3)."""
        sums = np.array([0], dtype=np.int64)
        for size in self.d.w[:self.d.L]:
            if size <= 0:
                continue
            sums = np.union1d(sums, sums + size)
            sums = sums[sums <= self.budget]
            if len(sums) > self.max_table_bytes // 16:
                break
        return sums

    def solve(self) -> int:
        d = self.d
        z = self.grid()
        m = len(z)
        table_bytes = 8 * self.n_states * 2 * (m + 1)
        if table_bytes > self.max_table_bytes:
            raise MonetError(
                f"the dp table would take {table_bytes / 2**20:.0f} MiB ({m} memory levels x "
                f"{self.n_states} states)", field="max_table_bytes",
                fix="raise max_table_bytes, use sizes with a common divisor, or use --backend cpsat or milp")
        self.z = z
        self.zcol = np.append(z, _INF)  # column m: "beyond the grid", always infeasible
        self.shift_of: dict[int, np.ndarray] = {}
        for size in {int(x) for x in d.w}:
            target = np.searchsorted(z, z + size, side="left")  # smallest grid z' >= z + size
            self.shift_of[size] = np.append(np.where(z + size <= self.budget, target, m), m)
        value = np.zeros((2, self.n_states, m + 1), dtype=np.int64)  # [kb, state, z]
        value[..., m] = _INF
        self.value = value
        rows_of = value.reshape(-1, m + 1)  # row kb * n_states + state
        block = max(1, (1 << 21) // (2 * (m + 1)))  # rows per block
        for s in range(d.L, 0, -1):
            rows = self.rows(s)
            c = rows.cols
            smap = self.shift_of[int(d.w[s - 1])]
            bounds = rows.bounds
            i = 0
            while i < len(rows.states):
                # DP.D6, the part that reads only children (all of a larger base, so final):
                # cost + child value at z or z + w[s-1], or INF where z > B - local.
                j = max(i + 1, int(np.searchsorted(bounds, bounds[i] + block, side="right")) - 1)
                a0, a1 = bounds[i], bounds[j]
                child = np.take(rows_of, c["child_keep"][a0:a1] * self.n_states + c["child"][a0:a1], axis=0)
                moved = np.take(child, smap, axis=1)  # the child seeing the base as outside memory
                cost = c["cost"][a0:a1, None]
                part = np.empty((2, a1 - a0, m + 1), dtype=np.int64)
                np.add(moved, cost, out=part[1])  # kb = 1: the base is kept, always seen
                plain = c["shift1"][a0:a1, None] == 0  # rows without a child
                np.add(child, cost, out=part[1], where=plain)
                np.add(child, cost, out=part[0])
                seen = c["shift0"][a0:a1, None] > 0  # kb = 0: seen only while still needed
                np.copyto(part[0], part[1], where=seen)
                for kb in (0, 1):
                    limit = self.budget - c[f"local{kb}"][a0:a1]
                    np.putmask(part[kb], self.zcol[None, :] > limit[:, None], _INF)
                for k in range(i, j):
                    self._tick()
                    a, b = bounds[k], bounds[k + 1]
                    total = part[:, a - a0:b - a0] + value[:, c["cont"][a:b]]
                    np.minimum(total.min(axis=1), _INF, out=value[:, rows.states[k]])
                i = j
        return int(value[d.keep_zero, int(self.sid_s(1, -1)), 0])

    # ------------------------------------------------------------ the schedule
    def computations(self) -> list[str]:
        """The computations of an optimal schedule (DP.D6 read back, then DP.D7)."""
        d = self.d
        out: list[str] = []
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * (d.L + d.K) + 200))
        try:
            self._rebuild(int(self.sid_s(1, -1)), d.keep_zero, 0, out)
        finally:
            sys.setrecursionlimit(limit)
        out.extend(d.tail[max(0, int(d.e[1])) + 1:])
        out.extend(d.chain.trailing)
        return out

    def _rebuild(self, sid: int, kb: int, col: int, out: list[str]) -> None:
        d = self.d
        while not self.empty[sid]:
            s = int(self.state_s[sid])
            c = self.rows(s, only=sid).cols
            moved = np.where(c[f"shift{kb}"] > 0, self.shift_of[int(d.w[s - 1])][col], col)
            total = np.minimum(c["cost"] + self.value[c["child_keep"], c["child"], moved]
                               + self.value[kb, c["cont"], col], _INF)
            total = np.where(self.zcol[col] > self.budget - c[f"local{kb}"], _INF, total)
            r = int(np.argmin(total))
            if total[r] >= _INF or int(total[r]) != int(self.value[kb, sid, col]):
                raise AssertionError(f"dp: cannot read back state {sid} (base {s}), kb={kb}, "
                                     f"z={self.zcol[col]}")
            out.extend(d.forward[s:int(c["sweep_to"][r])])
            if int(c["child"][r]) != self.zero:
                self._rebuild(int(c["child"][r]), int(c["child_keep"][r]), int(moved[r]), out)
            out.extend(d.tail[int(c["direct"][r]) + 1:int(c["direct_to"][r]) + 1])
            out.extend(d.tail[int(c["w_from"][r]) + 1:int(c["w_to"][r]) + 1])
            sid = int(c["cont"][r])


# ================================================================ releases
def _with_releases(graph: TrainingGraph, computations: list[str]) -> tuple[Compute | Release, ...]:
    """Node-level frees: each copy of an op's outputs goes right after its last reader (dp.md §2).

    Unread graph inputs go before the first computation; every other input right after
    its last reader.
    """
    persistent = {t.id for t in graph.tensors if t.persistent}
    outs = {op.id: tuple(t for t in dict.fromkeys(op.outputs) if t not in persistent) for op in graph.ops}
    ins = {op.id: tuple(t for t in dict.fromkeys(op.inputs) if t not in persistent) for op in graph.ops}
    producer = {t.id: t.producer for t in graph.tensors}
    after: list[list[str]] = [[] for _ in computations]
    before: list[str] = []
    current: dict[str, int] = {}  # op -> step of its current copy
    last_use: dict[tuple[str, str], int] = {}  # ("op", id) | ("input", id) -> last reader

    def close(node: str) -> None:
        step = last_use.pop(("op", node), current[node])
        after[step].extend(outs[node])

    for i, v in enumerate(computations):
        for t in ins[v]:
            made_by = producer[t]
            last_use[("op", made_by) if made_by else ("input", t)] = i
        if v in current:
            close(v)
        current[v] = i
    for v in current:
        close(v)
    for tensor in graph.tensors:
        if tensor.producer is None and tensor.id not in persistent:
            step = last_use.get(("input", tensor.id))
            if step is None:
                before.append(tensor.id)
            else:
                after[step].append(tensor.id)
    steps: list[Compute | Release] = [Release(t) for t in before]
    for i, v in enumerate(computations):
        steps.append(Compute(v))
        steps.extend(Release(t) for t in after[i])
    return tuple(steps)


# ================================================================ the backend
def solve_dp(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Any = None,
    **options: Any,
) -> BackendResult:
    """Least compute cost of a P1 instance on a training chain, over the DP's schedule class.

    Parameters
    ----------
    instance
        A P1 instance (one core, compute or latency objective) whose graph is a training
        chain (:func:`is_chain`).
    time_limit
        Seconds; past it the result is ``unknown``.
    workers, hint
        Ignored (the DP is single-threaded and needs no start).
    **options
        ``max_computes`` (the schedule is returned only if it computes no op more often;
        otherwise ``unknown``), ``fixed_order`` (``False`` makes the result only
        ``feasible``: the DP keeps the graph's order), ``max_table_bytes`` (default
        :data:`DEFAULT_MAX_TABLE_BYTES`).

    Returns
    -------
    BackendResult
        ``optimal`` with ``bound = objective`` (optimal over the DP's schedule class,
        dp.md §2: cpsat and milp may only do better), or ``infeasible`` with the least
        budget of the class in the message and ``stats["min_budget_bytes"]``.

    Raises
    ------
    MonetError
        The graph is not a training chain, the instance is not a one-core P1 instance,
        an option is unknown, or the table would exceed ``max_table_bytes``.
    """
    start = time.perf_counter()
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise MonetError(f"dp has no option {unknown[0]!r}", field=unknown[0],
                         fix=f"use one of: {', '.join(_OPTIONS)}")
    check_p1(instance, "dp")  # the rules of every P1 backend; the DP adds: a chain
    chain = chain_of(instance.graph)
    data = _ChainData(instance, chain)
    budget = instance.budget_bytes - persistent_bytes_held(instance)  # EV.E1.5: held all along
    deadline = None if time_limit is None else start + float(time_limit)
    max_table = int(options.get("max_table_bytes") or DEFAULT_MAX_TABLE_BYTES)
    dp = _ChainDP(data, budget, deadline, max_table)
    stats: dict[str, Any] = {
        "schedule_class": SCHEDULE_CLASS, "chain_length": data.L, "tail_ops": data.K,
        "workers_used": 1, "lower_bound_p1": int(data.fcum[-1] + data.ccum[-1] + data.trailing_cycles),
    }
    try:
        least = dp.least_peak() if budget < 0 or dp.root_local() > budget else None
        value = _INF if least is not None else dp.solve()
        if value >= _INF:
            least = dp.least_peak() if least is None else least
            stats.update(min_budget_bytes=least, states=int((~dp.empty).sum()),
                         wall_s=round(time.perf_counter() - start, 4))
            return BackendResult(
                Status.INFEASIBLE, message=(
                    f"no schedule of the dp's class fits in {instance.budget_bytes} bytes; it needs at "
                    f"least {least + instance.budget_bytes - budget} bytes (class: {SCHEDULE_CLASS})"),
                stats=stats)
        computations = dp.computations()
    except _Timeout:
        return BackendResult(Status.UNKNOWN, message=f"dp: time limit of {time_limit} s reached",
                             stats={**stats, "wall_s": round(time.perf_counter() - start, 4)})
    objective = int(value + data.ccum[data.K] - data.ccum[max(0, int(data.e[1]))] + data.trailing_cycles)
    counts: dict[str, int] = {}
    for v in computations:
        counts[v] = counts.get(v, 0) + 1
    steps = _with_releases(instance.graph, computations)
    stats.update(memory_levels=len(dp.z), states=int((~dp.empty).sum()),
                 recomputations=len(computations) - len(counts),
                 max_computes_used=max(counts.values()), wall_s=round(time.perf_counter() - start, 4))
    schedule = Sequence(steps, {"backend": "dp", "compute_cycles": objective,
                                "schedule_class": SCHEDULE_CLASS})
    cap = options.get("max_computes")
    if cap is not None and max(counts.values()) > int(cap):
        return BackendResult(Status.UNKNOWN, message=(
            f"the dp's optimum computes an op {max(counts.values())} times, over max_computes = {cap}; "
            "the dp cannot bound recomputations (use --backend cpsat or milp)"), stats=stats)
    if options.get("fixed_order", True) is False:
        return BackendResult(Status.FEASIBLE, schedule, objective, message=(
            "dp keeps the graph's order: optimal over its class with a fixed order only"), stats=stats)
    return BackendResult(Status.OPTIMAL, schedule, objective, bound=objective,
                         message=f"optimal over the dp's schedule class: {SCHEDULE_CLASS}",
                         stats=stats)
