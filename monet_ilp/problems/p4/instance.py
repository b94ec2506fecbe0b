"""A P4 instance file: the model, the cluster, the global batch and the objective, as JSON.

What ``monet-ilp solve`` and ``monet-ilp plan --save-instance`` read and write for P4
(``formulations/p4_problem.md``)::

    {"format": "monet-ilp/p4-instance", "version": 1,
     "model": {"family": "gpt2", "preset": "medium"},        # or every TransformerConfig field
     "cluster": {"preset": "dgx_a100", "nodes": 4},          # and the preset's own keywords,
                                                             # or every field (a cluster YAML file's)
     "global_batch": 512, "objective": "time", "alpha": 0.5} # or "energy", "weighted"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.hardware.cluster import ClusterSpec, cluster, cluster_from_dict
from monet_ilp.problems.p4.model import TransformerConfig, model_config

__all__ = ["P4_FORMAT", "P4Instance", "p4_instance_from_dict"]

P4_FORMAT = "monet-ilp/p4-instance"


@dataclass(frozen=True)
class P4Instance:
    """What a P4 search needs, and how it was described (kept for the file)."""

    model: TransformerConfig
    cluster: ClusterSpec
    global_batch: int
    objective: str
    model_spec: dict[str, Any]
    cluster_spec: dict[str, Any]
    alpha: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        return {"format": P4_FORMAT, "version": 1, "model": self.model_spec, "cluster": self.cluster_spec,
                "global_batch": self.global_batch, "objective": self.objective, "alpha": self.alpha}


def p4_instance_from_dict(data: dict[str, Any], *, source: str | None = None) -> P4Instance:
    """Read a P4 instance (a user error naming the file and the field when one is wrong)."""
    try:
        model_spec = dict(data["model"])
        cluster_spec = dict(data["cluster"])
        batch = data["global_batch"]
    except KeyError as err:
        raise MonetError(f"P4 instance has no {err.args[0]!r}", file=source, field=str(err.args[0]),
                         fix="give model, cluster and global_batch") from err
    except (TypeError, ValueError) as err:
        raise MonetError("model and cluster must be objects", file=source, field="model",
                         fix='write e.g. "model": {"family": "gpt2", "preset": "medium"}') from err
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise MonetError(f"global_batch = {batch!r}", file=source, field="global_batch",
                         fix="give a positive integer")
    objective = data.get("objective", "time")
    if objective not in ("time", "energy", "weighted"):
        raise MonetError(f"objective = {objective!r}", file=source, field="objective",
                         fix="use time, energy or weighted")
    alpha = data.get("alpha", 0.5)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise MonetError(f"alpha = {alpha!r}", file=source, field="alpha", fix="give a weight in [0, 1]")
    try:
        if "family" in model_spec:
            extra = sorted(set(model_spec) - {"family", "preset", "seq"})
            if extra:
                raise MonetError(f"unknown model key {extra[0]!r}", field=f"model.{extra[0]}",
                                 fix="give family, preset and seq, or every field of a model")
            model = model_config(model_spec["family"], preset=model_spec.get("preset"), seq=model_spec.get("seq"))
        else:
            model = TransformerConfig(**model_spec)
        if "device" in cluster_spec:  # written out in full, as a cluster YAML file
            spec = cluster_from_dict(cluster_spec, source=source)
        else:
            params = {k: v for k, v in cluster_spec.items() if k not in ("preset", "nodes")}
            spec = cluster(str(cluster_spec.get("preset", "dgx_a100")), nodes=int(cluster_spec.get("nodes", 1)),
                           **params)
    except MonetError as err:
        raise (err.with_file(source) if source else err) from None
    except TypeError as err:
        raise MonetError(f"model: {err}", file=source, field="model",
                         fix="give family and preset, or name, layers, hidden, heads, seq, vocab, ffn") from err
    return P4Instance(model, spec, batch, objective, model_spec, cluster_spec, float(alpha))
