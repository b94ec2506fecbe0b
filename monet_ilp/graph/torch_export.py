"""Export a PyTorch module to ONNX for :func:`~monet_ilp.graph.onnx_import.from_onnx`, in training mode.

Needs the optional ``torch`` extra (``pip install monet-ilp[torch]``); nothing else in
the package imports it.

ONNX does not say which initializers are trained: a parameter, a buffer (rotary
frequencies, BatchNorm's running statistics) and a constant the exporter folded (a
causal mask) all look alike.  :func:`export_for_training` exports with torch's own
exporter and records the names of the module's parameters that are initializers of
the model in its metadata entry ``monet_ilp.trainable`` (``onnx_import.TRAINABLE_KEY``),
which :func:`~monet_ilp.graph.onnx_import.from_onnx` then follows.  For that the
dynamo exporter runs without its graph optimisation (which folds a transposed weight
into a new, unnamed initializer) and the TorchScript exporter without constant folding.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from monet_ilp.errors import MonetError
from monet_ilp.graph.onnx_import import TRAINABLE_KEY

if TYPE_CHECKING:
    import torch

__all__ = ["EXPORTERS", "export_for_training"]

#: torch's two ONNX exporters.
EXPORTERS = ("dynamo", "torchscript")


def export_for_training(module: torch.nn.Module, args: Sequence[Any], path: str | Path, *,
                        exporter: str = "dynamo", opset: int = 18, external_data: bool = True) -> Path:
    """Export ``module`` called on ``args`` to ``path`` in training mode, trainable names recorded.

    Parameters
    ----------
    module
        The model, in training mode (it is put there).
    args
        Its example inputs (their shapes become the model's static shapes).
    path
        The ``.onnx`` file to write; the dynamo exporter writes the weights to
        ``<path>.data`` next to it when ``external_data``.
    exporter
        ``"dynamo"`` (``torch.export``) or ``"torchscript"`` (tracing).
    opset
        The ONNX opset.

    Returns
    -------
    Path
        ``path``.
    """
    import torch

    if exporter not in EXPORTERS:
        raise MonetError(f"unknown exporter {exporter!r}", field="exporter", fix=f"use one of {', '.join(EXPORTERS)}")
    path = Path(path)
    module.train()
    training = torch.onnx.TrainingMode.TRAINING
    if exporter == "dynamo":
        torch.onnx.export(module, tuple(args), str(path), dynamo=True, opset_version=opset, training=training,
                          optimize=False, external_data=external_data)
    else:
        torch.onnx.export(module, tuple(args), str(path), dynamo=False, opset_version=opset, training=training,
                          do_constant_folding=False)
    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    # Tied weights (a language-model head sharing the embedding) appear under either name.
    trained = sorted(name for name, p in module.named_parameters(remove_duplicate=False)
                     if p.requires_grad and name in initializers)
    for entry in list(model.metadata_props):
        if entry.key == TRAINABLE_KEY:
            model.metadata_props.remove(entry)
    model.metadata_props.add(key=TRAINABLE_KEY, value=json.dumps(trained))
    onnx.save(model, str(path))  # the initializers keep pointing at the data file beside it
    return path
