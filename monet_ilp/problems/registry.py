"""The backend registry: which backend solves which problem class, with what, exactly over what.

One :class:`BackendSpec` per backend and problem class.  :func:`monet_ilp.solve.solve`
checks a call against it (class, objective, option names) before anything is built,
the batch runner checks a manifest's backends and options against it, and
``monet-ilp backends`` prints it.  ``formulations/README.md`` is the same map with the
mathematics behind each row.

A backend is named by ``"module:function"`` and imported when first used: the solver
libraries are heavy, and a listing must not load them.  Adding a problem class is a
folder under ``monet_ilp/problems/`` plus its rows here; adding a backend is its module
plus one row per class it solves.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.instance import Objective, Problem

if TYPE_CHECKING:
    from monet_ilp.results import BackendResult

__all__ = ["BACKENDS", "Backend", "BackendSpec", "check_call", "find", "names", "options_of",
           "register", "specs", "unregister"]

Backend = Callable[..., "BackendResult"]

_P1_CHECKMATE = "Checkmate's stage form: fixed order of first computations"


@dataclass(frozen=True)
class BackendSpec:
    """What one backend does for one problem class.

    ``exact_over`` is the class of schedules over which an ``optimal`` status is a
    proof and a bound holds; ``None`` marks a heuristic, which proves nothing and whose
    schedule that breaks the instance is reported ``infeasible`` rather than ``error``.
    ``options`` are the keyword options it takes beyond ``time_limit``, ``workers`` and
    ``hint``; ``None`` means it declares none and takes any (plugins).
    """

    name: str
    problem: Problem
    target: str | Callable[[], Backend]
    objectives: tuple[Objective, ...]
    options: tuple[str, ...] | None
    exact_over: str | None
    model: str

    @property
    def heuristic(self) -> bool:
        return self.exact_over is None

    def load(self) -> Backend:
        """The backend function (importing its module the first time)."""
        if callable(self.target):
            return self.target()
        module, _, attr = self.target.partition(":")
        backend: Backend = getattr(importlib.import_module(module), attr)
        return backend


_ALL = tuple(Objective)
_P1_OBJECTIVES = (Objective.COMPUTE, Objective.LATENCY)
_P2_OBJECTIVES = (Objective.COMPUTE, Objective.LATENCY, Objective.ENERGY)
_P3_OBJECTIVES = (Objective.LATENCY, Objective.ENERGY, Objective.WEIGHTED)

_P1_CPSAT_OPTIONS = ("encoding", "max_computes", "fixed_order", "passes", "use_baseline_hint",
                     "warm_start", "log", "seed", "params")
_P1_MILP_OPTIONS = ("milp_solver", "max_computes", "fixed_order", "export", "lp_bound", "warm_start", "log")
_P2_CPSAT_OPTIONS = ("max_computes", "max_prefetches", "fixed_order", "staged", "offload_inputs",
                     "allow_offload", "allow_recompute", "use_baseline_hint", "log", "seed", "params")
_P2_MILP_OPTIONS = ("milp_solver", "max_computes", "max_prefetches", "fixed_order", "offload_inputs",
                    "allow_offload", "allow_recompute", "use_baseline_hint", "log", "export")
_P3_CPSAT_OPTIONS = ("max_computes", "max_transfers", "colocate", "allow_recompute", "allow_offload",
                     "allow_pin", "use_baseline_hint", "log", "seed", "params")
_P3_MILP_OPTIONS = ("milp_solver", "max_computes", "max_transfers", "colocate", "allow_recompute",
                    "allow_offload", "allow_pin", "export", "msg")

# Written out here (the registry imports no backend module): the backends check the same lists.
_P1_INTERVAL_OPTIONS = ("max_computes", "fixed_order", "tight_ends", "use_baseline_hint", "log", "seed",
                        "params")
_P1_LNS_OPTIONS = ("max_computes", "window", "slack", "step_time", "steps", "anneal", "log", "seed", "params")
_P1_AUTO_OPTIONS = ("max_computes", "members", "all_bound", "seed", "log")
_P3_LNS_OPTIONS = ("step_time", "size", "steps", "seed", "max_computes", "max_transfers", "log")

_K3 = "class P3.K3: at most max_computes runs per op, max_transfers per tensor, colocate"

#: The built-in backends, one row per (backend, problem class).
BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec("cpsat", Problem.P1, "monet_ilp.problems.p1.cpsat:solve_cpsat", _P1_OBJECTIVES,
                _P1_CPSAT_OPTIONS, "stage form with `passes` passes (fixed order by default)",
                "formulations/p1_cpsat.md"),
    BackendSpec("milp", Problem.P1, "monet_ilp.problems.p1.milp:solve_milp", _P1_OBJECTIVES,
                _P1_MILP_OPTIONS, _P1_CHECKMATE, "formulations/p1_milp.md"),
    BackendSpec("dp", Problem.P1, "monet_ilp.problems.p1.dp:solve_dp", _P1_OBJECTIVES,
                ("max_computes", "fixed_order", "max_table_bytes"),
                "stack schedules of a training chain (chains only)", "formulations/dp.md"),
    BackendSpec("torch_checkpoint", Problem.P1, "monet_ilp.problems.p1.torch_class:solve_torch_class",
                (Objective.COMPUTE,), ("regions",),
                "class TC: torch.utils.checkpoint around disjoint modules of the graph",
                "formulations/torch_checkpoint.md"),
    BackendSpec("heuristic:lp-round", Problem.P1, "monet_ilp.problems.p1.milp:solve_lp_rounding",
                _P1_OBJECTIVES, _P1_MILP_OPTIONS + ("samples", "seed", "thresholds", "budget_fractions"),
                None, "formulations/p1_milp.md"),
    BackendSpec("cpsat", Problem.P2, "monet_ilp.problems.p2.cpsat:solve_p2_cpsat", _P2_OBJECTIVES,
                _P2_CPSAT_OPTIONS, "max_computes, max_prefetches, one offload per item "
                "(staged=True: the MILP's stage class)", "formulations/p2_cpsat.md"),
    BackendSpec("milp", Problem.P2, "monet_ilp.problems.p2.milp:solve_p2_milp", _P2_OBJECTIVES,
                _P2_MILP_OPTIONS, "the stage class", "formulations/p2_milp.md"),
    BackendSpec("cpsat", Problem.P3, "monet_ilp.problems.p3.cpsat:solve_p3_cpsat", _P3_OBJECTIVES,
                _P3_CPSAT_OPTIONS, _K3, "formulations/p3_cpsat.md"),
    BackendSpec("milp", Problem.P3, "monet_ilp.problems.p3.milp:solve_p3_milp", _P3_OBJECTIVES,
                _P3_MILP_OPTIONS, _K3 + " (small instances)", "formulations/p3_milp.md"),
    *(BackendSpec(f"heuristic:{name}", problem, f"monet_ilp.heuristics.backends:{name}", _ALL, (),
                  None, "monet_ilp/heuristics/")
      for name in ("store_all", "sqrt", "greedy", "memory_aware") for problem in Problem),
    BackendSpec("heuristic:evict", Problem.P1, "monet_ilp.heuristics.backends:evict", _P1_OBJECTIVES,
                (), None, "monet_ilp/heuristics/evict.py"),
    BackendSpec("heuristic:repair", Problem.P1, "monet_ilp.heuristics.backends:repair", _P1_OBJECTIVES,
                (), None, "monet_ilp/heuristics/repair.py"),
    BackendSpec("interval", Problem.P1, "monet_ilp.problems.p1.interval:solve_interval", _P1_OBJECTIVES,
                _P1_INTERVAL_OPTIONS, "sequences with at most max_computes computations per op "
                "(first computations in order, or free with fixed_order=False)",
                "formulations/p1_interval.md"),
    BackendSpec("lns", Problem.P1, "monet_ilp.problems.p1.lns:solve_lns", _P1_OBJECTIVES,
                _P1_LNS_OPTIONS, "proves only what every schedule needs (every op once), or a "
                "window covering the whole plan; searches the interval class",
                "formulations/p1_interval.md"),
    BackendSpec("lns", Problem.P3, "monet_ilp.problems.p3.lns:solve_p3_lns", _P3_OBJECTIVES,
                _P3_LNS_OPTIONS, "proves only the combinatorial bound (every schedule); searches "
                + _K3, "formulations/p3_cpsat.md"),
    # auto: the P1 portfolio; on P2 the CP-SAT model; on P3 CP-SAT, then the LNS on larger graphs.
    BackendSpec("auto", Problem.P1, "monet_ilp.problems.p1.auto:solve_auto", _P1_OBJECTIVES,
                _P1_AUTO_OPTIONS, "the union of its members' classes (stats['bound_class']); "
                "stats['bound_all'] holds for every P1 schedule", "formulations/p1_portfolio.md"),
    BackendSpec("auto", Problem.P2, "monet_ilp.problems.p2.cpsat:solve_p2_cpsat", _P2_OBJECTIVES,
                _P2_CPSAT_OPTIONS, "as cpsat on P2", "formulations/p2_cpsat.md"),
    BackendSpec("auto", Problem.P3, "monet_ilp.problems.p3.auto:solve_p3_auto", _P3_OBJECTIVES,
                _P3_CPSAT_OPTIONS, "as cpsat on P3 (then lns from its schedule on larger graphs): " + _K3,
                "formulations/p3_cpsat.md"),
)

_REGISTRY: dict[tuple[str, Problem], BackendSpec] = {(s.name, s.problem): s for s in BACKENDS}


def register(spec: BackendSpec) -> None:
    """Add (or replace) a row: a plugin backend, or a new problem class's backend."""
    _REGISTRY[(spec.name, spec.problem)] = spec


