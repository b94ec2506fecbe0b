"""The data of P1 that every backend reads: the entry rules, then ops, costs, sizes, reads, domains.

Place in the pipeline: an :class:`~monet_ilp.instance.Instance` of class P1
(``formulations/p1_problem.md``) passes :func:`check_p1`, then :func:`p1_data` turns
it into a :class:`P1Data`, the plain integer data both exact models are built from:
the CP-SAT model (``formulations/p1_cpsat.md``, "Data" and "Domains" P1C.D0-D3) and the
stage MILP (``formulations/p1_milp.md`` §1 and the domain of §4, P1M.D1-D4).  The chain
DP (``formulations/dp.md``) reads its own chain view of the graph, but passes the same
:func:`check_p1` and holds the same budget (:func:`persistent_bytes_held`).
Everything here is integer and solver-free, so the hint, rounding and extraction
code use it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind
from monet_ilp.instance import Instance, Problem
from monet_ilp.problems.registry import check_call, find

__all__ = ["P1Data", "check_max_computes", "check_p1", "p1_data", "persistent_bytes_held"]

_MAKE_P1 = "build the instance with p1_instance or make_instance(problem='P1')"


# ===================================================================== entry rules
def check_p1(instance: Instance, backend: str | None = None) -> None:
    """Refuse an instance no P1 model can take: the rules of every P1 backend, stated once.

    1. The instance is of class P1 (``p1_problem.md``).
    2. With ``backend`` (its name in :mod:`monet_ilp.problems.registry`): the
       objective is one that backend minimises, refused in the registry's words
       (:func:`monet_ilp.solve` checks this first; this is the check of a direct call).
    3. One core, whose memory holds the graph inputs (so every op is costed on it: an
       instance gives each op a cost on some core).

    The budget is no entry rule: the values get the capacity less the persistent bytes
    the core memory holds (:func:`persistent_bytes_held`, EV.E1.5); when that is
    negative the instance is infeasible, which each backend reports as a result.

    Raises
    ------
    MonetError
        With ``field`` ``problem``, ``objective`` or ``cores``.
    """
    if instance.problem is not Problem.P1:
        who = f"backend {backend!r}" if backend else "the P1 models"
        raise MonetError(f"{who} solves P1, but instance {instance.name!r} is {instance.problem}",
                         field="problem", fix=_MAKE_P1)
    if backend is not None:
        check_call(find(backend, Problem.P1), instance.objective, {})
    if len(instance.cores) != 1 or instance.cores[0].memory != instance.input_home:
        raise MonetError(
            f"P1 runs on one core whose memory holds the graph inputs; instance {instance.name!r} "
            f"has {len(instance.cores)} core(s) and its inputs in {instance.input_home!r}",
            field="cores", fix=_MAKE_P1)


def persistent_bytes_held(instance: Instance) -> int:
    """The persistent bytes the P1 core's memory holds all along (EV.E1.5): 0 unless modelled there."""
    if instance.persistent_home != instance.cores[0].memory:
        return 0
    return sum(t.bytes for t in instance.graph.tensors if t.persistent)


def check_max_computes(max_computes: int | None) -> None:
    """``max_computes`` is ``None`` (no limit) or a positive integer (1 forbids recomputation)."""
    if max_computes is not None and (isinstance(max_computes, bool) or not isinstance(max_computes, int)
                                     or max_computes < 1):
        raise MonetError(f"max_computes must be a positive integer, got {max_computes!r}",
                         field="max_computes",
                         fix="pass an integer >= 1 (1 forbids recomputation), or None for no limit")


