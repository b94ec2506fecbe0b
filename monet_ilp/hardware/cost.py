"""The analytical cost model: (op, core, hardware) -> integer cycles and picojoules.

Third step of the pipeline's hardware side: the instance builder calls :func:`op_cost`
for every (op, core) pair that :func:`can_run` allows.  Every number follows a
formula of ``formulations/cost_model.md``; the comments cite its labels (CM.C1, CM.C2, ...).
The model is a roofline per op: the MAC array with its spatial (ceil) losses plus the
vector unit, against the op's compulsory SRAM and DRAM traffic.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import Op, OpKind, TrainingGraph
from monet_ilp.hardware.model import Core, Hardware, Link, OpCost

__all__ = [
    "CostBreakdown",
    "CostModelError",
    "anchor_type",
    "can_run",
    "cost_breakdown",
    "dram_bandwidth_of",
    "op_cost",
]


class CostModelError(MonetError):
    """An op the cost model cannot cost on a core (node-link ops, excluded op types)."""


#: Op kinds judged by their op type *or* their kind name in ``Core.op_types`` (CM.C1).
_KIND_NAMED = (OpKind.LOSS, OpKind.OPTIMIZER)


def anchor_type(op: Op) -> str:
    """The type an op is judged by: the first member of a fused type (``Conv+Relu`` -> ``Conv``)."""
    return op.op_type.split("+", 1)[0]


def can_run(op: Op, core: Core) -> bool:
    """Whether ``core`` may run ``op`` (CM.C1).

    A core with no ``op_types`` runs everything.  Otherwise it runs an op whose
    anchor type (first member of a fused type) it lists; loss and optimizer ops also
    run when it lists their kind (``loss``, ``optimizer``), so a non-empty
    ``op_types`` that names neither excludes them.
    """
    if not core.op_types:
        return True
    if op.kind in _KIND_NAMED and core.runs(str(op.kind)):
        return True
    return core.runs(anchor_type(op))


@dataclass(frozen=True)
class CostBreakdown:
    """Every intermediate quantity of :func:`op_cost`, for explanations and tests.

    ``mapping`` is ``conv``, ``gemm``, ``generic`` (MACs without usable dims) or
    ``none`` (no MACs).  ``parallel`` (P) is the extent unrolled over the U SIMD units,
    ``reduction`` (R) the extent over the L lanes, ``steps`` (T) the temporal steps
    of one tile.  Cycles named ``*_core_cycles`` are in the core's clock; ``cycles``
    and ``dram_cycles`` are in the hardware's reference clock.
    """

    op: str
    core: str
    mapping: str
    macs: int
    macs_per_cycle: int
    parallel: int
    reduction: int
    tiles: int
    steps: int
    mac_scale: Fraction
    spatial_utilisation: Fraction
    utilisation_factor: Fraction
    mac_core_cycles: int
    vector_flops: int
    vector_core_cycles: int
    compute_core_cycles: int
    sram_read_bytes: int
    sram_write_bytes: int
    sram_core_cycles: int
    dram_read_bytes: int
    dram_write_bytes: int
    dram_bandwidth_bytes_per_cycle: Fraction
    dram_cycles: int
    compute_cycles: int
    sram_cycles: int
    cycles: int
    bound: str
    compute_pj: int
    sram_pj: int
    dram_pj: int

    @property
    def utilisation(self) -> Fraction:
        """Achieved MAC-array utilisation ``macs / (mac cycles * U * L)`` (CM.C5); 0 without MACs."""
        if not self.macs or not self.mac_core_cycles:
            return Fraction(0)
        return Fraction(self.macs, self.mac_core_cycles * self.macs_per_cycle)

    def to_cost(self) -> OpCost:
        return OpCost(cycles=self.cycles, compute_pj=self.compute_pj, sram_pj=self.sram_pj, dram_pj=self.dram_pj)


def op_cost(op: Op, graph: TrainingGraph, core: Core, hw: Hardware, *, pinned: bool = False) -> OpCost:
    """Integer cost of ``op`` on ``core``: cycles of ``hw``'s reference clock, and pJ.

    ``pinned=True`` costs the op with its persistent tensors (weights, weight
    gradients, optimizer states) held in the core's SRAM instead of streamed from
    and to DRAM (CM.C7).  Raises :class:`CostModelError` for node-link ops (their costs
    come with the graph) and for ops the core cannot run (:func:`can_run`).
    """
    return cost_breakdown(op, graph, core, hw, pinned=pinned).to_cost()


def cost_breakdown(op: Op, graph: TrainingGraph, core: Core, hw: Hardware, *, pinned: bool = False) -> CostBreakdown:
    """:func:`op_cost` with every intermediate quantity (see :class:`CostBreakdown`)."""
    if op.cost is not None or op.op_type == "node":
        raise CostModelError(
            f"op {op.id!r} comes from a node-link graph (op type {op.op_type!r}, a supplied cost): "
            "it has no shapes or hardware meaning",
            field=f"ops.{op.id}",
            fix="build such instances from the graph's own costs (P1 without --hw)",
        )
    if not can_run(op, core):
        raise CostModelError(
            f"core {core.id!r} does not run {anchor_type(op)!r} ops (op {op.id!r})",
            field=f"cores.{core.id}.op_types",
            fix="cost only pairs that can_run() allows, or add the type to the core's op_types",
        )
    u_l = core.macs_per_cycle
    # CM.C3: what the U units, the L lanes and time iterate over.
    mapping, parallel, reduction, steps = _unrolling(op)
    factor = _exact(core.utilisation_of(anchor_type(op)))
    if mapping in ("conv", "gemm"):
        tiles = -(-parallel // core.simd_units) * -(-reduction // core.lanes)  # CM.C2
        spatial = Fraction(parallel * reduction, tiles * u_l)  # CM.C5: spatial utilisation
        scale = Fraction(op.macs, parallel * reduction * steps)  # CM.C4
        if mapping == "gemm" and op.kind is OpKind.BACKWARD_DATA and scale > 1:
            # CM.C5b: a product of two activations: dA (CM.C3d) on its tiles, the rest of
            # its MACs (dB = A^T . dY) on the forward's (CM.C3c)
            other = -(-reduction // core.simd_units) * -(-parallel // core.lanes)
            work = steps * (tiles + (scale - 1) * other)
            spatial = Fraction(op.macs, work * u_l)
            mac_cycles = _ceil(work / factor)
        else:
            mac_cycles = _ceil(tiles * steps * scale / factor)  # CM.C5
    elif mapping == "generic":
        tiles, steps, spatial, scale = -(-op.macs // u_l), 1, Fraction(1), Fraction(1)
        mac_cycles = _ceil(Fraction(op.macs, u_l) / factor)  # CM.C5'
    else:
        tiles, steps, spatial, scale, mac_cycles = 0, 0, Fraction(0), Fraction(0), 0
    # CM.C6: non-MAC FLOPs on the vector unit, after the MAC work (no overlap).
    vector_flops = max(0, op.flops - 2 * op.macs)
    vector_cycles = -(-vector_flops // core.vector_ops_per_cycle)
    compute_core = mac_cycles + vector_cycles
    # CM.C7: compulsory traffic; persistent tensors go to DRAM unless pinned.
    sram_r, sram_w, dram_r, dram_w = _traffic(op, graph, pinned)
    sram_core = _ceil(Fraction(sram_r + sram_w) / _exact(core.sram_bandwidth_bytes_per_cycle))  # CM.C8
    if dram_r + dram_w:
        dram_bw = dram_bandwidth_of(hw, core)  # CM.C9
        dram_cycles = _ceil(Fraction(dram_r + dram_w) / dram_bw)
    else:
        dram_bw, dram_cycles = Fraction(0), 0
    # CM.C10: core clock -> reference clock, then the roofline.
    compute = _to_reference(compute_core, core.clock_hz, hw.clock_hz)
    sram = _to_reference(sram_core, core.clock_hz, hw.clock_hz)
    cycles = max(compute, sram, dram_cycles, 1)
    bound = next((name for name, c in (("compute", compute), ("sram", sram), ("dram", dram_cycles)) if c == cycles),
                 "compute")  # all zero: the one-cycle floor
    # CM.C11: energy, each part rounded half up once.
    compute_pj = _round(op.macs * _exact(core.mac_pj) + vector_flops * _exact(core.vector_op_pj))
    sram_pj = _round(sram_r * _exact(core.sram_read_pj_per_byte) + sram_w * _exact(core.sram_write_pj_per_byte))
    if dram_r + dram_w:
        dram = hw.dram
        assert dram is not None  # dram_bandwidth_of (CM.C9) refused hardware without one
        dram_pj = _round(dram_r * _exact(dram.read_pj_per_byte) + dram_w * _exact(dram.write_pj_per_byte))
    else:
        dram_pj = 0
    return CostBreakdown(
        op=op.id,
        core=core.id,
        mapping=mapping,
        macs=op.macs,
        macs_per_cycle=u_l,
        parallel=parallel,
        reduction=reduction,
        tiles=tiles,
        steps=steps,
        mac_scale=scale,
        spatial_utilisation=spatial,
        utilisation_factor=factor,
        mac_core_cycles=mac_cycles,
        vector_flops=vector_flops,
        vector_core_cycles=vector_cycles,
        compute_core_cycles=compute_core,
        sram_read_bytes=sram_r,
        sram_write_bytes=sram_w,
        sram_core_cycles=sram_core,
        dram_read_bytes=dram_r,
        dram_write_bytes=dram_w,
        dram_bandwidth_bytes_per_cycle=dram_bw,
        dram_cycles=dram_cycles,
        compute_cycles=compute,
        sram_cycles=sram,
        cycles=cycles,
        bound=bound,
        compute_pj=compute_pj,
        sram_pj=sram_pj,
        dram_pj=dram_pj,
    )


def _unrolling(op: Op) -> tuple[str, int, int, int]:
    """(mapping, P, R, T) of CM.C3: what the U units, the L lanes and time iterate over."""
    if op.macs == 0:
        return "none", 0, 0, 0
    d = op.dims
    anchor = anchor_type(op)
    data_grad = op.kind is OpKind.BACKWARD_DATA
    if anchor == "Conv" and all(d.get(k, 0) > 0 for k in ("B", "K", "C")):
        k, c, g = d["K"], d["C"], max(1, d.get("G", 1))
        # Output pixels and kernel taps (OY, OX, FY, FX, or O0.., F0.. beyond 2-D).
        steps = d["B"] * math.prod(v for key, v in d.items() if key[0] in "OF")
        if data_grad:  # CM.C3b: dX is a conv from K/G channels (per group) to C*G channels
            return "conv", c * g, max(1, k // g), steps
        return "conv", k, c, steps  # CM.C3a: forward, and dW (a K x C tile of dW)
    if anchor in ("Gemm", "MatMul") and all(d.get(k, 0) > 0 for k in ("M", "N", "K")):
        steps = d.get("B", 1) * d["M"]
        if data_grad:  # CM.C3d: dA = dY . B^T, output width K, reduction over N
            return "gemm", d["K"], d["N"], steps
        return "gemm", d["N"], d["K"], steps  # CM.C3c: forward, and dB = A^T . dY
    return "generic", 0, 0, 0


def _traffic(op: Op, graph: TrainingGraph, pinned: bool) -> tuple[int, int, int, int]:
    """(SRAM read, SRAM write, DRAM read, DRAM write) bytes of CM.C7."""
    sram_r = sram_w = dram_r = dram_w = 0
    for t in dict.fromkeys(op.inputs):
        tensor = graph.tensor(t)
        read = op.reads.get(t, tensor.bytes)  # a fused tile reads its rows and halo (FU.C2)
        if tensor.persistent and not pinned:
            dram_r += read
        else:
            sram_r += read
    for t in dict.fromkeys(op.outputs + op.updates):
        tensor = graph.tensor(t)
        if tensor.persistent and not pinned:
            dram_w += tensor.bytes
        else:
            sram_w += tensor.bytes
    return sram_r, sram_w, dram_r, dram_w


def dram_bandwidth_of(hw: Hardware, core: Core) -> Fraction:
    """Bytes per reference cycle at which ``core`` streams from DRAM (CM.C9).

    The DRAM's full bandwidth, capped by the widest path of links from the core's
    SRAM to ``dram`` (the largest bottleneck bandwidth over all paths).
    """
    dram = hw.dram
    if dram is None:
        raise CostModelError(
            f"hardware {hw.name!r} has no DRAM to stream persistent tensors from",
            field="dram",
            fix="describe a dram memory, or cost the op with pinned=True",
        )
    entry = _WIDEST.get(id(hw.links))
    if entry is None or entry[0] is not hw.links or entry[1] != dram.id:
        if len(_WIDEST) > 64:
            _WIDEST.clear()
        entry = _WIDEST[id(hw.links)] = (hw.links, dram.id, _widest_paths(hw.links, dram.id))
    bottleneck = entry[2].get(core.sram)
    if bottleneck is None:
        raise CostModelError(
            f"no link path joins {core.sram!r} and {dram.id!r}",
            field="links",
            fix="add a link between the core's SRAM and dram",
        )
    return min(_exact(dram.bandwidth_bytes_per_cycle), bottleneck)


#: id(hw.links) -> (hw.links, dram id, {memory id: bottleneck bandwidth}); the stored
#: reference makes a stale id impossible to mistake for a live one.
_WIDEST: dict[int, tuple[tuple[Link, ...], str, dict[str, Fraction]]] = {}


def _widest_paths(links: Iterable[Link], target: str) -> dict[str, Fraction]:
    """Bottleneck bandwidth of the widest link path from every linked memory to ``target``.

    Kruskal's order: adding links from the widest down, a memory's bottleneck is the
    bandwidth of the link that first joins it to ``target``.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    waiting = list(dict.fromkeys(e for link in links for e in link.endpoints if e != target))
    found: dict[str, Fraction] = {}
    for link in sorted(links, key=lambda l: -l.bandwidth_bytes_per_cycle):
        for e in link.endpoints[1:]:
            parent[find(e)] = find(link.endpoints[0])
        root = find(target)
        for m in waiting:
            if find(m) == root:
                found[m] = _exact(link.bandwidth_bytes_per_cycle)
        waiting = [m for m in waiting if m not in found]
        if not waiting:
            break
    return found


# --------------------------------------------------------------------- exact math
@functools.lru_cache(maxsize=4096)
def _exact(x: float | int) -> Fraction:
    """A parameter as the decimal it is written as (0.9 -> 9/10), not its binary float."""
    return Fraction(x) if isinstance(x, int) else Fraction(repr(float(x)))


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def _round(x: Fraction) -> int:
    """Round half up, once per energy part (CM.C11)."""
    return math.floor(x + Fraction(1, 2))


def _to_reference(core_cycles: int, core_hz: int, reference_hz: int) -> int:
    return -(-core_cycles * reference_hz // core_hz)
