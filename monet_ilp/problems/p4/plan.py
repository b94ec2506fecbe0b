"""A P4 plan: the parallel degrees, micro-batching, pipeline schedule, stages and recomputation.

Plain data, as a Schedule is for P1-P3 (``formulations/p4_problem.md`` P4.D1-D6): the
searches produce it, the evaluator (:mod:`.evaluate`) checks it, and it round-trips
through JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.memory import RECOMPUTE

__all__ = ["LAYER_OPTIONS", "PLACEMENTS", "SCHEDULES", "Plan", "plan_from_dict"]

#: How the groups are laid on the devices, innermost first (P4.D1): ``tdp`` tensor, then
#: data, then pipeline (Megatron-LM's order: pipeline neighbours far apart); ``tpd``
#: tensor, then pipeline, then data (pipeline neighbours close, data groups spread).
PLACEMENTS = ("tdp", "tpd")

#: What a layer does with its activations (P4.D5): keep them (``none``), recompute the
#: attention core (``selective``) or the whole layer (``full``), or offload them to host
#: memory (``offload``).
LAYER_OPTIONS = (*RECOMPUTE, "offload")

#: Pipeline schedules (P4.D4): GPipe (all forwards, then all backwards) and 1F1B
#: (PipeDream-Flush: a warm-up of forwards, then one forward and one backward in turn).
SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True)
class Plan:
    """How one training iteration runs on a cluster.

    Attributes
    ----------
    data, pipeline, tensor
        ``d``, ``p``, ``t``: ``d * p * t`` devices, tensor groups innermost (within a
        node), then data, then pipeline (Megatron-LM's order).
    sequence_parallel
        Split the non-tensor-parallel parts along the sequence (needs ``t > 1``).
    micro_batch, micro_batches
        ``b`` sequences per micro-batch and ``m`` micro-batches per data-parallel rank:
        the global batch is ``d * b * m``.
    schedule
        ``1f1b`` or ``gpipe``.
    stages
        Layers per pipeline stage, in order (``p`` positive counts summing to ``L``).
    recompute
        Per layer: ``none``, ``selective``, ``full`` or ``offload`` (:data:`LAYER_OPTIONS`).
    zero
        Sharding of the optimizer state (1), and the gradients (2) and weights (3) too,
        across the data-parallel group (0: none).
    placement
        The order of the groups on the devices, innermost first (:data:`PLACEMENTS`).
    """

    data: int
    pipeline: int
    tensor: int
    sequence_parallel: bool
    micro_batch: int
    micro_batches: int
    schedule: str
    stages: tuple[int, ...]
    recompute: tuple[str, ...]
    zero: int = 0
    placement: str = "tdp"

    def __post_init__(self) -> None:
        for field in ("data", "pipeline", "tensor", "micro_batch", "micro_batches"):
            if getattr(self, field) < 1:
                raise MonetError(f"plan: {field} = {getattr(self, field)}", field=field, fix="give a positive integer")
        if self.schedule not in SCHEDULES:
            raise MonetError(f"plan: schedule {self.schedule!r}", field="schedule", fix=f"use {' or '.join(SCHEDULES)}")
        if len(self.stages) != self.pipeline or any(n < 1 for n in self.stages):
            raise MonetError(f"plan: {len(self.stages)} stages {list(self.stages)} for pipeline degree {self.pipeline}",
                             field="stages", fix="give one positive layer count per pipeline stage")
        if len(self.recompute) != sum(self.stages) or any(r not in LAYER_OPTIONS for r in self.recompute):
            raise MonetError("plan: recompute must name one of none/selective/full/offload per layer",
                             field="recompute", fix=f"give {sum(self.stages)} entries from {', '.join(LAYER_OPTIONS)}")
        if self.sequence_parallel and self.tensor == 1:
            raise MonetError("plan: sequence parallelism needs tensor parallelism", field="sequence_parallel",
                             fix="set tensor > 1 or sequence_parallel false")
        if self.zero not in (0, 1, 2, 3):
            raise MonetError(f"plan: zero = {self.zero}", field="zero", fix="use 0, 1, 2 or 3")
        if self.placement not in PLACEMENTS:
            raise MonetError(f"plan: placement {self.placement!r}", field="placement",
                             fix=f"use {' or '.join(PLACEMENTS)}")

    @property
    def devices(self) -> int:
        return self.data * self.pipeline * self.tensor

    @property
    def global_batch(self) -> int:
        return self.data * self.micro_batch * self.micro_batches

    def recompute_runs(self) -> str:
        """``none x20, selective x4``: the per-layer options in runs."""
        out: list[tuple[str, int]] = []
        for r in self.recompute:
            if out and out[-1][0] == r:
                out[-1] = (r, out[-1][1] + 1)
            else:
                out.append((r, 1))
        return ", ".join(f"{r} x{n}" for r, n in out)

    def stage_layers(self) -> list[range]:
        """The layer indices of each stage."""
        out, first = [], 0
        for n in self.stages:
            out.append(range(first, first + n))
            first += n
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.data, "pipeline": self.pipeline, "tensor": self.tensor,
                "sequence_parallel": self.sequence_parallel, "micro_batch": self.micro_batch,
                "micro_batches": self.micro_batches, "schedule": self.schedule, "stages": list(self.stages),
                "recompute": list(self.recompute), "zero": self.zero, "placement": self.placement}


def plan_from_dict(data: dict[str, Any], *, source: str | None = None) -> Plan:
    """A plan from its JSON form (a user error naming the field when one is wrong)."""
    try:
        return Plan(int(data["data"]), int(data["pipeline"]), int(data["tensor"]), bool(data["sequence_parallel"]),
                    int(data["micro_batch"]), int(data["micro_batches"]), str(data["schedule"]),
                    tuple(int(n) for n in data["stages"]), tuple(str(r) for r in data["recompute"]),
                    int(data.get("zero", 0)), str(data.get("placement", "tdp")))
    except KeyError as err:
        raise MonetError(f"plan is missing {err.args[0]!r}", file=source, field=str(err.args[0]),
                         fix="write every field of Plan.to_dict()") from err
    except (TypeError, ValueError) as err:
        raise MonetError(f"plan: {err}", file=source, field="plan", fix="check the field types") from err
