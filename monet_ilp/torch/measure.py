"""What a training step really holds: the live-memory peak PyTorch's memory profiler records.

The peak, over one call of ``step``, of the memory in the categories INPUT, TEMPORARY,
ACTIVATION and AUTOGRAD_DETAIL of ``torch.profiler``'s memory timeline: every tensor that
is not a parameter, a parameter's gradient or optimizer state, which is what P1 counts
(``formulations/torch_checkpoint.md`` TC.K2).  A non-reentrant checkpoint's recomputed
tensors are AUTOGRAD_DETAIL; saved-tensor hooks alone would not see them.  The profiler
files a module's buffers (batch norm's running statistics) under INPUT: they are state
like the parameters, not activations, so with ``model`` their bytes are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["live_peak_bytes"]


def live_peak_bytes(step: Callable[[], object], *, model: torch.nn.Module | None = None, device: str = "cpu") -> int:
    """Run ``step`` once under the memory profiler; the peak of its live non-parameter memory,
    ``model``'s buffers left out, bytes."""
    import numpy as np
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, Category, MemoryProfileTimeline

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step()
    # The timeline has no public accessor for its per-category sizes (torch 2.13).
    timeline = MemoryProfileTimeline(prof._memory_profile())  # noqa: SLF001
    _, sizes = timeline._coalesce_timeline(device)  # type: ignore[no-untyped-call]  # noqa: SLF001
    columns = [_CATEGORY_TO_INDEX[c] + 1 for c in
               (Category.INPUT, Category.TEMPORARY, Category.ACTIVATION, Category.AUTOGRAD_DETAIL)]
    buffers = 0 if model is None else sum(b.numel() * b.element_size() for b in model.buffers())
    return int(np.array(sizes)[:, columns].sum(axis=1).max()) - buffers
