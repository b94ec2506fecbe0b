"""The P1 stage MILP (Checkmate) against exhaustive search, on hand-made and random tiny graphs.

The oracle (:func:`brute_force`) shares no code with the backend: it searches every
E3 sequence over the graph itself (Dijkstra over resident sets; a free is a step of
its own), in the stage form of ``formulations/p1_milp.md`` (recomputations of a
stage in index order) or in any order (the literal schedule definition of
``formulations/p1_problem.md``).  Every schedule, the oracle's included, goes
through the evaluator.
"""

from __future__ import annotations

import functools
import heapq
import math
import random

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered
from monet_ilp.graph.ir import Op, OpKind, Tensor, TensorKind, TrainingGraph
from monet_ilp.graph.node_link import node_op
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.milp import (
    build_model,
    export_model,
    lp_bound,
    solve_lp_rounding,
    solve_milp,
)
from monet_ilp.schedule import Compute, Release, Sequence
from monet_ilp.solve import Status, solve
from tests.conftest import verified

SOLVERS = ("highs", "cbc")


# ====================================================================== the oracle
def brute_force(instance, *, order: str = "index", max_computes: int | None = None):
    """Minimum compute cost of P1 by exhaustive search, and a witness Sequence.

    ``order="index"``: the stage form (between two first computations, recomputed
    ops come in increasing graph order, each at most once); ``order="any"``: any
    order, any number of times.  Values are node outputs (freed together) and graph
    inputs (resident at the start, never recomputed).  After the first optimizer op
    nothing is recomputed.  Returns ``(math.inf, None)`` when nothing fits.
    """
    graph = instance.graph
    core = instance.cores[0].id
    ops = graph.ops
    n = len(ops)
    index = {op.id: i for i, op in enumerate(ops)}
    inputs = [t.id for t in graph.tensors if t.producer is None and not t.persistent]
    value_of_input = {t: n + k for k, t in enumerate(inputs)}
    names = [[t for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent] for op in ops]
    names += [[t] for t in inputs]
    size = [sum(graph.tensor(t).bytes for t in group) for group in names]
    need = []
    for op in ops:
        mask = 0
        for t in op.inputs:
            tensor = graph.tensor(t)
            if tensor.persistent:
                continue
            mask |= 1 << (index[tensor.producer] if tensor.producer else value_of_input[t])
        need.append(mask)
    cost = [instance.cost(op.id, core).cycles for op in ops]
    first_update = min([i for i, op in enumerate(ops) if op.kind is OpKind.OPTIMIZER], default=n)
    capacity = instance.budget_bytes
    limit = max_computes or n + 1  # counts are tracked only under a limit
    held_cache: dict[int, int] = {}

    def held(mask: int) -> int:
        if mask not in held_cache:
            held_cache[mask] = sum(size[v] for v in range(len(size)) if mask >> v & 1)
        return held_cache[mask]

    inputs_mask = sum(1 << value_of_input[t] for t in inputs)
    start = (0, 0, inputs_mask, (0,) * n if max_computes else ())
    dist = {start: 0}
    parent: dict = {start: None}
    heap = [(0, 0, start)]
    tie = 1
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > dist[state]:
            continue
        k, low, resident, counts = state
        if k == n:
            steps = []
            while parent[state] is not None:
                state, (what, v) = parent[state]
                steps.append(Compute(ops[v].id) if what == "compute" else None)
                if what == "free":
                    steps[-1:] = [Release(t) for t in reversed(names[v])]
            return d, Sequence(tuple(reversed(steps)))
        moves = []
        for v in range(len(size)):
            if resident >> v & 1:
                moves.append(((k, low, resident & ~(1 << v), counts), 0, ("free", v)))
        recompute = k <= first_update  # the first optimizer op has not run yet
        candidates = [k] if k < n else []
        if recompute:
            candidates += range(low if order == "index" else 0, k)
        for j in candidates:
            if need[j] & ~resident or (counts and counts[j] >= limit):
                continue
            after = resident | 1 << j
            if held(after) > capacity:
                continue
            counts2 = counts[:j] + (counts[j] + 1,) + counts[j + 1:] if counts else ()
            nxt = (k + 1, 0, after, counts2) if j == k else (
                k, j + 1 if order == "index" else 0, after, counts2)
            moves.append((nxt, cost[j], ("compute", j)))
        for nxt, c, move in moves:
            if d + c < dist.get(nxt, math.inf):
                dist[nxt] = d + c
                parent[nxt] = (state, move)
                heapq.heappush(heap, (d + c, tie, nxt))
                tie += 1
    return math.inf, None