# ========================================================================== the data
@dataclass(frozen=True)
class P1Data:
    """The data of one P1 model: ``p1_cpsat.md`` "Data", ``p1_milp.md`` §1.

    Nodes are numbered ``0 .. n-1`` in the order of the model: the graph's op order
    with ``fixed_order`` (the MILP's ``v_0 .. v_{n-1}``), otherwise the
    non-optimizer ops in graph order followed by the optimizer ops.  Stage ``t``
    (``0 .. n-1``) ends with the first computation of one node (of node ``t`` with
    ``fixed_order``); in the CP-SAT model it sweeps its nodes ``passes`` times in node
    order (its *slots*, :attr:`stage_slots`).  Graph inputs that some op reads are the
    *inputs* ``0 .. q-1``, numbered in the order ops first read them; unread inputs
    are released before the first computation and play no part.

    The MILP indexes *values* (:attr:`n_values`): value ``i < n`` is the set of
    non-persistent outputs of node ``i`` (kept and freed together), value ``n + g``
    is input ``g``; :attr:`value_bytes`, :attr:`tensors`, :attr:`reads`,
    :attr:`users` and :attr:`horizon` are that view.

    Attributes
    ----------
    name, core
        The instance's name and its one core.
    ops
        Op id of each node.
    cost
        ``c_i``: compute cycles of each node (may be 0).
    size_bytes, size
        ``m_i``: bytes of the node's non-persistent outputs, and the same divided by
        ``scale``, which is what the CP-SAT model uses.
    scale
        The gcd of all sizes, nodes and inputs (``s`` of ``p1_cpsat.md``, ``g`` of
        ``p1_milp.md``): memory counts in this unit, so every figure is an exact integer.
    outputs
        The ids of each node's non-persistent output tensors.
    preds
        Nodes whose non-persistent outputs node ``i`` reads (all ``< i``).
    consumers
        The inverse of ``preds``, increasing.
    after
        Nodes that produce a persistent tensor node ``i`` reads (a weight gradient
        read by an optimizer op): they must be first computed before ``i``.
    input_ids, input_size_bytes, input_size, input_readers, node_inputs
        The read graph inputs, their sizes (bytes and scaled), the nodes reading each
        (increasing), and the inputs each node reads.
    unread_inputs
        Graph inputs no op reads: released before the first computation.
    first
        ``[ef_i, lf_i]``: the stages in which node ``i`` may be computed for the
        first time (a single stage with ``fixed_order``; ``p1_cpsat.md`` P1C.D0).
    compute_stages
        ``[lo, hi]``: the stages in which node ``i`` may be computed at all
        (``p1_cpsat.md`` P1C.D1).
    retain_stages
        ``[lo, hi]``: the stages at whose start node ``i`` may be resident
        (``p1_cpsat.md`` P1C.D2); empty when ``lo > hi``.
    input_retain_last
        The last stage at whose start input ``g`` may still be resident
        (``p1_cpsat.md`` P1C.D3).
    first_update
        The node of the first optimizer op, ``n`` when there is none (``t_u`` of
        ``p1_milp.md``, P1M.D2): P1's update-hazard rule allows no recomputation after it.
    capacity_bytes, persistent_bytes
        The core memory's capacity, and the persistent bytes it holds (EV.E1.5).
    budget_bytes
        ``B'``: what the values may hold, the capacity less the persistent bytes (a
        smaller figure when the LP rounding asks for slack); :attr:`budget` is
        ``floor(B' / scale)``.
    passes
        Sweeps per stage of the CP-SAT model (``p1_cpsat.md``, "What the model searches").
    max_computes
        ``C``: computations allowed per op in the MILP (``p1_milp.md`` P1M.D3, P1M.C8); ``n``
        (no limit) by default.  The CP-SAT model takes its limit (P1C.C6) when built.
    """

    name: str
    core: str
    fixed_order: bool
    ops: tuple[str, ...]
    cost: tuple[int, ...]
    size_bytes: tuple[int, ...]
    size: tuple[int, ...]
    scale: int
    outputs: tuple[tuple[str, ...], ...]
    preds: tuple[tuple[int, ...], ...]
    consumers: tuple[tuple[int, ...], ...]
    after: tuple[tuple[int, ...], ...]
    input_ids: tuple[str, ...]
    input_size_bytes: tuple[int, ...]
    input_size: tuple[int, ...]
    input_readers: tuple[tuple[int, ...], ...]
    node_inputs: tuple[tuple[int, ...], ...]
    unread_inputs: tuple[str, ...]
    first: tuple[tuple[int, int], ...]
    compute_stages: tuple[tuple[int, int], ...]
    retain_stages: tuple[tuple[int, int], ...]
    input_retain_last: tuple[int, ...]
    first_update: int
    capacity_bytes: int
    persistent_bytes: int
    budget_bytes: int
    passes: int
    max_computes: int

    @property
    def n(self) -> int:
        return len(self.ops)

    @property
    def budget(self) -> int:
        return self.budget_bytes // self.scale

    @property
    def recompute_last(self) -> int:
        """``h`` of ``p1_cpsat.md``: the last stage in which a recomputation may happen."""
        return min(self.first_update, self.n - 1)

    # ------------------------------------------------------- the CP-SAT grid
    def can_compute(self, t: int, i: int) -> bool:
        lo, hi = self.compute_stages[i]
        return lo <= t <= hi

    def can_retain(self, t: int, i: int) -> bool:
        lo, hi = self.retain_stages[i]
        return lo <= t <= hi

    def can_retain_input(self, t: int, g: int) -> bool:
        return t <= self.input_retain_last[g]

    def is_first_fixed(self, t: int, i: int) -> bool:
        """Whether cell (t, i) is the first computation of ``i`` for certain."""
        return self.first[i] == (t, t)

    @cached_property
    def stage_nodes(self) -> tuple[tuple[int, ...], ...]:
        """``A_t``: the nodes that may be computed in stage ``t``, in node order."""
        cells: list[list[int]] = [[] for _ in range(self.n)]
        for i, (lo, hi) in enumerate(self.compute_stages):
            for t in range(lo, hi + 1):
                cells[t].append(i)
        return tuple(tuple(c) for c in cells)

    @cached_property
    def stage_slots(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """The slots ``(r, k)`` of each stage in execution order: pass ``r``, then node ``k``.

        Each pass visits ``A_t`` in node order; with ``fixed_order`` node ``t`` has one
        slot, the last one (its first computation ends the stage).
        """
        slots = []
        for t, nodes in enumerate(self.stage_nodes):
            stage = []
            for r in range(self.passes):
                for k in nodes:
                    if self.fixed_order and k == t and r < self.passes - 1:
                        continue
                    stage.append((r, k))
            slots.append(tuple(stage))
        return tuple(slots)

    @cached_property
    def slot_rank(self) -> tuple[dict[tuple[int, int], int], ...]:
        """Position of each slot within its stage."""
        return tuple({slot: q for q, slot in enumerate(stage)} for stage in self.stage_slots)

    @cached_property
    def peak_lower_bound(self) -> int:
        """A bound no schedule's peak can beat (scaled units), see ``p1_cpsat.md`` (LB).

        While node ``k`` is first computed, its output, its predecessors' outputs and
        the inputs it reads are resident; with ``fixed_order`` so is every input that a
        later first computation reads (inputs are never recomputed).  In any order, the
        first computation holds every read input.
        """
        n = self.n
        best = 0
        for k in range(n):
            held = self.size[k] + sum(self.size[p] for p in self.preds[k])
            if self.fixed_order:
                held += sum(
                    s for s, readers in zip(self.input_size, self.input_readers, strict=True) if max(readers) >= k
                )
            else:
                held += sum(self.input_size[g] for g in self.node_inputs[k])
            best = max(best, held)
        if not self.fixed_order and self.input_size:
            starters = [k for k in range(n) if self.first[k][0] == 0]
            best = max(best, sum(self.input_size) + min(self.size[k] for k in starters))
        return best

    # ------------------------------------------------------- the MILP's values
    @property
    def n_values(self) -> int:
        return self.n + len(self.input_ids)

    def is_input(self, e: int) -> bool:
        return e >= self.n

    def label(self, e: int) -> str:
        """A short column-name label of value ``e``: the node, or ``x<g>`` for input ``g``."""
        return str(e) if e < self.n else f"x{e - self.n}"

    @cached_property
    def value_bytes(self) -> tuple[int, ...]:
        """``m_e`` of every value (nodes, then inputs), bytes."""
        return self.size_bytes + self.input_size_bytes

    @cached_property
    def tensors(self) -> tuple[tuple[str, ...], ...]:
        """The tensor ids of every value (what a ``Release`` names)."""
        return self.outputs + tuple((t,) for t in self.input_ids)

    @cached_property
    def reads(self) -> tuple[tuple[int, ...], ...]:
        """``reads(j)``: the values node ``j`` reads (nodes and inputs), increasing."""
        n = self.n
        return tuple(tuple(sorted(p + tuple(n + g for g in gs)))
                     for p, gs in zip(self.preds, self.node_inputs, strict=True))

    @cached_property
    def users(self) -> tuple[tuple[int, ...], ...]:
        """``users(e)``: the nodes that read value ``e``, increasing."""
        return self.consumers + self.input_readers

    @cached_property
    def horizon(self) -> tuple[int, ...]:
        """``h(e)`` (``p1_milp.md`` P1M.D1): the largest node reading ``e`` directly or through a
        chain of nodes (``i`` itself for a node nobody reads)."""
        n = self.n
        horizon = [0] * self.n_values
        for i in range(n - 1, -1, -1):
            horizon[i] = max([i] + [horizon[j] for j in self.consumers[i]])
        for g, readers in enumerate(self.input_readers):
            horizon[n + g] = max(horizon[j] for j in readers)
        return tuple(horizon)

    def recompute(self, t: int, i: int) -> int | None:
        """The MILP's ``R[t,i]`` (``p1_milp.md`` §4): ``None`` for a decision variable, else its
        constant value."""
        if i == t:
            return 1  # p1_milp.md P1M.C1: v_t is computed for the first time in stage t
        if i > t:
            return 0  # p1_milp.md P1M.C1: lower triangular
        if self.max_computes <= 1 or t > self.first_update or t > self.horizon[i]:
            return 0  # p1_milp.md P1M.D3, P1M.D2, P1M.D1
        return None

    def retain(self, t: int, e: int) -> int | None:
        """The MILP's ``S[t,e]`` (``e`` resident when stage ``t`` starts): ``None`` or a constant."""
        if t >= self.n or t > self.horizon[e]:
            return 0  # nothing follows the last stage; p1_milp.md P1M.D1
        users = self.users[e]
        if e < self.n:
            if t <= e:
                return 0  # p1_milp.md P1M.C1: not computed yet
        elif t <= users[0]:
            return 1  # p1_milp.md P1M.D4: an input stays until its first reader has run
        if t > self.first_update:
            return int(t <= users[-1])  # p1_milp.md P1M.D2: no recomputation any more
        return None


def p1_data(
    instance: Instance,
    *,
    fixed_order: bool = True,
    passes: int = 1,
    max_computes: int | None = None,
    budget_bytes: int | None = None,
) -> P1Data:
    """The :class:`P1Data` of a P1 instance (``p1_cpsat.md`` "Data", ``p1_milp.md`` §1).

    Parameters
    ----------
    instance
        A P1 instance (:func:`check_p1`; the objective is not looked at).
    fixed_order
        Whether first computations follow the graph's op order (the MILP's P1M.C1).
    passes
        How many times a CP-SAT stage may sweep its nodes in order (``p1_cpsat.md``,
        "Passes"); 1 is Checkmate's stage model.
    max_computes
        The MILP's ``C`` (``None``: no limit, stored as ``n``).
    budget_bytes
        What the values may hold; default the capacity less the persistent bytes.

    Raises
    ------
    MonetError
        The instance breaks :func:`check_p1`, ``passes`` or ``max_computes`` is not a
        positive integer, or (free order) an op reads from an optimizer op.
    """
    check_p1(instance)
    check_max_computes(max_computes)
    if not isinstance(passes, int) or passes < 1:
        raise MonetError(f"passes must be a positive integer, got {passes!r}", field="passes",
                         fix="pass 1 (Checkmate's stages) or more")
    graph = instance.graph
    core = instance.cores[0]
    ops = list(graph.ops)
    if not fixed_order:
        ops = [op for op in ops if op.kind is not OpKind.OPTIMIZER] + [
            op for op in ops if op.kind is OpKind.OPTIMIZER
        ]
    index = {op.id: i for i, op in enumerate(ops)}
    n = len(ops)
    cost = tuple(instance.cost(op.id, core.id).cycles for op in ops)
    outputs = tuple(tuple(t for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent)
                    for op in ops)
    size_bytes = tuple(sum(graph.tensor(t).bytes for t in outs) for outs in outputs)
    preds: list[list[int]] = [[] for _ in range(n)]
    after: list[list[int]] = [[] for _ in range(n)]
    input_index: dict[str, int] = {}
    node_inputs: list[list[int]] = [[] for _ in range(n)]
    for j, op in enumerate(ops):
        for t in dict.fromkeys(op.inputs):
            tensor = graph.tensor(t)
            if tensor.producer is None:
                if not tensor.persistent:
                    g = input_index.setdefault(t, len(input_index))
                    node_inputs[j].append(g)
                continue
            i = index[tensor.producer]
            if i >= j:
                raise MonetError(
                    f"op {op.id!r} reads {t!r} from {tensor.producer!r}, which comes later in the "
                    "order of first computations",
                    field=f"ops.{op.id}",
                    fix="list ops in a topological order with optimizer ops last",
                )
            target = after if tensor.persistent else preds
            if i not in target[j]:
                target[j].append(i)
    consumers: list[list[int]] = [[] for _ in range(n)]
    for j in range(n):
        for i in preds[j]:
            consumers[i].append(j)
    input_ids = tuple(input_index)
    input_readers: list[list[int]] = [[] for _ in input_ids]
    for j in range(n):
        for g in node_inputs[j]:
            input_readers[g].append(j)
    input_size_bytes = tuple(graph.tensor(t).bytes for t in input_ids)

    sizes = [s for s in size_bytes + input_size_bytes if s > 0]
    scale = math.gcd(*sizes) if sizes else 1

    optimizer = [i for i, op in enumerate(ops) if op.kind is OpKind.OPTIMIZER]
    first_update = optimizer[0] if optimizer else n
    first = _first_stages(n, preds, after, fixed_order, optimizer)
    compute_stages, retain_stages = _domains(n, consumers, first, min(first_update, n - 1))
    input_retain_last = tuple(max(compute_stages[j][1] for j in readers) for readers in input_readers)
    capacity = instance.memory(core.memory).capacity_bytes
    persistent = persistent_bytes_held(instance)
    return P1Data(
        name=instance.name,
        core=core.id,
        fixed_order=fixed_order,
        ops=tuple(op.id for op in ops),
        cost=cost,
        size_bytes=size_bytes,
        size=tuple(s // scale for s in size_bytes),
        scale=scale,
        outputs=outputs,
        preds=tuple(tuple(sorted(p)) for p in preds),
        consumers=tuple(tuple(c) for c in consumers),
        after=tuple(tuple(sorted(a)) for a in after),
        input_ids=input_ids,
        input_size_bytes=input_size_bytes,
        input_size=tuple(s // scale for s in input_size_bytes),
        input_readers=tuple(tuple(r) for r in input_readers),
        node_inputs=tuple(tuple(g) for g in node_inputs),
        unread_inputs=tuple(t.id for t in graph.tensors
                            if t.producer is None and not t.persistent and t.id not in input_index),
        first=first,
        compute_stages=compute_stages,
        retain_stages=retain_stages,
        input_retain_last=input_retain_last,
        first_update=first_update,
        capacity_bytes=capacity,
        persistent_bytes=persistent,
        budget_bytes=capacity - persistent if budget_bytes is None else int(budget_bytes),
        passes=passes,
        max_computes=n if max_computes is None else max_computes,
    )


def _first_stages(n: int, preds: list[list[int]], after: list[list[int]], fixed_order: bool,
                  optimizer: list[int]) -> tuple[tuple[int, int], ...]:
    """``p1_cpsat.md`` P1C.D0: ``[ef_i, lf_i]`` from ancestor and descendant counts among the free nodes."""
    if fixed_order:
        return tuple((i, i) for i in range(n))
    free = n - len(optimizer)
    ancestors: list[set[int]] = [set() for _ in range(n)]
    for j in range(free):
        for i in list(preds[j]) + list(after[j]):
            ancestors[j] |= ancestors[i] | {i}
    descendants = [0] * free
    for j in range(free):
        for i in ancestors[j]:
            descendants[i] += 1
    stages = [(len(ancestors[i]), free - 1 - descendants[i]) for i in range(free)]
    stages += [(i, i) for i in range(free, n)]
    return tuple(stages)


def _domains(n: int, consumers: list[list[int]], first: tuple[tuple[int, int], ...],
             recompute_last: int) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """``p1_cpsat.md`` P1C.D1, P1C.D2: the stages where a node may usefully be computed, and be
    resident at the start.

    A computation of ``i`` in stage ``t`` is useful only if a consumer may be
    computed in stage ``t`` or later, so ``i`` is computed at most until
    ``last_use(i) = max over consumers j of last_compute(j)``, and recomputed
    only up to the update-hazard stage; it is held at the start of stage ``t``
    only for ``ef_i < t <= last_use(i)``.
    """
    last_compute = [0] * n
    last_use = [-1] * n
    compute: list[tuple[int, int]] = [(0, 0)] * n
    retain: list[tuple[int, int]] = [(1, 0)] * n
    for i in reversed(range(n)):
        ef, lf = first[i]
        last_use[i] = max((last_compute[j] for j in consumers[i]), default=-1)
        hi = max(lf, min(last_use[i], recompute_last))
        compute[i] = (ef, hi)
        last_compute[i] = hi
        retain[i] = (ef + 1, last_use[i])
    return tuple(compute), tuple(retain)
