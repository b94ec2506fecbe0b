"""Checkpointing plans applied to real PyTorch training steps, predicted against measured.

For each model and budget (0.7, 0.5, 0.3 of the store-all peak) this solves which
modules to checkpoint (``monet_ilp.torch.checkpoint``: class TC of
``formulations/torch_checkpoint.md``, and P1 over every schedule beside it), applies the
plan to a copy of the model, and runs one training step on CPU (forward, cross-entropy,
backward) with and without it, measuring:

* the peak of live memory other than parameters, their gradients and optimizer state:
  the time-wise peak of the categories INPUT + TEMPORARY + ACTIVATION + AUTOGRAD_DETAIL
  of PyTorch's memory-profiler timeline (``torch.profiler`` with ``profile_memory``).
  This is what P1 counts (activations, their gradients and the inputs); it sees what a
  non-reentrant checkpoint holds and recomputes (its recomputed tensors are
  AUTOGRAD_DETAIL), where saved-tensor hooks alone would miss them. The model's buffers
  (batch norm's running statistics), which the profiler files under INPUT, are left out:
  they are state, like the parameters;
* the step time (the median of five steps);
* the FLOPs recomputed: ``torch.utils.flop_counter`` over the step with the plan, less
  the same without it.

Models: the zoo's MLP and ResNet-18 (CIFAR) twins, twins of torchvision's MobileNetV2 and of
timm's ViT, transformers' GPT-2 and a Llama-style decoder (four layers each, random
weights; exported by the dynamo exporter, as TorchScript's fails on them). torchvision's
own models need the ``vision`` extra's torch build; they are skipped, and said so,
without it.

    python scripts/bench_torch_checkpoint.py [--models mlp,gpt2-hf] [--budgets 0.7,0.5,0.3] [--time-limit 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fidelity_torch as ft
import torch
from rich.console import Console
from rich.table import Table
from torch import nn

from monet_ilp.errors import MonetError
from monet_ilp.torch import checkpoint, live_peak_bytes

MODELS = ("mlp", "resnet18", "mobilenet_v2", "vit", "gpt2-hf", "llama-hf", "resnet18-tv", "mobilenet_v2-tv")
BUDGETS = (0.7, 0.5, 0.3)


def make_case(name: str) -> ft.TorchCase | None:
    """The model of ``name`` with one batch; None when its library is missing."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if name == "mlp":
        model: nn.Module = ft.MLP(8, 256, 256, 10)
        return ft.TorchCase(name, model.train(), torch.randn(64, 256, generator=gen),
                            torch.randint(0, 10, (64,), generator=gen))
    if name == "resnet18":
        return ft.TorchCase(name, ft.ResNet18Cifar(10).train(), torch.randn(8, 3, 32, 32, generator=gen),
                            torch.randint(0, 10, (8,), generator=gen))
    if name == "mobilenet_v2":
        return ft.TorchCase(name, ft.MobileNetV2(10).train(), torch.randn(4, 3, 64, 64, generator=gen),
                            torch.randint(0, 10, (4,), generator=gen))
    if name == "vit":
        return ft.TorchCase(name, ft.ViT(32, 4, 64, 4, 4, 10).train(), torch.randn(8, 3, 32, 32, generator=gen),
                            torch.randint(0, 10, (8,), generator=gen))
    if name.endswith("-tv"):
        try:
            import torchvision
        except Exception:  # noqa: BLE001 (an absent or broken build: torchvision::nms with the CPU wheel)
            return None
        net = getattr(torchvision.models, name.removesuffix("-tv"))(num_classes=10)
        return ft.TorchCase(name, net.train(), torch.randn(4, 3, 64, 64, generator=gen),
                            torch.randint(0, 10, (4,), generator=gen))
    import transformers as hf

    small = {"vocab_size": 256, "attn_implementation": "eager"}
    if name == "gpt2-hf":
        lm: nn.Module = hf.GPT2LMHeadModel(hf.GPT2Config(n_layer=4, n_embd=128, n_head=4, n_positions=64,
                                                       bos_token_id=0, eos_token_id=0, **small))
    else:
        lm = hf.LlamaForCausalLM(hf.LlamaConfig(num_hidden_layers=4, hidden_size=128, num_attention_heads=4,
                                                num_key_value_heads=2, intermediate_size=256,
                                                max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
                                                **small))
    ids = torch.randint(0, 256, (4, 32), generator=gen)
    return ft.TorchCase(name, ft.LogitsOf(lm, decoder=True).float().train(), ids,
                        torch.randint(0, 256, (4, 32), generator=gen))