# ================================================================ tiny instances
def tiny_graph(seed: int, *, optimizer: bool = False) -> TrainingGraph:
    """A random DAG of 2-6 ops: 1 or 2 outputs each, graph inputs (one maybe unread), zero costs.

    With ``optimizer`` the tail is ``dW_a, opt_a, dW_b, opt_b``: weight-gradient ops
    reading activations and optimizer ops updating weights in place, the first of
    which op 0 reads (so recomputing op 0 after ``opt_a`` would be a hazard).
    """
    rng = random.Random(seed)
    n = rng.randint(2, 6 if not optimizer else 5)
    tensors = [Tensor(f"x{k}", TensorKind.ACTIVATION, rng.randint(1, 4)) for k in range(rng.randint(0, 2))]
    weights = [Tensor(f"W{k}", TensorKind.WEIGHT, 8) for k in range(2)] if optimizer else []
    tensors += weights
    ops = []
    outputs: list[list[str]] = []
    for i in range(n):
        reads = [rng.choice(outputs[j]) for j in range(i) if rng.random() < 0.45]
        if i and not reads:
            reads = [rng.choice(outputs[i - 1])]
        reads += [t.id for t in tensors if t.id.startswith("x") and rng.random() < 0.35]
        if optimizer and i == 0:
            reads.append("W0")
        outs = [f"o{i}_{k}" for k in range(2 if rng.random() < 0.3 else 1)]
        tensors += [Tensor(t, TensorKind.ACTIVATION, rng.randint(1, 5)) for t in outs]
        outputs.append(outs)
        ops.append(Op(f"v{i}", OpKind.FORWARD, "node", inputs=tuple(dict.fromkeys(reads)),
                      outputs=tuple(outs), cost=rng.choice([0, 1, 2, 3, 5, 8])))
    if optimizer:
        for k in range(2):
            grad = Tensor(f"G{k}", TensorKind.WEIGHT_GRAD, 8)
            tensors.append(grad)
            ops.append(Op(f"dW{k}", OpKind.BACKWARD_WEIGHT, "node",
                          inputs=(rng.choice(outputs[rng.randrange(n)]),), outputs=(grad.id,),
                          cost=rng.randint(1, 4)))
            ops.append(Op(f"opt{k}", OpKind.OPTIMIZER, "node", inputs=(f"W{k}", grad.id),
                          updates=(f"W{k}",), cost=1))
    return TrainingGraph.build(f"tiny{seed}", ops, tensors)


@functools.cache
def tiny_instance(seed: int, *, optimizer: bool = False):
    """A tiny instance whose budget makes recomputation matter (or, now and then, is too small).

    The oracle finds the least feasible budget ``b_any`` and the least budget
    without recomputation ``b_none`` (bisection: feasibility grows with the budget);
    of up to six graphs the first with ``b_any < b_none`` is taken, and the budget
    drawn from ``[b_any, b_none)`` (``b_any`` if empty), or ``b_any - 1`` (infeasible)
    for about one seed in seven.
    """
    rng = random.Random(seed + 1000)

    def least(graph, low: int, high: int, **limits) -> int:
        while low < high:
            middle = (low + high) // 2
            if brute_force(p1_instance(graph, budget=middle), **limits)[0] < math.inf:
                high = middle
            else:
                low = middle + 1
        return low

    for attempt in range(6):  # prefer graphs on which recomputation can pay
        graph = tiny_graph(seed * 6 + attempt, optimizer=optimizer)
        total = sum(t.bytes for t in graph.tensors if not t.persistent)
        b_none = least(graph, 1, total, max_computes=1)
        b_any = least(graph, 1, b_none)
        if b_none > b_any:
            break
    if rng.random() < 0.15 and b_any > 1:
        budget = b_any - 1
    elif b_none > b_any:
        budget = rng.randint(b_any, b_none - 1)
    else:
        budget = b_any
    return p1_instance(graph, budget=budget)