def unregister(name: str) -> None:
    """Drop every row of ``name`` (a plugin that is no longer wanted)."""
    for key in [k for k in _REGISTRY if k[0] == name]:
        del _REGISTRY[key]


def specs(name: str | None = None, problem: Problem | None = None) -> list[BackendSpec]:
    """The rows, in registry order, optionally for one backend name and/or one class."""
    return [s for s in _REGISTRY.values()
            if (name is None or s.name == name) and (problem is None or s.problem is problem)]


def names() -> tuple[str, ...]:
    """Every backend name, sorted."""
    return tuple(sorted({name for name, _ in _REGISTRY}))


def options_of(name: str) -> tuple[str, ...] | None:
    """The options ``name`` takes on any class (``None``: it declares none and takes any)."""
    found: set[str] = set()
    for spec in specs(name):
        if spec.options is None:
            return None
        found.update(spec.options)
    return tuple(sorted(found))


def find(name: str, problem: Problem) -> BackendSpec:
    """The row for ``name`` on ``problem``; an unknown name or an unsupported class is a user error."""
    if name not in names():
        close = difflib.get_close_matches(name, list(names()), n=1)
        raise MonetError(f"unknown backend {name!r}", field="backend",
                         fix=(f"did you mean {close[0]!r}? " if close else "")
                         + f"use one of: {', '.join(names())} (see `monet-ilp backends`)")
    spec = _REGISTRY.get((name, problem))
    if spec is None:
        others = sorted({s.problem.value for s in specs(name)})
        able = sorted({s.name for s in specs(problem=problem)})
        raise MonetError(f"backend {name!r} does not solve {problem} (it solves {', '.join(others)})",
                         field="backend", fix=f"for {problem} use one of: {', '.join(able)}")
    return spec


