"""Plans applied to PyTorch models (the optional ``torch`` extra).

:func:`checkpoint` exports a model with the project's exporter, imports it, solves P1
over the schedules ``torch.utils.checkpoint`` can run (``formulations/torch_checkpoint.md``,
class TC) and over every P1 schedule, and returns a copy of the model with the chosen
modules checkpointed, and the plan.
"""

from monet_ilp.torch.checkpoint import TorchPlan, apply_plan, checkpoint, wrappable_regions
from monet_ilp.torch.measure import live_peak_bytes

__all__ = ["TorchPlan", "apply_plan", "checkpoint", "live_peak_bytes", "wrappable_regions"]