def hand_chain():
    """a -> b -> c -> d and a -> d: at 4 bytes ``a`` must be recomputed for ``d`` (cost 22 + 1)."""
    ops, tensors = [], []
    for name, cost, size, inputs in [("a", 1, 1, []), ("b", 10, 2, ["a"]), ("c", 10, 2, ["b"]),
                                     ("d", 1, 1, ["c", "a"])]:
        op, tensor = node_op(name, cost=cost, size=size, inputs=inputs)
        ops.append(op)
        tensors.append(tensor)
    return TrainingGraph.build("chain", ops, tensors)


def two_chains():
    """Two interleaved chains that the stage form cannot recompute within one stage.

    Order x1, y1, x2, y2, w, v; v reads x2 and y2, and w (20 bytes, read by nobody)
    forces both to be dropped before it runs.  At 21 bytes stage v must recompute
    x1, x2, y1, y2: in index order x1, y1, x2 holds 22 bytes, in the order x1, x2
    (free x1), y1, y2 at most 14.
    """
    spec = [("x1", 1, 10, []), ("y1", 1, 10, []), ("x2", 1, 2, ["x1"]), ("y2", 1, 2, ["y1"]),
            ("w", 1, 20, []), ("v", 1, 1, ["x2", "y2"])]
    ops, tensors = [], []
    for name, cost, size, inputs in spec:
        op, tensor = node_op(name, cost=cost, size=size, inputs=inputs)
        ops.append(op)
        tensors.append(tensor)
    return TrainingGraph.build("two_chains", ops, tensors)


def between(graph, fraction: float):
    """A P1 instance whose budget lies ``fraction`` of the way from the largest single step
    (an op's inputs and outputs: no schedule fits below it) to the store-all peak."""
    step = max(sum(graph.tensor(t).bytes for t in set(op.inputs + op.outputs)
                   if not graph.tensor(t).persistent) for op in graph.ops)
    peak = p1_instance(graph, budget=1.0).meta["store_all_peak_bytes"]
    return p1_instance(graph, budget=int(step + fraction * (peak - step)))


def solved(instance, backend="milp", **options):
    """:func:`solve`, then :func:`verified`; a schedule's compute cycles are the objective."""
    result = solve(instance, backend, **options)
    metrics = verified(instance, result)
    if metrics is not None:
        assert metrics.compute_cycles == result.objective
    return result


# ========================================================================= tests
@pytest.mark.parametrize("solver", SOLVERS)
def test_hand_chain_needs_one_recompute(solver):
    graph = hand_chain()
    tight = solved(p1_instance(graph, budget=4), milp_solver=solver)
    assert tight.status is Status.OPTIMAL and tight.objective == 23 and tight.bound == 23
    assert tight.schedule.computations == ("a", "b", "c", "a", "d")
    assert tight.metrics.recomputations == 1
    assert tight.stats["lp_bound"] <= 23 + 1e-6
    assert lp_bound(p1_instance(graph, budget=4), milp_solver=solver) == pytest.approx(
        tight.stats["lp_bound"], abs=1e-6)
    roomy = solved(p1_instance(graph, budget=5), milp_solver=solver)
    assert roomy.status is Status.OPTIMAL and roomy.objective == 22
    short = solved(p1_instance(graph, budget=3), milp_solver=solver)
    assert short.status is Status.INFEASIBLE and short.schedule is None
    assert "infeasible at budget 3 bytes" in short.message


