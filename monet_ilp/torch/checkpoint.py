"""``monet_ilp.torch.checkpoint``: solve which modules of a PyTorch model to checkpoint, and apply it.

``formulations/torch_checkpoint.md`` (class TC).  The model is exported with the
project's exporter (TorchScript, whose node names carry the module paths, or dynamo, its
nodes then named by their module scopes), imported at
op granularity, solved over TC with the ``torch_checkpoint`` backend and over every P1
schedule with ``auto``, and the chosen modules of a copy of the model (or the model
itself) run under ``torch.utils.checkpoint`` (non-reentrant).  A plain training loop
runs the result unchanged.  Needs the optional ``torch`` extra.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import tempfile
import warnings
from collections.abc import Sequence as Seq
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.load import load_graph
from monet_ilp.graph.torch_export import export_for_training
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.torch_class import SELECTIVE, TC_CLASS, region_sequence, regions_of
from monet_ilp.results import Status
from monet_ilp.schedule import Compute, Sequence
from monet_ilp.solve import solve

if TYPE_CHECKING:
    import torch

    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.problems.p1.torch_class import Region

__all__ = ["TorchPlan", "apply_plan", "checkpoint", "wrappable_regions"]


@dataclass(frozen=True)
class TorchPlan:
    """What :func:`checkpoint` chose and predicts (TC.K2, TC.K5); sizes in bytes, costs in P1 cycles."""

    checkpointed: tuple[str, ...]
    status: str  # over TC: optimal, feasible (a bound below), ...
    budget_bytes: int
    store_all_peak_bytes: int
    predicted_peak_bytes: int
    predicted_recompute_flops: int  # 2 x the recomputed ops' MACs (torch.utils.flop_counter's convention)
    recompute_cycles: int  # the plan's compute cycles beyond store-all's
    bound_cycles: float | None  # over TC
    compute_cycles: int
    # P1's auto on the same bytes: its models free an op's outputs together (Checkmate's
    # convention), so its optimum is over that class and its bound holds for that class only
    unrestricted_status: str | None = None
    unrestricted_cycles: int | float | None = None
    unrestricted_bound: int | float | None = None
    holds_for: str = TC_CLASS
    graph: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["checkpointed"] = list(self.checkpointed)
        return out

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")


def wrappable_regions(model: torch.nn.Module, regions: Seq[Region]) -> list[str]:
    """TC.K1: the regions of ``regions`` that :func:`apply_plan` can wrap in ``model``: every
    module, and runs of an ``nn.Sequential``'s children."""
    import torch

    out = []
    for r in regions:
        parent, bracket, _ = r.path.removesuffix(SELECTIVE).partition("[")
        try:
            module = model if parent == "" else model.get_submodule(parent)
        except AttributeError:
            continue
        if not bracket or isinstance(module, torch.nn.Sequential):
            out.append(r.path)
    return out


#: What selective checkpointing saves (TC.K7): the outputs of matrix products and convolutions.
_SAVED_OPS = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention_for_cpu",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention")


def _save_products(_ctx: Any, op: Any, *_args: Any, **_kwargs: Any) -> Any:
    from torch.utils.checkpoint import CheckpointPolicy

    name = getattr(op, "_overloadpacket", op).__name__
    return CheckpointPolicy.MUST_SAVE if name in _SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _checkpointed(fn: Any, *args: Any, selective: bool = False, **kwargs: Any) -> Any:
    from torch.utils.checkpoint import checkpoint as run
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    if selective:
        return run(fn, *args, use_reentrant=False,
                   context_fn=functools.partial(create_selective_checkpoint_contexts, _save_products), **kwargs)
    return run(fn, *args, use_reentrant=False, **kwargs)


def _run_children(children: list[Any], x: Any) -> Any:
    for child in children:
        x = child(x)
    return x


def _sequential_forward(children: list[Any], runs: dict[int, tuple[int, bool]], x: Any) -> Any:
    i = 0
    while i < len(children):
        if i in runs:
            j, selective = runs[i]
            x = _checkpointed(functools.partial(_run_children, children[i:j + 1]), x, selective=selective)
            i = j + 1
        else:
            x = children[i](x)
            i += 1
    return x


