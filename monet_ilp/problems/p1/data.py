"""The stage grid of P1: nodes, sizes, costs and the (stage, node) cells a schedule may use.

First step of the CP-SAT backend: an :class:`~monet_ilp.instance.Instance` becomes a
:class:`Grid`, the plain data both encodings are built from (``formulations/p1_cpsat.md``,
"Data" and "Domains").  Everything here is integer and solver-free, so the hint and
extraction code can use it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind
from monet_ilp.instance import Instance, Problem


@dataclass(frozen=True)
class Grid:
    """The data of one P1 model (see ``formulations/p1_cpsat.md``, "Data").

    Nodes are numbered ``0 .. n-1`` in the order of the model: the graph's op order
    with ``fixed_order``, otherwise the non-optimizer ops in graph order followed by
    the optimizer ops.  Stage ``t`` (``0 .. n-1``) ends with the first computation of
    one node (of node ``t`` with ``fixed_order``) and sweeps its nodes ``passes``
    times in node order (its *slots*, :attr:`stage_slots`).  Graph inputs that some
    op reads are the *inputs* ``0 .. q-1``; unread inputs are released before the
    first computation and play no part.

    Attributes
    ----------
    ops
        Op id of each node.
    cost
        ``c_i``: compute cycles of each node (may be 0).
    size_bytes, size
        ``m_i``: bytes of the node's non-persistent outputs, and the same divided by
        ``scale`` (the gcd of all sizes), which is what the model uses.
    preds
        Nodes whose non-persistent outputs node ``i`` reads (all ``< i``).
    consumers
        The inverse of ``preds``.
    after
        Nodes that produce a persistent tensor node ``i`` reads (a weight gradient
        read by an optimizer op): they must be first computed before ``i``.
    input_ids, input_size_bytes, input_size, input_readers, node_inputs
        The read graph inputs, their sizes, the nodes reading each, and the inputs
        each node reads.
    first
        ``[ef_i, lf_i]``: the stages in which node ``i`` may be computed for the
        first time (a single stage with ``fixed_order``).
    compute_stages
        ``[lo, hi]``: the stages in which node ``i`` may be computed at all (D1).
    retain_stages
        ``[lo, hi]``: the stages at whose start node ``i`` may be resident (D2);
        empty when ``lo > hi``.
    input_retain_last
        The last stage at whose start input ``g`` may still be resident (D3).
    recompute_last
        The last stage in which a recomputation may happen (the stage of the first
        optimizer op: P1's update-hazard rule), ``n - 1`` when there is none.
    budget_bytes
        ``B``; the model uses :attr:`budget` ``= floor(B / scale)``.
    passes
        Sweeps per stage (``p1_cpsat.md``, "What the model searches").
    """

    name: str
    fixed_order: bool
    ops: tuple[str, ...]
    cost: tuple[int, ...]
    size_bytes: tuple[int, ...]
    size: tuple[int, ...]
    scale: int
    preds: tuple[tuple[int, ...], ...]
    consumers: tuple[tuple[int, ...], ...]
    after: tuple[tuple[int, ...], ...]
    input_ids: tuple[str, ...]
    input_size_bytes: tuple[int, ...]
    input_size: tuple[int, ...]
    input_readers: tuple[tuple[int, ...], ...]
    node_inputs: tuple[tuple[int, ...], ...]
    first: tuple[tuple[int, int], ...]
    compute_stages: tuple[tuple[int, int], ...]
    retain_stages: tuple[tuple[int, int], ...]
    input_retain_last: tuple[int, ...]
    recompute_last: int
    budget_bytes: int
    passes: int = 1

    @property
    def n(self) -> int:
        return len(self.ops)

    @property
    def budget(self) -> int:
        return self.budget_bytes // self.scale

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
                    s for s, readers in zip(self.input_size, self.input_readers) if max(readers) >= k
                )
            else:
                held += sum(self.input_size[g] for g in self.node_inputs[k])
            best = max(best, held)
        if not self.fixed_order and self.input_size:
            starters = [k for k in range(n) if self.first[k][0] == 0]
            best = max(best, sum(self.input_size) + min(self.size[k] for k in starters))
        return best


def build_grid(
    instance: Instance, *, fixed_order: bool = True, passes: int = 1, budget_bytes: int | None = None
) -> Grid:
    """The :class:`Grid` of a P1 instance (``formulations/p1_cpsat.md``).

    Parameters
    ----------
    instance
        A P1 instance in sequence form (one core whose memory holds the inputs).
    fixed_order
        Whether first computations follow the graph's op order.
    passes
        How many times a stage may sweep its nodes in order (``p1_cpsat.md``,
        "Passes"); 1 is Checkmate's stage model.
    budget_bytes
        The budget; default ``instance.budget_bytes``.

    Raises
    ------
    MonetError
        The instance is not a one-core P1 instance.
    """
    if instance.problem is not Problem.P1 or len(instance.cores) != 1 \
            or instance.cores[0].memory != instance.input_home:
        raise MonetError(
            f"the cpsat P1 backend needs a one-core P1 instance; {instance.name!r} is "
            f"{instance.problem} with {len(instance.cores)} core(s)",
            field="problem",
            fix="build the instance with p1_instance or make_instance(problem='P1')",
        )
    graph = instance.graph
    core = instance.cores[0].id
    ops = [op for op in graph.ops]
    if not fixed_order:
        ops = [op for op in ops if op.kind is not OpKind.OPTIMIZER] + [
            op for op in ops if op.kind is OpKind.OPTIMIZER
        ]
    index = {op.id: i for i, op in enumerate(ops)}
    n = len(ops)
    cost = tuple(instance.cost(op.id, core).cycles for op in ops)
    size_bytes = tuple(
        sum(graph.tensor(t).bytes for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent)
        for op in ops
    )
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
    recompute_last = optimizer[0] if optimizer else n - 1
    first = _first_stages(n, preds, after, fixed_order, optimizer)
    compute_stages, retain_stages = _domains(n, consumers, first, recompute_last)
    input_retain_last = tuple(max(compute_stages[j][1] for j in readers) for readers in input_readers)
    budget = instance.budget_bytes if budget_bytes is None else int(budget_bytes)
    if not isinstance(passes, int) or passes < 1:
        raise MonetError(f"passes must be a positive integer, got {passes!r}", field="passes",
                         fix="pass 1 (Checkmate's stages) or more")
    return Grid(
        name=instance.name,
        fixed_order=fixed_order,
        ops=tuple(op.id for op in ops),
        cost=cost,
        size_bytes=size_bytes,
        size=tuple(s // scale for s in size_bytes),
        scale=scale,
        preds=tuple(tuple(sorted(p)) for p in preds),
        consumers=tuple(tuple(c) for c in consumers),
        after=tuple(tuple(sorted(a)) for a in after),
        input_ids=input_ids,
        input_size_bytes=input_size_bytes,
        input_size=tuple(s // scale for s in input_size_bytes),
        input_readers=tuple(tuple(r) for r in input_readers),
        node_inputs=tuple(tuple(g) for g in node_inputs),
        first=first,
        compute_stages=compute_stages,
        retain_stages=retain_stages,
        input_retain_last=input_retain_last,
        recompute_last=recompute_last,
        budget_bytes=budget,
        passes=passes,
    )


def _first_stages(n, preds, after, fixed_order, optimizer) -> tuple[tuple[int, int], ...]:
    """D0: ``[ef_i, lf_i]`` from ancestor and descendant counts among the free nodes."""
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


def _domains(n, consumers, first, recompute_last):
    """D1, D2: the stages where a node may usefully be computed, and be resident at the start.

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