def test_oracle_witnesses_pass_the_evaluator():
    for seed in range(12):
        instance = tiny_instance(seed, optimizer=seed % 3 == 0)
        for order in ("index", "any"):
            best, witness = brute_force(instance, order=order)
            if witness is None:
                continue
            metrics = evaluate(instance, witness)
            assert metrics.feasible, (seed, order, metrics.violations[:3])
            assert metrics.compute_cycles == best


@pytest.mark.parametrize("seed", range(30))
def test_highs_matches_brute_force(seed):
    instance = tiny_instance(seed, optimizer=seed % 4 == 3)
    best, _ = brute_force(instance)
    result = solved(instance)
    if best == math.inf:
        assert result.status is Status.INFEASIBLE, result.message
        return
    assert result.status is Status.OPTIMAL, result.message
    assert result.objective == best and result.bound == best
    assert result.stats["lp_bound"] <= best + 1e-6
    assert brute_force(instance, order="any")[0] <= best


@pytest.mark.parametrize("seed", range(0, 30, 3))
def test_cbc_matches_brute_force(seed):
    instance = tiny_instance(seed, optimizer=seed % 4 == 3)
    best, _ = brute_force(instance)
    result = solved(instance, milp_solver="cbc")
    if best == math.inf:
        assert result.status is Status.INFEASIBLE
    else:
        assert result.status is Status.OPTIMAL and result.objective == best


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("limit", (1, 2))
def test_max_computes_matches_brute_force(seed, limit):
    instance = tiny_instance(seed + 100)
    best, _ = brute_force(instance, max_computes=limit)
    result = solved(instance, max_computes=limit)
    if best == math.inf:
        assert result.status is Status.INFEASIBLE
    else:
        assert result.status is Status.OPTIMAL and result.objective == best
        runs = result.schedule.computations
        assert max(runs.count(op) for op in runs) <= limit


def test_optimizer_ops_end_recomputation():
    checked = 0
    for seed in range(24):
        instance = tiny_instance(seed, optimizer=True)
        best, _ = brute_force(instance)
        result = solved(instance)
        if best == math.inf:
            assert result.status is Status.INFEASIBLE
            continue
        assert result.objective == best
        first_update = result.schedule.computations.index("opt0")
        assert result.schedule.computations[first_update:] == ("opt0", "dW1", "opt1")
        checked += 1
    assert checked >= 8


def test_stage_form_is_narrower_than_any_order():
    """The documented restriction (p1_milp.md, A1): recomputations of a stage in index order."""
    instance = p1_instance(two_chains(), budget=21)
    assert brute_force(instance, order="index")[0] == math.inf
    best_any, witness = brute_force(instance, order="any")
    assert best_any == 11 and evaluate(instance, witness).feasible
    assert solved(instance).status is Status.INFEASIBLE
    assert solved(p1_instance(two_chains(), budget=22)).objective == brute_force(
        p1_instance(two_chains(), budget=22))[0]


@pytest.mark.parametrize("seed", range(12))
def test_lp_bound_and_rounding(seed):
    instance = tiny_instance(seed + 200)
    best, _ = brute_force(instance)
    bound = lp_bound(instance)
    rounded = solved(instance, "heuristic:lp-round")
    if best == math.inf:
        assert rounded.status in (Status.INFEASIBLE, Status.UNKNOWN)
        return
    assert bound <= best + 1e-6
    assert rounded.bound is None or rounded.bound <= best
    if rounded.schedule is not None:
        assert rounded.status is Status.FEASIBLE and rounded.objective >= best
        assert rounded.stats["lp_bound"] == pytest.approx(bound, abs=1e-6)