def step(case: ft.TorchCase, model: nn.Module) -> None:
    model.zero_grad(set_to_none=True)
    case.loss(model(case.inputs)).backward()


def live_peak(case: ft.TorchCase, model: nn.Module) -> int:
    """The time-wise peak of INPUT + TEMPORARY + ACTIVATION + AUTOGRAD_DETAIL over one step, buffers left out."""
    step(case, model)  # the gradients exist before the measured step, as in a training loop
    return live_peak_bytes(lambda: step(case, model), model=model)


def step_flops(case: ft.TorchCase, model: nn.Module) -> int:
    counter = ft.flop_counter()
    with counter:
        step(case, model)
    return int(counter.get_total_flops())


def step_seconds(case: ft.TorchCase, model: nn.Module, repeats: int = 5) -> float:
    step(case, model)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(case, model)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--out", default="results/bench_torch_checkpoint.json")
    args = parser.parse_args()
    torch.set_num_threads(2)
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        case = make_case(name)
        if case is None:
            print(f"{name}: skipped (torchvision is not importable with this torch build; the vision extra has it)")
            rows.append({"model": name, "skipped": "torchvision not importable"})
            continue
        base = {"peak": live_peak(case, case.model), "flops": step_flops(case, case.model),
                "seconds": step_seconds(case, case.model)}
        for budget in (float(b) for b in args.budgets.split(",")):
            row: dict[str, Any] = {"model": name, "budget": budget, "store_all_measured_peak": base["peak"],
                                   "store_all_seconds": base["seconds"]}
            try:
                wrapped, plan = checkpoint(case.model, (case.inputs,), budget, time_limit=args.time_limit)
            except MonetError as err:
                row["error"] = str(err)
                rows.append(row)
                print(f"{name} @ {budget}: {err}", flush=True)
                continue
            measured = {"peak": live_peak(case, wrapped), "flops": step_flops(case, wrapped),
                        "seconds": step_seconds(case, wrapped)}
            recomputed = measured["flops"] - base["flops"]
            row.update(plan=plan.to_dict(), measured_peak=measured["peak"], measured_recompute_flops=recomputed,
                       seconds=measured["seconds"],
                       peak_error=(measured["peak"] - plan.predicted_peak_bytes) / plan.predicted_peak_bytes,
                       flops_error=(None if not plan.predicted_recompute_flops else
                                    (recomputed - plan.predicted_recompute_flops) / plan.predicted_recompute_flops),
                       within_budget=measured["peak"] <= plan.budget_bytes)
            rows.append(row)
            print(f"{name} @ {budget}: {plan.checkpointed} predicted {plan.predicted_peak_bytes} measured "
                  f"{measured['peak']} (budget {plan.budget_bytes}); recompute flops predicted "
                  f"{plan.predicted_recompute_flops} measured {recomputed}", flush=True)
    table = Table(title="checkpointing plans in a real training step (CPU)")
    for col in ("model", "budget", "checkpointed", "peak predicted", "peak measured", "err", "<= budget",
                "recompute FLOPs pred.", "measured", "err", "step s (store-all)", "TC cycles (bound)",
                "P1 cycles (bound)"):
        table.add_column(col, justify="left" if col in ("model", "checkpointed") else "right")
    for r in rows:
        if "plan" not in r:
            table.add_row(r["model"], str(r.get("budget", "-")), r.get("skipped") or r.get("error", "")[:60],
                          *["-"] * 10)
            continue
        p = r["plan"]
        table.add_row(
            r["model"], f"{r['budget']:g}", " ".join(p["checkpointed"]) or "(none)", f"{p['predicted_peak_bytes']:,}",
            f"{r['measured_peak']:,}", f"{100 * r['peak_error']:+.2f} %", "yes" if r["within_budget"] else "NO",
            f"{p['predicted_recompute_flops']:,}", f"{r['measured_recompute_flops']:,}",
            "-" if r["flops_error"] is None else f"{100 * r['flops_error']:+.2f} %",
            f"{r['seconds']:.4f} ({r['store_all_seconds']:.4f})",
            f"{p['compute_cycles']:,} ({p['bound_cycles']:,.0f})",
            f"{p['unrestricted_cycles'] or 0:,} ({p['unrestricted_bound'] or 0:,.0f})")
    Console(width=250).print(table)
    write_rows(rows, args.out)


def write_rows(rows: list[dict[str, Any]], path: str) -> None:
    """The benchmark's rows as JSON at ``path``, its folder made."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
