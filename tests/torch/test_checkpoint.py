"""monet_ilp.torch.checkpoint on a real model: the plan runs, changes no gradient, recomputes
exactly the FLOPs it predicts, and keeps the live memory it predicts; bad input exits 2."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from typing import TYPE_CHECKING

from monet_ilp.errors import MonetError
from monet_ilp.torch import checkpoint, live_peak_bytes
from tests.conftest import cli_code

if TYPE_CHECKING:
    from pathlib import Path


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU()) for _ in range(6)]
    return torch.nn.Sequential(*blocks, torch.nn.Linear(64, 10))


def _step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()


def _step_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        _step(model, x, y)
    return int(counter.get_total_flops())


def test_the_plan_runs_and_recomputes_what_it_predicts() -> None:
    model, x, y = _model(), torch.randn(32, 64), torch.randint(0, 10, (32,))
    wrapped, plan = checkpoint(model, (x,), 0.6, time_limit=30, unrestricted=False)
    assert plan.status == "optimal" and plan.checkpointed
    assert plan.predicted_peak_bytes <= plan.budget_bytes
    assert sorted(wrapped.state_dict()) == sorted(model.state_dict())  # names unchanged
    flops = [_step_flops(m, x, y) for m in (model, wrapped)]
    for a, b in zip(model.parameters(), wrapped.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad)
    assert flops[1] - flops[0] == plan.predicted_recompute_flops > 0


def test_the_live_memory_is_what_it_predicts() -> None:
    """The memory profiler's inputs, temporaries, activations and autograd detail, at their peak."""
    model, x, y = _model(), torch.randn(32, 64), torch.randint(0, 10, (32,))
    wrapped, plan = checkpoint(model, (x,), 0.6, time_limit=30, unrestricted=False)
    _step(wrapped, x, y)
    measured = live_peak_bytes(lambda: _step(wrapped, x, y), model=wrapped)
    assert abs(measured - plan.predicted_peak_bytes) <= 0.05 * plan.predicted_peak_bytes


def test_a_budget_below_the_class_says_the_least_one() -> None:
    model, x = _model(), torch.randn(32, 64)
    with pytest.raises(MonetError, match="at least") as err:
        checkpoint(model, (x,), 0.05, time_limit=30, unrestricted=False)
    assert err.value.field == "budget"


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "mymodel.py"
    path.write_text("import torch\n\ndef build():\n    return torch.nn.Sequential("
                    + ", ".join(["torch.nn.Linear(16, 16), torch.nn.GELU()"] * 4) + ", torch.nn.Linear(16, 4))\n")
    return path


def test_cli_writes_a_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    assert cli_code(["torch-checkpoint", f"{_file(tmp_path)}:build", "--input-shape", "8x16", "--budget", "0.7",
                     "--time-limit", "20", "--out", str(out)]) == 0
    assert "checkpointed" in out.read_text()


@pytest.mark.parametrize("args", [
    ["--input-shape", "8x17"],  # the model takes 16 features
    ["--input-shape", "8x16", "--budget", "0.01"],  # below the least the class reaches
    ["--input-shape", "eight"],
])
def test_cli_refuses_bad_input(tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_code(["torch-checkpoint", f"{_file(tmp_path)}:build", *args]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_cli_refuses_a_missing_file(tmp_path: Path) -> None:
    assert cli_code(["torch-checkpoint", f"{tmp_path / 'none.py'}:build", "--input-shape", "8x16"]) == 2


class _DiffHead(torch.nn.Module):
    """Blocks with dropout, then ``torch.diff``, which torch's TorchScript exporter cannot export."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                                                torch.nn.Dropout(0.1)) for _ in range(4)])
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.blocks(x)
        return self.head(torch.cat([h[:1], torch.diff(h, dim=0)], 0))


def test_a_model_torchscript_cannot_export_goes_through_dynamo_with_its_module_paths() -> None:
    """TC.K1: the dynamo exporter's nodes are named by their module scopes, so the regions are
    the model's modules, and the plan changes no gradient (the rerun replays the dropout's noise)."""
    model, x, y = _DiffHead(), torch.randn(32, 64), torch.randint(0, 10, (32,))
    wrapped, plan = checkpoint(model, (x,), 0.7, time_limit=30, unrestricted=False)
    assert plan.checkpointed and all(p.startswith("blocks") for p in plan.checkpointed)
    for m in (model, wrapped):
        torch.manual_seed(1)
        _step(m, x, y)
    for a, b in zip(model.parameters(), wrapped.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad)


def test_on_the_cpu_a_dropout_saves_its_noise_and_the_rerun_brings_it_back() -> None:
    """TC.K2: torch's CPU dropout saves fp32 noise; a checkpointed region drops it and its rerun
    (up to the last op that saves anything) makes it again: the live peak is the predicted one."""
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Dropout(0.1), torch.nn.GELU())
              for _ in range(6)]
    model, x, y = torch.nn.Sequential(*blocks, torch.nn.Linear(64, 10)), torch.randn(32, 64), torch.randint(0, 10, (32,))
    wrapped, plan = checkpoint(model, (x,), 0.6, time_limit=30, unrestricted=False)
    assert plan.checkpointed
    _step(wrapped, x, y)
    measured = live_peak_bytes(lambda: _step(wrapped, x, y), model=wrapped)
    assert abs(measured - plan.predicted_peak_bytes) <= 0.05 * plan.predicted_peak_bytes
    assert measured <= plan.budget_bytes


def test_a_selective_region_saves_its_products_and_holds_what_it_predicts() -> None:
    """TC.K7: ``[0..3]@mm`` reruns blocks 0-3 but their matrix products come from the cache: no
    MAC is recomputed, the gradients do not change, and the live peak is the predicted one."""
    import copy
    import tempfile

    from monet_ilp.make import p1_instance
    from monet_ilp.problems.p1.torch_class import region_sequence, regions_of
    from monet_ilp.torch.checkpoint import apply_plan, export_graph

    model, x, y = _model(), torch.randn(32, 64), torch.randint(0, 10, (32,))
    with tempfile.TemporaryDirectory() as tmp:
        graph = export_graph(model, (x,), tmp)
    regions = {r.path: r for r in regions_of(graph)}
    assert regions["[0..3]@mm"].saved and regions["[0..3]@mm"].ops == regions["[0..3]"].ops
    predicted = region_sequence(p1_instance(graph, 1.0), [regions["[0..3]@mm"]])
    wrapped = apply_plan(copy.deepcopy(model), ["[0..3]@mm"])
    flops = [_step_flops(m, x, y) for m in (model, wrapped)]
    assert flops[1] == flops[0]  # GELU's FLOPs are not counted by torch; no product is rerun
    for a, b in zip(model.parameters(), wrapped.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad)
    measured = live_peak_bytes(lambda: _step(wrapped, x, y), model=wrapped)
    peak = int(predicted.meta["peak_bytes"])
    assert abs(measured - peak) <= 0.05 * peak
