"""Hardware descriptions (YAML schema, presets) and the analytical cost model.

Second stage of the pipeline: a :class:`Hardware` plus a training graph gives, through
:mod:`.cost`, the integer cycles and picojoules of every (op, core) pair.
"""

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