def check_call(spec: BackendSpec, objective: Objective, options: Mapping[str, Any]) -> None:
    """Refuse an objective or an option name the backend does not declare, the same way for all.

    Names that start with ``_`` are internal (one backend calling another) and pass.
    """
    if objective not in spec.objectives:
        exact = sorted({s.name for s in specs(problem=spec.problem)
                        if objective in s.objectives and not s.heuristic})
        elsewhere = sorted({s.problem.value for s in specs(spec.name) if objective in s.objectives})
        fix = f"use the {' or '.join(spec.objectives)} objective"
        if exact:
            fix += f", or backend {' or '.join(exact)}"
        elif elsewhere:
            fix += f", or a {'/'.join(elsewhere)} instance (where {spec.name!r} minimises {objective})"
        raise MonetError(f"backend {spec.name!r} on {spec.problem} does not minimise the {objective} "
                         f"objective (it minimises {', '.join(spec.objectives)})", field="objective", fix=fix)
    if spec.options is None:
        return
    unknown = sorted(k for k in options if not k.startswith("_") and k not in spec.options)
    if unknown:
        raise MonetError(unknown_option_message(spec.name, spec.problem, unknown), field=unknown[0],
                         fix=option_fix(spec.options))


def unknown_option_message(name: str, problem: Problem | None, unknown: Iterable[str]) -> str:
    """The one wording of an unknown option, wherever it is caught."""
    listed = ", ".join(repr(k) for k in unknown)
    where = f" on {problem}" if problem is not None else ""
    return f"backend {name!r}{where} has no option {listed}"


def option_fix(known: Iterable[str]) -> str:
    known = sorted(known)
    if not known:
        return "it takes no options; drop them (see `monet-ilp backends`)"
    return f"its options are: {', '.join(known)} (see `monet-ilp backends`)"
