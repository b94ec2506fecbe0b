"""Hardware descriptions (YAML schema, presets) and the analytical cost model.

Second stage of the pipeline: a :class:`Hardware` plus a training graph gives, through
:mod:`.cost`, the integer cycles and picojoules of every (op, core) pair.

The names below are imported on first use (PEP 562): reading an instance needs only
:mod:`.model`, not the YAML schema and its graph checks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monet_ilp.hardware.cost import (
        CostBreakdown,
        CostModelError,
        anchor_type,
        can_run,
        cost_breakdown,
        dram_bandwidth_of,
        op_cost,
    )
    from monet_ilp.hardware.model import Core, Hardware, Link, Memory, MemoryKind, OpCost
    from monet_ilp.hardware.presets import (
        PRESETS,
        datacenter_gpu,
        edge_tpu,
        hetero_quad,
        parse_set,
        preset,
    )
    from monet_ilp.hardware.schema import (
        HardwareError,
        hardware_from_dict,
        hardware_to_dict,
        load_hardware,
        parse_frequency,
        parse_size,
        validate_hardware_file,
    )

#: Each exported name -> the submodule that defines it.
_EXPORTS = {
    "PRESETS": "presets",
    "Core": "model",
    "CostBreakdown": "cost",
    "CostModelError": "cost",
    "Hardware": "model",
    "HardwareError": "schema",
    "Link": "model",
    "Memory": "model",
    "MemoryKind": "model",
    "OpCost": "model",
    "anchor_type": "cost",
    "can_run": "cost",
    "cost_breakdown": "cost",
    "datacenter_gpu": "presets",
    "dram_bandwidth_of": "cost",
    "edge_tpu": "presets",
    "hardware_from_dict": "schema",
    "hardware_to_dict": "schema",
    "hetero_quad": "presets",
    "load_hardware": "schema",
    "op_cost": "cost",
    "parse_frequency": "schema",
    "parse_set": "presets",
    "parse_size": "schema",
    "preset": "presets",
    "validate_hardware_file": "schema",
}

__all__ = [
    "PRESETS",
    "Core",
    "CostBreakdown",
    "CostModelError",
    "Hardware",
    "HardwareError",
    "Link",
    "Memory",
    "MemoryKind",
    "OpCost",
    "anchor_type",
    "can_run",
    "cost_breakdown",
    "datacenter_gpu",
    "dram_bandwidth_of",
    "edge_tpu",
    "hardware_from_dict",
    "hardware_to_dict",
    "hetero_quad",
    "load_hardware",
    "op_cost",
    "parse_frequency",
    "parse_set",
    "parse_size",
    "preset",
    "validate_hardware_file",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'monet_ilp.hardware' has no attribute {name!r}")
    return getattr(importlib.import_module(f"monet_ilp.hardware.{_EXPORTS[name]}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
