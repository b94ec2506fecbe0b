"""monet-ilp's checkpointing plans beside PyTorch's own memory-budget partitioner, in real CPU steps.

PyTorch's answer to "fit the activations in a budget" is AOTAutograd's min-cut
partitioner under ``torch.compile`` with ``torch._functorch.config.activation_memory_budget``
(a fraction: 1.0 is its default saved set, 0.0 saves the inputs alone, and in between a
knapsack over what it may recompute, runtime estimated by FLOPs).  It runs here through
the ``aot_eager_decomp_partition`` pipeline (inductor's decompositions, the min-cut
partitioner, the graphs run eagerly by torch), which needs no compiler; the graphs are
kept so the FLOPs they run can be counted inside them (``FlopCounterMode`` around a
compiled call makes dynamo fall back to eager).

Both tools are measured the same way, in one training step on this machine:

* ``held``: the bytes still live when the forward pass and the loss have returned, less
  those live before (what the step holds for its backward), from the memory profiler's
  timeline summed over every category (under compile its categories are not reliable:
  saved tensors land in INPUT and TEMPORARY);
* ``peak``: the step's peak of memory above what it started with, its gradients already
  allocated (zeroed in place, as a training loop's ``zero_grad(set_to_none=False)``), the
  same timeline: the peak of everything but parameters, gradients and optimizer state;
* ``recomputed``: the step's FLOPs less the FLOPs of the plain eager step
  (``torch.utils.flop_counter``; the CPU flash-attention kernels, which it has no formula
  for, counted by the standard SDPA formulas);
* the step time (median of 5 steps; noisy on 2 cores).

monet-ilp's plans are those of ``monet_ilp.torch.checkpoint`` (class TC: modules under
``torch.utils.checkpoint``) at budgets of 0.7, 0.5 and 0.3 of its store-all peak; the
partitioner is swept over its own budget. A plan is *dominated* on a measure (the step
peak, or what is held for the backward) when a partitioner point reaches no more on it
with fewer recomputed FLOPs.  The two can disagree: a compiled backward graph returns
every weight gradient at once, so its step peak carries all of them whatever the budget,
while its held bytes profit from recomputing any op, not whole modules.

    python scripts/compare_torch_partitioner.py [--models mlp,vit] [--out results/compare_torch_partitioner.json]
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import sys
import time
from importlib import import_module
from pathlib import Path
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no pool of compile workers stealing the 2 cores

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_torch_checkpoint as bench
import numpy as np
import torch
import torch._dynamo
import torch._functorch.config as functorch_config
from rich.console import Console
from rich.table import Table
from torch.utils import flop_counter

from monet_ilp.errors import MonetError
from monet_ilp.torch import checkpoint

OUR_BUDGETS = (0.7, 0.5, 0.3)
TORCH_BUDGETS = (1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0)


def _register_cpu_sdpa_flops() -> None:
    aten = torch.ops.aten
    if aten._scaled_dot_product_flash_attention_for_cpu in flop_counter.flop_registry:  # noqa: SLF001 (torch's own hooks, no public name)
        return

    @flop_counter.register_flop_formula(aten._scaled_dot_product_flash_attention_for_cpu)  # noqa: SLF001 (torch's own hooks, no public name)
    def _forward(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return flop_counter.sdpa_flop_count(q, k, v)

    @flop_counter.register_flop_formula(aten._scaled_dot_product_flash_attention_for_cpu_backward)  # noqa: SLF001 (torch's own hooks, no public name)
    def _backward(grad: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return flop_counter.sdpa_backward_flop_count(grad, q, k, v)


class Graphs:
    """The partitioned forward and backward graphs, run by torch, FLOPs counted inside them."""

    def __init__(self) -> None:
        self.counting = False
        self.flops = 0

    def compiler(self, gm: torch.fx.GraphModule, _inputs: Any) -> Any:
        from torch.fx.graph import _BoxedCodeGen

        gm.graph.set_codegen(_BoxedCodeGen())  # boxed: each saved tensor freed after its last use
        gm.recompile()
        forward = gm.forward

        def run(args: list[Any]) -> Any:
            if not self.counting:
                return forward(args)
            with flop_counter.FlopCounterMode(display=False) as counter:
                out = forward(args)
            self.flops += counter.get_total_flops()
            return out

        run._boxed_call = True  # type: ignore[attr-defined]  # noqa: SLF001 (torch's own hooks, no public name)
        return run

    def backend(self, gm: torch.fx.GraphModule, inputs: Any) -> Any:
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        with functorch_config.patch(unlift_effect_tokens=True):
            return aot_autograd(
                fw_compiler=self.compiler, bw_compiler=self.compiler,
                decompositions=lambda: import_module("torch._inductor.compile_fx").select_decomp_table(),
                partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
            )(gm, inputs)


def _timeline(fn: Any) -> tuple[Any, np.ndarray]:
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        out = fn()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cpu")  # noqa: SLF001
    return out, np.array(sizes).sum(axis=1)


def measure(model: torch.nn.Module, run: Any, case: Any, count_flops: Any) -> dict[str, Any]:
    """held, peak, FLOPs and step time of ``run`` (the model, plain or compiled) on ``case``."""
    def clear() -> None:
        for p in model.parameters():
            p.grad = None
        gc.collect()

    def step() -> None:
        clear()
        case.loss(run(case.inputs)).backward()

    step()  # compiles where it compiles
    flops = count_flops(step)
    clear()
    case.loss(run(case.inputs)).backward()  # the gradients exist before the measured step, as in a loop
    model.zero_grad(set_to_none=False)
    gc.collect()
    _, total = _timeline(lambda: case.loss(run(case.inputs)).backward())
    peak = int(total.max() - total[0])
    clear()
    loss, total = _timeline(lambda: case.loss(run(case.inputs)))
    held = int(total[-1] - total[0])
    loss.backward()
    del loss
    times = []
    for _ in range(6):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"held": held, "peak": peak, "flops": flops, "seconds": statistics.median(times[1:])}


def eager_flops(step: Any) -> int:
    with flop_counter.FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def torch_point(case: Any, budget: float) -> dict[str, Any]:
    torch._dynamo.reset()  # noqa: SLF001 (torch's own hooks, no public name)
    graphs = Graphs()
    with functorch_config.patch(activation_memory_budget=budget, activation_memory_budget_runtime_estimator="flops",
                                enable_autograd_cache=False):
        compiled = torch.compile(case.model, backend=graphs.backend)

        def count(step: Any) -> int:
            graphs.counting, graphs.flops = True, 0
            step()
            graphs.counting = False
            return graphs.flops

        return measure(case.model, compiled, case, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,resnet18,vit")
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--out", default="results/compare_torch_partitioner.json")
    args = parser.parse_args()
    torch.set_num_threads(2)
    _register_cpu_sdpa_flops()
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        case = bench.make_case(name)
        if case is None:
            print(f"{name}: skipped (torchvision is not importable with this torch build)")
            continue
        base = measure(case.model, case.model, case, eager_flops)
        rows.append({"model": name, "tool": "store-all (eager)", "budget": None, **base, "recomputed": 0})
        for budget in OUR_BUDGETS:
            try:
                wrapped, plan = checkpoint(case.model, (case.inputs,), budget, time_limit=args.time_limit,
                                           unrestricted=False)
            except MonetError as err:
                rows.append({"model": name, "tool": "monet-ilp (TC)", "budget": budget, "error": str(err)})
                continue
            m = measure(wrapped, wrapped, case, eager_flops)
            rows.append({"model": name, "tool": "monet-ilp (TC)", "budget": budget, **m,
                         "recomputed": m["flops"] - base["flops"], "checkpointed": list(plan.checkpointed),
                         "predicted_peak_bytes": plan.predicted_peak_bytes})
        for budget in TORCH_BUDGETS:
            m = torch_point(case, budget)
            rows.append({"model": name, "tool": "torch partitioner", "budget": budget, **m,
                         "recomputed": m["flops"] - base["flops"]})
        torch._dynamo.reset()  # noqa: SLF001 (torch's own hooks, no public name)
        print(f"{name}: done", flush=True)
    for r in rows:  # a plan is dominated when a partitioner point reaches no more with less recomputation
        if r["tool"] != "monet-ilp (TC)" or "error" in r:
            continue
        for kind in ("peak", "held"):
            rivals = [q for q in rows if q["model"] == r["model"] and q["tool"] == "torch partitioner"
                      and q[kind] <= r[kind]]
            best = min(rivals, key=lambda q: q["recomputed"], default=None)
            r[f"rival_{kind}"] = None if best is None else {"budget": best["budget"], "recomputed": best["recomputed"]}
            r[f"dominated_{kind}"] = best is not None and best["recomputed"] < r["recomputed"]
    table = Table(title="checkpointing plans beside torch.compile's memory-budget partitioner (one CPU step)")
    for col in ("model", "tool", "budget", "held B", "peak B", "recomputed FLOPs", "step s",
                "torch's least recompute at <= peak (budget)", "dominated", "at <= held (budget)", "dominated"):
        table.add_column(col, justify="left" if col in ("model", "tool") else "right")

    def rival(r: dict[str, Any], kind: str) -> tuple[str, str]:
        if f"rival_{kind}" not in r:
            return "-", "-"
        q = r[f"rival_{kind}"]
        return ("none" if q is None else f"{q['recomputed']:,} ({q['budget']:g})",
                "YES" if r[f"dominated_{kind}"] else "no")

    for r in rows:
        if "error" in r:
            table.add_row(r["model"], r["tool"], f"{r['budget']:g}", r["error"][:70], *["-"] * 7)
            continue
        table.add_row(r["model"], r["tool"], "-" if r["budget"] is None else f"{r['budget']:g}", f"{r['held']:,}",
                      f"{r['peak']:,}", f"{r['recomputed']:,}", f"{r['seconds']:.4f}", *rival(r, "peak"),
                      *rival(r, "held"))
    Console(width=220).print(table)
    bench.write_rows(rows, args.out)


if __name__ == "__main__":
    main()