def apply_plan(model: torch.nn.Module, checkpointed: Seq[str]) -> torch.nn.Module:
    """Run the modules (and runs of children) ``checkpointed`` names under ``torch.utils.checkpoint``, in place.

    A module's ``forward`` becomes a non-reentrant checkpoint of the original; a run
    ``parent[a..b]`` of an ``nn.Sequential`` makes the parent's ``forward`` run those
    children under one checkpoint; a name ending ``@mm`` is checkpointed selectively (TC.K7:
    ``create_selective_checkpoint_contexts`` saving the outputs of matrix products and
    convolutions).  Parameter names and the state dict do not change.
    """
    import torch

    runs: dict[str, dict[int, tuple[int, bool]]] = {}
    for name in checkpointed:
        path = name.removesuffix(SELECTIVE)
        selective = path != name  # TC.K7: save the matrix products' outputs, rerun the rest
        parent, bracket, rest = path.partition("[")
        if bracket:
            first, _, last = rest.rstrip("]").partition("..")
            container = model if parent == "" else model.get_submodule(parent)
            if not isinstance(container, torch.nn.Sequential):
                raise MonetError(f"{parent or 'the model'} is not an nn.Sequential: cannot checkpoint {path}",
                                 field="checkpointed", fix="checkpoint whole modules there")
            names = list(container._modules)  # noqa: SLF001 (torch's own child order)
            runs.setdefault(parent, {})[names.index(first)] = (names.index(last), selective)
            continue
        module = model.get_submodule(path)
        module.forward = functools.partial(_checkpointed, module.forward, selective=selective)
    for parent, spans in runs.items():
        container = model if parent == "" else model.get_submodule(parent)
        children = list(container.children())
        container.forward = functools.partial(_sequential_forward, children, spans)
    return model


def _recompute_flops(graph: TrainingGraph, sequence: Sequence) -> int:
    runs: dict[str, int] = {}
    for step in sequence.steps:
        if isinstance(step, Compute):
            runs[step.op] = runs.get(step.op, 0) + 1
    return sum(2 * graph.op(op).macs * (n - 1) for op, n in runs.items())


def _scope_names(path: Path) -> None:
    """Name each node of a dynamo export by its module path, as TorchScript names them (TC.K1).

    The dynamo exporter names a node ``node_linear_3`` and keeps its module scopes in the
    node's metadata ``pkg.torch.onnx.name_scopes`` (``['', 'm', 'm.h.0', 'm.h.0.mlp',
    'linear_3']``: the model, each enclosing module's path, then the op); the node becomes
    ``/m/m.h.0/m.h.0.mlp/node_linear_3``.
    """
    import ast

    import onnx

    model = onnx.load(str(path), load_external_data=False)
    for node in model.graph.node:
        scopes = next((ast.literal_eval(p.value) for p in node.metadata_props
                       if p.key == "pkg.torch.onnx.name_scopes"), None)
        if scopes:
            node.name = "/" + "/".join([s for s in scopes[:-1] if s] + [node.name])
    onnx.save(model, str(path))


def _as_torch_runs(graph: TrainingGraph) -> TrainingGraph:
    """TC.K2: what torch's autograd holds that the graph does not show.

    * Its cross-entropy backward runs in two steps, ``nll_loss``'s making the
      log-probabilities' gradient, then ``log_softmax``'s the logits': the first, as large
      as the logits, lives while the second is made.  It becomes a second output of the
      loss's backward that nothing reads (freed as soon as it is made).
    * A weight used twice (a language model's head tied to its embedding) gets its gradient
      in parts; autograd holds the early parts in the weight's input buffer until the last
      arrives, as activation-like memory, not as the weight's ``.grad``.  Every part but the
      last made becomes such a tensor, held to the update.
    """
    from monet_ilp.graph.ir import TrainingGraph

    data = graph.to_dict()
    tensors = {t["id"]: t for t in data["tensors"]}
    position = {op["id"]: i for i, op in enumerate(data["ops"])}
    saved = tensors.get("loss.log_probs")
    backward = next((op for op in data["ops"] if op["id"] == "dX:loss"), None)
    if saved is not None and backward is not None:
        grad = {**saved, "id": "grad(loss.log_probs)", "kind": "activation_grad", "producer": "dX:loss",
                "consumers": []}
        data["tensors"].append(grad)
        backward["outputs"] = [*backward["outputs"], grad["id"]]
    for op in data["ops"]:
        if op["kind"] != "optimizer":
            continue
        parts = sorted((t for t in op["inputs"] if tensors[t]["kind"] == "weight_grad" and tensors[t].get("producer")),
                       key=lambda t: position[tensors[t]["producer"]])
        for t in parts[:-1]:
            tensors[t]["kind"] = "activation_grad"
    return TrainingGraph.from_dict(data)