def test_lp_rounding_on_a_random_layered_graph():
    instance = between(random_layered(30, seed=1), 0.6)
    result = solved(instance, "heuristic:lp-round", time_limit=20)
    assert result.status is Status.FEASIBLE
    assert result.bound <= result.objective


@pytest.mark.parametrize("suffix", (".mps", ".lp"))
def test_export_reads_back(tmp_path, suffix):
    import highspy

    instance = p1_instance(hand_chain(), budget=4)
    path = export_model(instance, tmp_path / f"chain{suffix}")
    columns = build_model(instance).model.num_cols
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    assert h.getNumCol() == columns + 1  # the objective constant, a column fixed at 1
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(23)
    if suffix == ".mps":
        import pulp

        variables, _problem = pulp.LpProblem.fromMPS(str(path))
        assert len(variables) == columns + 1


def test_export_option_and_bad_suffix(tmp_path):
    instance = p1_instance(hand_chain(), budget=4)
    result = solve_milp(instance, export=tmp_path / "m.mps")
    assert (tmp_path / "m.mps").stat().st_size > 0 and result.objective == 23
    with pytest.raises(MonetError, match=r"\.mps or \.lp"):
        export_model(instance, tmp_path / "m.txt")


def test_options_are_checked():
    instance = p1_instance(hand_chain(), budget=4)
    with pytest.raises(MonetError, match="unknown option"):
        solve_milp(instance, budgett=3)
    with pytest.raises(MonetError, match="unknown MILP solver"):
        solve_milp(instance, milp_solver="gurobi")
    with pytest.raises(MonetError, match="fixed order"):
        solve_milp(instance, fixed_order=False)
    with pytest.raises(MonetError, match="max_computes"):
        solve_milp(instance, max_computes=0)


def test_hint_and_stats():
    instance = between(random_layered(20, seed=1), 0.6)
    hint = solve_lp_rounding(instance).schedule
    result = solved(instance, hint=hint, time_limit=30)
    assert result.status is Status.OPTIMAL
    stats = result.stats
    assert stats["start"] == "given" and stats["solver"] == "highs"
    assert stats["variables"] == sum(stats["columns"].values())
    assert stats["constraints"] > 0 and stats["lp_bound"] <= result.objective + 1e-6


def test_time_limit_keeps_a_schedule_and_a_bound():
    instance = between(random_layered(30, seed=0), 0.3)
    result = solved(instance, time_limit=4)
    assert result.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert result.bound is not None and result.bound <= result.objective


def test_watched_highs_process(monkeypatch):
    """Large MILPs run in a child process: its result comes back, and a kill keeps the start."""
    from monet_ilp.engines import highs
    from monet_ilp.problems.p1.milp import solve as milp

    monkeypatch.setattr(milp, "WATCHED_NONZEROS", 0)
    done = solved(p1_instance(hand_chain(), budget=4), time_limit=30)
    assert done.status is Status.OPTIMAL and done.objective == 23
    monkeypatch.setattr(highs, "GRACE_S", -1e6)  # kill as soon as the MILP starts
    instance = between(random_layered(30, seed=0), 0.3)
    killed = solved(instance, time_limit=60)
    assert killed.status is Status.FEASIBLE and "killed" in killed.message
    assert killed.stats["start"] and killed.bound <= killed.objective


@pytest.mark.slow
@pytest.mark.parametrize("name, budget", (("vgg16", 0.85), ("gpt2_tiny", 0.7), ("resnet18", 0.8)))
@pytest.mark.parametrize("solver", SOLVERS)
def test_zoo_graphs(name, budget, solver):
    from monet_ilp.graph import zoo

    instance = p1_instance(zoo.MODELS[name](), budget=budget)
    result = solved(instance, time_limit=120, milp_solver=solver)
    assert result.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert result.bound <= result.objective and result.metrics.recomputations > 0
    rounded = solved(instance, "heuristic:lp-round", time_limit=120, milp_solver=solver)
    assert rounded.objective >= result.bound
