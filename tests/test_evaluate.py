"""The evaluator (formulations/evaluator.md) against numbers worked out by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import MAX_VIOLATIONS_PER_KIND, Metrics, evaluate
from monet_ilp.graph import Op, OpKind, Tensor, TensorKind, TrainingGraph, store_all_peak, zoo
from monet_ilp.hardware.model import OpCost
from monet_ilp.instance import CoreSpec, Instance, LinkSpec, MemorySpec, Objective, Problem
from monet_ilp.make import p1_instance
from monet_ilp.schedule import Compute, Free, OpRun, Release, Schedule, Sequence, Transfer

SRAM, DRAM, HOST = "core0.sram", "dram", "host"


# ------------------------------------------------------------------ builders
def graph(name: str, ops: list[tuple], sizes: dict[str, int], kinds: dict[str, TensorKind] | None = None):
    """Ops as (id, inputs, outputs[, op kind[, updates]]); every tensor named in ``sizes``."""
    kinds = kinds or {}
    tensors = [Tensor(t, kinds.get(t, TensorKind.ACTIVATION), b) for t, b in sizes.items()]
    built = [Op(o[0], o[3] if len(o) > 3 else OpKind.FORWARD, "n", inputs=tuple(o[1]), outputs=tuple(o[2]),
                updates=tuple(o[4]) if len(o) > 4 else ()) for o in ops]
    return TrainingGraph.build(name, built, tensors)


def instance(g: TrainingGraph, costs: dict[str, int | OpCost], *, capacity: int = 1000, cores: int = 1,
             link: LinkSpec | None = None, **kw) -> Instance:
    """Memories core<i>.sram (capacity given), dram and host; costs on core0 only."""
    memories = tuple(MemorySpec(f"core{i}.sram", "sram", capacity, read_fj_per_byte=250, write_fj_per_byte=300)
                     for i in range(cores))
    memories += (MemorySpec(DRAM, "dram", 10_000, read_fj_per_byte=1000, write_fj_per_byte=1200),
                 MemorySpec(HOST, "host", 10_000))
    return Instance(
        name=g.name,
        problem=Problem.P2,
        objective=kw.pop("objective", Objective.COMPUTE),
        graph=g,
        cores=tuple(CoreSpec(f"core{i}", f"core{i}.sram") for i in range(cores)),
        memories=memories,
        links=(link,) if link else (),
        costs={op: {"core0": c if isinstance(c, OpCost) else OpCost(c)} for op, c in costs.items()},
        input_home=SRAM,
        **kw,
    )


def run(op: str, start: int, end: int, instance_no: int = 0, core: str = "core0") -> OpRun:
    return OpRun(start=start, end=end, op=op, instance=instance_no, core=core)


def store_all(g: TrainingGraph) -> Sequence:
    """Every op in graph order, each non-persistent tensor released right after its last reader."""
    last = {}
    for i, op in enumerate(g.ops):
        for t in op.inputs + op.outputs:
            last[t] = i
    after: dict[int, list[str]] = {}
    for t in g.tensors:
        if not t.persistent:
            after.setdefault(last.get(t.id, -1), []).append(t.id)
    steps: list = [Release(t) for t in after.get(-1, [])]
    for i, op in enumerate(g.ops):
        steps += [Compute(op.id)] + [Release(t) for t in after.get(i, [])]
    return Sequence(tuple(steps))


# --------------------------------------------------------------- the chain
def chain() -> Instance:
    """x (input, 8 B) -> A -> a (10 B) -> B -> b (20 B) -> C -> c (30 B); A, B, C cost 2, 3, 5."""
    g = graph("chain", [("A", ["x"], ["a"]), ("B", ["a"], ["b"]), ("C", ["b"], ["c"])],
              {"x": 8, "a": 10, "b": 20, "c": 30})
    return instance(g, {"A": 2, "B": 3, "C": 5}, capacity=50, static_fj_per_cycle=2500)


CHAIN_SEQUENCE = Sequence((Compute("A"), Release("x"), Compute("B"), Release("a"), Compute("C"),
                           Release("b"), Release("c")))
CHAIN_TIMED = Schedule(ops=(run("A", 0, 2), run("B", 2, 5), run("C", 5, 10)),
                       frees=(Free(2, "x", SRAM), Free(5, "a", SRAM), Free(10, "b", SRAM), Free(10, "c", SRAM)))


@pytest.mark.parametrize("form", [CHAIN_SEQUENCE, CHAIN_TIMED], ids=["sequence", "timed"])
def test_chain(form):
    m = evaluate(chain(), form)
    assert m.feasible and m.violations == ()
    # A [0, 2), B [2, 5), C [5, 10): latency 10, compute 2 + 3 + 5 = 10.
    assert (m.latency_cycles, m.compute_cycles, m.objective_value) == (10, 10, 10)
    # During A: x + a = 18; x released at 2; during B: a + b = 30; a released at 5;
    # during C: b + c = 50 (= capacity); both released at 10.
    assert m.profile[SRAM] == ((0, 18), (2, 30), (5, 50), (10, 0))
    assert m.peak_bytes == {SRAM: 50, DRAM: 0, HOST: 0}
    assert m.profile[DRAM] == ()
    assert (m.recomputations, m.transfers) == (0, 0)


def test_sequence_is_timed_back_to_back():
    m = evaluate(chain(), CHAIN_SEQUENCE)
    assert m.schedule == CHAIN_TIMED
    assert evaluate(chain(), m.schedule).profile == m.profile


def test_static_energy():
    # 2500 fJ per cycle over 10 cycles = 25 pJ; the ops cost no energy.
    energy = evaluate(chain(), CHAIN_SEQUENCE).energy
    assert energy.static_pj == 25 and energy.total_pj == 25
    assert (energy.compute_pj, energy.recompute_pj, energy.sram_pj, energy.dram_pj, energy.link_pj) == (0,) * 5


# ------------------------------------------------------------- the diamond
def test_diamond_freeing_order_changes_the_peak():
    """A -> a (10); B(a) -> b (20); C(a) -> c (30); D(b, c) -> d (5); each op 1 cycle."""
    g = graph("diamond", [("A", [], ["a"]), ("B", ["a"], ["b"]), ("C", ["a"], ["c"]), ("D", ["b", "c"], ["d"])],
              {"a": 10, "b": 20, "c": 30, "d": 5})
    inst = instance(g, dict.fromkeys("ABCD", 1))
    tail = (Release("b"), Release("c"), Release("d"))
    early = Sequence((Compute("A"), Compute("B"), Compute("C"), Release("a"), Compute("D")) + tail)
    late = Sequence((Compute("A"), Compute("B"), Compute("C"), Compute("D"), Release("a")) + tail)
    # a: 10; a + b: 30; a + b + c: 60; then D holds b + c + d = 55 if a went after C ...
    assert evaluate(inst, early).profile[SRAM] == ((0, 10), (1, 30), (2, 60), (3, 55), (4, 0))
    assert evaluate(inst, early).peak_bytes[SRAM] == 60
    # ... or a + b + c + d = 65 if a is kept until after D.
    assert evaluate(inst, late).profile[SRAM] == ((0, 10), (1, 30), (2, 60), (3, 65), (4, 0))
    assert evaluate(inst, late).peak_bytes[SRAM] == 65


# ----------------------------------------------------------- one transfer
LINK = LinkSpec("l0", (SRAM, DRAM), bandwidth_num=3, bandwidth_den=2, latency_cycles=5, fj_per_byte=1500)


def test_one_transfer():
    """A makes a (10 B) in SRAM; a goes to DRAM over l0 (1.5 B/cycle, 5 cycles latency)."""
    g = graph("one", [("A", [], ["a"])], {"a": 10})
    inst = instance(g, {"A": OpCost(4, compute_pj=7, sram_pj=2)}, link=LINK, objective=Objective.ENERGY)
    # 5 + ceil(10 / 1.5) = 5 + ceil(6.67) = 12 cycles.
    assert LINK.transfer_cycles(10) == 12
    schedule = Schedule(ops=(run("A", 0, 4),), transfers=(Transfer(4, 16, "a", SRAM, DRAM, "l0"),),
                        frees=(Free(16, "a", SRAM),))
    m = evaluate(inst, schedule)
    assert m.feasible, m.violations
    assert (m.latency_cycles, m.transfers) == (16, 1)
    # Both memories hold a during the transfer [4, 16); the DRAM copy stays until the makespan.
    assert m.profile[SRAM] == ((0, 10), (16, 0))
    assert m.profile[DRAM] == ((4, 10), (16, 0))
    e = m.energy
    # link: (10 * 1500 + 500) // 1000 = 15; SRAM read: (10 * 250 + 500) // 1000 = 3, plus A's 2;
    # DRAM write: (10 * 1200 + 500) // 1000 = 12; A's compute 7.
    assert (e.link_pj, e.sram_pj, e.dram_pj, e.compute_pj) == (15, 5, 12, 7)
    assert e.total_pj == m.objective_value == 39


# ------------------------------------------------------------- recompute
def recompute_instance() -> Instance:
    """x (4) -> A -> a (10) -> B -> b (10); C(a, b) -> c (10).  A costs 2 cycles and 14 pJ."""
    g = graph("remat", [("A", ["x"], ["a"]), ("B", ["a"], ["b"]), ("C", ["a", "b"], ["c"])],
              {"x": 4, "a": 10, "b": 10, "c": 10})
    return instance(g, {"A": OpCost(2, compute_pj=10, sram_pj=3, dram_pj=1), "B": 3, "C": 1},
                    objective=Objective.ENERGY)


def test_recompute():
    # A [0, 2), B [2, 5), a freed at 5, A again [6, 8) (the core idles at 5), C [8, 9).
    ops = (run("A", 0, 2), run("B", 2, 5), run("A", 6, 8, 1), run("C", 8, 9))
    m = evaluate(recompute_instance(), Schedule(ops=ops, frees=(Free(5, "a", SRAM),)))
    assert m.feasible, m.violations
    assert (m.recomputations, m.compute_cycles, m.latency_cycles) == (1, 8, 9)
    # The first A: compute 10, SRAM 3, DRAM 1; the second: all of its 14 pJ as recompute.
    e = m.energy
    assert (e.compute_pj, e.sram_pj, e.dram_pj, e.recompute_pj, e.total_pj) == (10, 3, 1, 14, 28)
    # x + a = 14; x + a + b = 24; a gone at 5: x + b = 14; a back at 6: 24; C adds c: 34.
    assert m.profile[SRAM] == ((0, 14), (2, 24), (5, 14), (6, 24), (8, 34), (9, 0))


def test_recompute_inputs_are_checked():
    # The same, with x freed after the first A: the recomputation has no input.
    ops = (run("A", 0, 2), run("B", 2, 5), run("A", 5, 7, 1), run("C", 7, 8))
    m = evaluate(recompute_instance(), Schedule(ops=ops, frees=(Free(2, "x", SRAM), Free(5, "a", SRAM))))
    assert dict(m.violation_counts) == {"not_resident": 1}
    (v,) = m.violations
    assert (v.op, v.tensor, v.memory, v.time) == ("A", "x", SRAM, 5)


def test_instance_numbers_follow_start_times():
    # The runs of A are listed with swapped instance numbers: the evaluator numbers them by start.
    ops = (run("A", 0, 2, 1), run("B", 2, 5), run("A", 5, 7, 0), run("C", 7, 8))
    m = evaluate(recompute_instance(), Schedule(ops=ops, frees=(Free(5, "a", SRAM),)))
    assert (m.energy.compute_pj, m.energy.recompute_pj) == (10, 14)


# --------------------------------------------------------------- offload
def offload_instance(capacity: int) -> Instance:
    """F1(x) -> a (40); F2(a) -> y (30); B2(y) -> g (10); B1(a, g) -> gx (10); x is 10 B.

    Every op costs 2 cycles; the link moves 4 B per cycle, so a takes 10 cycles.
    """
    g = graph("offload", [("F1", ["x"], ["a"]), ("F2", ["a"], ["y"]), ("B2", ["y"], ["g"], OpKind.BACKWARD_DATA),
                          ("B1", ["a", "g"], ["gx"], OpKind.BACKWARD_DATA)],
              {"x": 10, "a": 40, "y": 30, "g": 10, "gx": 10})
    link = LinkSpec("l0", (SRAM, DRAM), bandwidth_num=4)
    return instance(g, dict.fromkeys(("F1", "F2", "B2", "B1"), 2), capacity=capacity, link=link)


def test_offload_lowers_the_sram_peak():
    offload = Schedule(
        ops=(run("F1", 0, 2), run("F2", 2, 4), run("B2", 14, 16), run("B1", 26, 28)),
        transfers=(Transfer(4, 14, "a", SRAM, DRAM, "l0"), Transfer(16, 26, "a", DRAM, SRAM, "l0")),
        frees=(Free(2, "x", SRAM), Free(14, "a", SRAM), Free(16, "y", SRAM)),
    )
    m = evaluate(offload_instance(75), offload)
    assert m.feasible, m.violations
    # x + a = 50; a + y = 70 (F2 and the way out); y + g = 40 (B2); at 16 y goes and a
    # starts coming back (it occupies SRAM from the transfer's start): g + a = 50;
    # B1: a + g + gx = 60.  The DRAM copy of a lives from 4 to the makespan 28.
    assert m.profile[SRAM] == ((0, 50), (2, 70), (14, 40), (16, 50), (26, 60), (28, 0))
    assert m.profile[DRAM] == ((4, 40), (28, 0))
    assert m.peak_bytes[SRAM] == 70 and m.transfers == 2
    # Keeping a instead: during B2, a + y + g = 80 > 75.
    keep = Schedule(ops=(run("F1", 0, 2), run("F2", 2, 4), run("B2", 4, 6), run("B1", 6, 8)),
                    frees=(Free(2, "x", SRAM), Free(6, "y", SRAM)))
    kept = evaluate(offload_instance(75), keep)
    assert kept.peak_bytes[SRAM] == 80
    assert dict(kept.violation_counts) == {"capacity": 1}
    assert "[4, 6)" in kept.violations[0].message


# ------------------------------------------------------------ persistent
def persistent_instance() -> Instance:
    """F(x (10), w (100, a weight)) -> y (10); w lives in DRAM unless pinned.

    F costs 10 cycles streaming w (40 pJ of DRAM), 6 cycles with w pinned in SRAM.
    """
    g = graph("weights", [("F", ["x", "w"], ["y"])], {"x": 10, "w": 100, "y": 10}, {"w": TensorKind.WEIGHT})
    inst = instance(g, {"F": OpCost(10, compute_pj=5, sram_pj=2, dram_pj=40)}, capacity=200,
                    persistent_home=DRAM, pinned_costs={"F": {"core0": OpCost(6, compute_pj=5, sram_pj=3)}},
                    objective=Objective.LATENCY)
    return inst


def test_persistent_tensors_live_in_their_home():
    m = evaluate(persistent_instance(), Schedule(ops=(run("F", 0, 10),)))
    assert m.feasible, m.violations
    assert m.profile[DRAM] == ((0, 100), (10, 0))
    assert m.profile[SRAM] == ((0, 20), (10, 0))  # x + y
    assert (m.energy.dram_pj, m.energy.sram_pj, m.objective_value) == (40, 2, 10)


def test_pinned_persistent_tensor_uses_the_pinned_cost():
    m = evaluate(persistent_instance(), Schedule(ops=(run("F", 0, 6),), pinned=(("w", SRAM),)))
    assert m.feasible, m.violations
    assert m.peak_bytes == {SRAM: 120, DRAM: 0, HOST: 0}  # x + y + w
    assert (m.energy.dram_pj, m.energy.sram_pj, m.energy.compute_pj, m.latency_cycles) == (0, 3, 5, 6)
    # Pinned, the unpinned duration is wrong.
    wrong = evaluate(persistent_instance(), Schedule(ops=(run("F", 0, 10),), pinned=(("w", SRAM),)))
    assert dict(wrong.violation_counts) == {"duration": 1}


# ------------------------------------------------------------ violations
def pair(cores: int = 1, **kw) -> Instance:
    """A -> a (4 B) and b (4 B); B(a) -> c (4 B).  A costs 2 cycles, B 3.

    Link l0 joins core0.sram and dram at 1 B/cycle with 1 cycle latency: 5 cycles for 4 B.
    """
    g = graph("pair", [("A", [], ["a", "b"]), ("B", ["a"], ["c"])], {"a": 4, "b": 4, "c": 4})
    link = LinkSpec("l0", (SRAM, DRAM), bandwidth_num=1, latency_cycles=1)
    return instance(g, {"A": 2, "B": 3}, cores=cores, link=link, **kw)


PAIR = (run("A", 0, 2), run("B", 2, 5))


def independent(cores: int = 1) -> Instance:
    """A -> a (4 B) and B -> b (4 B), unrelated; A costs 2 cycles, B 3 (on core0 only)."""
    g = graph("independent", [("A", [], ["a"]), ("B", [], ["b"])], {"a": 4, "b": 4})
    return instance(g, {"A": 2, "B": 3}, cores=cores)


def hazard_instance() -> Instance:
    """F(x, w) -> y; Bw(y) -> dw; Bd(y, w) -> dx; opt(dw, w) updates w.  Each op costs 1."""
    g = graph("hazard", [("F", ["x", "w"], ["y"]), ("Bw", ["y"], ["dw"], OpKind.BACKWARD_WEIGHT),
                         ("Bd", ["y", "w"], ["dx"], OpKind.BACKWARD_DATA),
                         ("opt", ["dw", "w"], [], OpKind.OPTIMIZER, ["w"])],
              {"x": 4, "w": 8, "y": 4, "dw": 8, "dx": 4},
              {"w": TensorKind.WEIGHT, "dw": TensorKind.WEIGHT_GRAD})
    return instance(g, dict.fromkeys(("F", "Bw", "Bd", "opt"), 1))


def seq(*ops: str) -> Sequence:
    return Sequence(tuple(Compute(o) for o in ops))


CASES = {
    "unknown_name": (pair(), Schedule(ops=PAIR, frees=(Free(5, "zzz", SRAM),))),
    "missing_op": (pair(), Schedule(ops=PAIR[:1])),
    "bad_core": (independent(cores=2), Schedule(ops=(run("A", 0, 2, core="core1"), run("B", 0, 3)))),
    "duration": (pair(), Schedule(ops=(run("A", 0, 3), run("B", 3, 6)))),
    "negative_time": (pair(), Schedule(ops=(run("A", -1, 1), run("B", 1, 4)))),
    "core_overlap": (independent(), Schedule(ops=(run("A", 0, 2), run("B", 1, 4)))),
    "not_resident": (pair(), Schedule(ops=PAIR, frees=(Free(2, "a", SRAM),))),
    "not_resident/sequence": (pair(), Sequence((Compute("A"), Release("a"), Compute("B")))),
    "not_resident/gradient": (hazard_instance(), seq("F", "Bd", "opt", "Bw")),
    "bad_link": (pair(), Schedule(ops=PAIR, transfers=(Transfer(2, 7, "b", SRAM, HOST, "l0"),))),
    "link_overlap": (pair(), Schedule(ops=PAIR, transfers=(Transfer(2, 7, "a", SRAM, DRAM, "l0"),
                                                           Transfer(6, 11, "b", SRAM, DRAM, "l0")))),
    "bad_free": (pair(), Schedule(ops=PAIR, frees=(Free(3, "a", DRAM),))),
    "duplicate_copy": (pair(), Schedule(ops=PAIR, transfers=(Transfer(2, 7, "b", SRAM, DRAM, "l0"),
                                                             Transfer(7, 12, "b", SRAM, DRAM, "l0")))),
    "bad_pin": (hazard_instance(), Schedule(ops=(run("F", 0, 1), run("Bw", 1, 2), run("Bd", 2, 3),
                                                 run("opt", 3, 4)), pinned=(("w", SRAM),))),
    "update_hazard": (hazard_instance(), seq("F", "Bw", "opt", "Bd")),
    "update_hazard/timed": (hazard_instance(), Schedule(ops=(run("F", 0, 1), run("Bw", 1, 2),
                                                             run("opt", 2, 3), run("Bd", 3, 4)))),
    # The chain peaks at 50 bytes (during C): one byte less does not fit.
    "capacity": (instance(chain().graph, {"A": 2, "B": 3, "C": 5}, capacity=49), CHAIN_SEQUENCE),
    "capacity/timed": (instance(chain().graph, {"A": 2, "B": 3, "C": 5}, capacity=49), CHAIN_TIMED),
    "runtime_limit": (pair(runtime_limit_cycles=4), Schedule(ops=PAIR)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_violation_kind(case):
    inst, schedule = CASES[case]
    kind = case.split("/")[0]
    m = evaluate(inst, schedule)
    assert not m.feasible
    assert dict(m.violation_counts) == {kind: 1}, m.violations
    (v,) = m.violations
    assert v.kind == kind and v.message


def test_violation_details():
    m = evaluate(*CASES["capacity/timed"])
    (v,) = m.violations
    assert (v.memory, v.time) == (SRAM, 5) and "[5, 10)" in v.message and "50 bytes" in v.message
    (v,) = evaluate(*CASES["update_hazard"]).violations
    assert "'Bd'" in v.message and "'opt'" in v.message and v.tensor == "w"
    (v,) = evaluate(*CASES["not_resident/sequence"]).violations
    assert (v.op, v.tensor, v.memory) == ("B", "a", SRAM)
    (v,) = evaluate(*CASES["bad_free"]).violations
    assert (v.tensor, v.memory, v.time) == ("a", DRAM, 3)


def test_repetitive_violations_are_capped():
    frees = tuple(Free(5, "a", DRAM) for _ in range(MAX_VIOLATIONS_PER_KIND + 10))
    m = evaluate(pair(), Schedule(ops=PAIR, frees=frees))
    assert m.violation_counts["bad_free"] == MAX_VIOLATIONS_PER_KIND + 10
    assert len(m.violations) == MAX_VIOLATIONS_PER_KIND


def test_zero_cycle_output_freed_at_once():
    # A costs nothing: its outputs appear and are freed at the same instant.
    inst = instance(pair().graph, {"A": 0, "B": 3})
    m = evaluate(inst, Schedule(ops=(run("A", 0, 0), run("B", 0, 3)), frees=(Free(0, "b", SRAM),)))
    assert m.feasible, m.violations


@pytest.mark.parametrize("when", [0, 1])
def test_an_output_is_not_freed_before_its_run_ends(when):
    """EV.E1.4: A [0, 2) writes a and b (read by nobody); b may go at 2, not before."""
    at_end = evaluate(pair(), Schedule(ops=PAIR, frees=(Free(2, "b", SRAM),)))
    assert at_end.feasible, at_end.violations
    assert at_end.profile[SRAM] == ((0, 8), (5, 0))  # at 2, b (4 B) goes as c (4 B) comes
    early = evaluate(pair(), Schedule(ops=PAIR, frees=(Free(when, "b", SRAM),)))
    assert dict(early.violation_counts) == {"bad_free": 1}
    (v,) = early.violations
    assert (v.op, v.tensor, v.memory, v.time) == ("A", "b", SRAM, when)
    assert "run of 'A' on 'core0' [0, 2)" in v.message and "until time 2" in v.message
    # The refused free is ignored: b stays until the makespan.
    assert early.profile[SRAM] == ((0, 8), (2, 12), (5, 0))


def test_a_transfer_copy_is_not_freed_before_the_transfer_ends():
    g = graph("one", [("A", [], ["a"])], {"a": 10})
    inst = instance(g, {"A": 4}, link=LINK)
    moved = (Transfer(4, 16, "a", SRAM, DRAM, "l0"),)
    ok = evaluate(inst, Schedule(ops=(run("A", 0, 4),), transfers=moved, frees=(Free(16, "a", DRAM),)))
    assert ok.feasible, ok.violations
    m = evaluate(inst, Schedule(ops=(run("A", 0, 4),), transfers=moved, frees=(Free(10, "a", DRAM),)))
    (v,) = m.violations
    assert (v.kind, v.tensor, v.memory, v.time) == ("bad_free", "a", DRAM, 10)
    assert "transfer from 'core0.sram' over 'l0' [4, 16)" in v.message


def test_a_rewritten_copy_is_not_freed_before_the_rewrite_ends():
    """A reruns [5, 7) while a is resident (EV.E1.2: a rewrite); a may go at 7, not at 6."""
    ops = (run("A", 0, 2), run("B", 2, 5), run("A", 5, 7, 1), run("C", 7, 8))
    ok = evaluate(recompute_instance(), Schedule(ops=ops, frees=(Free(8, "a", SRAM),)))
    assert ok.feasible, ok.violations
    m = evaluate(recompute_instance(), Schedule(ops=ops, frees=(Free(6, "a", SRAM),)))
    (v,) = m.violations
    assert (v.kind, v.op, v.tensor, v.time) == ("bad_free", "A", "a", 6) and "[5, 7)" in v.message


# --------------------------------------------------------- unusable input
def test_sequence_needs_one_core():
    with pytest.raises(MonetError, match="one core"):
        evaluate(pair(cores=2), seq("A", "B"))


def test_weighted_objective_needs_references():
    with pytest.raises(MonetError, match="latency_ref_cycles"):
        evaluate(pair(objective=Objective.WEIGHTED), Schedule(ops=PAIR))
    inst = pair(objective=Objective.WEIGHTED, alpha=0.25, meta={"latency_ref_cycles": 10, "energy_ref_pj": 4},
                static_fj_per_cycle=1000)
    # latency 5, energy 5 pJ (static only): 0.25 * 5 / 10 + 0.75 * 5 / 4 = 1.0625.
    assert evaluate(inst, Schedule(ops=PAIR)).objective_value == pytest.approx(1.0625)


# ------------------------------------------------------------------- JSON
def test_metrics_json_round_trip():
    for inst, schedule in (CASES["link_overlap"], (chain(), CHAIN_SEQUENCE)):
        m = evaluate(inst, schedule)
        data = json.loads(json.dumps(m.to_dict()))
        assert data == m.to_dict()
        assert Metrics.from_dict(data) == m


# ------------------------------------------------------------- real graph
def test_store_all_on_mlp():
    g = zoo.mlp()
    peak = store_all_peak(g).activation_bytes
    m = evaluate(p1_instance(g, budget=1.0), store_all(g))
    assert m.feasible, m.violations
    assert m.peak_bytes[SRAM] == peak
    assert m.compute_cycles == sum(op.flops for op in g.ops)
    timed = evaluate(p1_instance(g, budget=1.0), m.schedule)
    assert timed.feasible and timed.peak_bytes == m.peak_bytes and timed.profile == m.profile
    tight = evaluate(p1_instance(g, budget=peak - 1), store_all(g))
    assert not tight.feasible and set(tight.violation_counts) == {"capacity"}


@pytest.mark.parametrize("home", [SRAM, DRAM])
def test_sequence_counts_modelled_persistent_tensors(home):
    inst = dataclasses.replace(persistent_instance(), persistent_home=home)
    m = evaluate(inst, seq("F"))
    assert m.feasible, m.violations
    # F runs [0, 10) holding x + y = 20 in SRAM; w (100) sits in its home all along.
    expected = {SRAM: ((0, 20), (10, 0)), DRAM: ()}
    if home == SRAM:
        expected[SRAM] = ((0, 120), (10, 0))
    else:
        expected[DRAM] = ((0, 100), (10, 0))
    assert {m_: m.profile[m_] for m_ in (SRAM, DRAM)} == expected