def export_graph(model: torch.nn.Module, example_inputs: Seq[Any], directory: str | Path) -> TrainingGraph:
    """The model's training graph at op granularity, through the project's exporter.

    TorchScript first (its node names carry the module paths); where it fails (transformers'
    decoders: ``aten::diff``) the dynamo exporter, its nodes named by their module scopes.
    Dropout saves what torch saves on the model's device: the scaled noise on CPU, a
    one-byte mask where the fused kernel runs (``from_onnx``'s ``dropout_mask``).
    """
    path = Path(directory) / "model.onnx"
    device = next((p.device.type for p in model.parameters()), "cpu")
    errors = []
    for exporter in ("torchscript", "dynamo"):
        try:
            with warnings.catch_warnings():  # the exporters' notes on buffers and inlining are torch's, not the user's
                warnings.simplefilter("ignore")
                export_for_training(model, tuple(example_inputs), path, exporter=exporter)
        except MonetError:
            raise
        except Exception as err:  # noqa: BLE001 (the exporters raise any of torch's exception types)
            errors.append(f"{exporter}: {type(err).__name__}: {_first_line(err)}")
            continue
        if exporter == "dynamo":
            _scope_names(path)
        return _as_torch_runs(
            load_graph("onnx", path, granularity="op", dropout_mask="noise" if device == "cpu" else "bool"))
    raise MonetError(f"the model does not export to ONNX ({'; '.join(errors)})", field="model",
                     fix="check that the model runs on the example inputs, with static shapes, no data-dependent "
                         "control flow, and tensors (not dicts or caches) as its output")


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    for line in text.splitlines():  # the dynamo exporter's message opens with its summary lines
        if line.strip() and not line.startswith("Failed to export"):
            return line.strip()[:200]
    return text[:200]


def checkpoint(model: torch.nn.Module, example_inputs: Seq[Any], budget: float | int = 0.5, *,
               time_limit: float = 60.0, unrestricted: bool = True, in_place: bool = False
               ) -> tuple[torch.nn.Module, TorchPlan]:
    """Checkpoint ``model`` so that its saved activations fit ``budget``, at the least recomputation PyTorch allows.

    Parameters
    ----------
    model
        The model; a copy is wrapped unless ``in_place``.
    example_inputs
        Its inputs for one training step (their shapes are the plan's).
    budget
        A fraction of the store-all peak (``0.5``; each tensor freed after its last reader, as
        torch frees it) or bytes (an int).
    time_limit
        Seconds for each solve (over TC, and over every P1 schedule when ``unrestricted``).

    Returns
    -------
    (model, TorchPlan)
        The checkpointed model and the plan: the modules, the predicted peak and
        recomputed FLOPs, the bound over TC and the optimum or bound over every P1 schedule.

    Raises
    ------
    MonetError
        The model does not export, or no set of checkpointed modules fits the budget (the
        message says the least budget the class can meet).
    """
    with tempfile.TemporaryDirectory() as tmp:
        graph = export_graph(model, example_inputs, tmp)
    allowed = wrappable_regions(model, regions_of(graph))
    # TC.K2: the store-all peak with each tensor freed on its own, as torch frees it (P1's
    # own budget fractions are of its node-level store-all peak, which is larger).
    store_all = int(region_sequence(p1_instance(graph, 1.0), []).meta["peak_bytes"])
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise MonetError(f"budget = {budget!r}", field="budget",
                         fix="give a fraction of the store-all peak (0.5) or a byte count")
    budget_bytes = int(budget) if isinstance(budget, int) else int(budget * store_all)
    instance = p1_instance(graph, budget_bytes, name=graph.name)
    result = solve(instance, "torch_checkpoint", time_limit=time_limit, regions=allowed)
    if result.status is Status.INFEASIBLE:
        least = int(result.stats.get("least_peak_bytes", 0))
        share = least / store_all if store_all else 0.0
        raise MonetError(f"no set of checkpointed modules fits {instance.budget_bytes:,} bytes; the least "
                         f"PyTorch's checkpointing can reach here is {least:,} bytes ({share:.3f} of the store-all "
                         f"peak of {store_all:,})", field="budget",
                         fix=f"give a budget of at least {math.ceil(share * 1000) / 1000:g}")
    if result.schedule is None or not isinstance(result.schedule, Sequence) or result.objective is None:
        raise MonetError(f"no plan within {time_limit:g} s ({result.status}: {result.message})", field="time_limit",
                         fix="give a longer time limit")
    base_cycles = int(region_sequence(instance, []).meta["compute_cycles"])
    free = solve(instance, "auto", time_limit=time_limit) if unrestricted else None
    metrics = result.metrics
    plan = TorchPlan(
        checkpointed=tuple(result.stats.get("checkpointed", ())), status=str(result.status),
        budget_bytes=instance.budget_bytes, store_all_peak_bytes=store_all,
        predicted_peak_bytes=0 if metrics is None else max(metrics.peak_bytes.values(), default=0),
        predicted_recompute_flops=_recompute_flops(graph, result.schedule),
        recompute_cycles=int(result.objective) - base_cycles, bound_cycles=result.bound,
        compute_cycles=int(result.objective),
        unrestricted_status=None if free is None else str(free.status),
        unrestricted_cycles=None if free is None else free.objective,
        unrestricted_bound=None if free is None else free.bound, graph=graph.name,
        extra={"regions_allowed": len(allowed), "rounds": result.stats.get("rounds"),
               "unrestricted_class": "P1 auto's: an op's outputs freed together (Checkmate's convention), so "
                                     "its optimum and bound hold for that class, not for torch's per-tensor frees "
                                     "(TC.K5)"})
    target = model if in_place else copy.deepcopy(model)
    return apply_plan(target, plan.checkpointed), plan
