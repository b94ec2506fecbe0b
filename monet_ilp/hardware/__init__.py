"""Hardware descriptions (YAML schema, presets) and the analytical cost model.

Second stage of the pipeline: a :class:`Hardware` plus a training graph gives, through
:mod:`.cost`, the integer cycles and picojoules of every (op, core) pair.
"""

from monet_ilp.hardware.model import Core, Hardware, Link, Memory, MemoryKind, OpCost

__all__ = ["Core", "Hardware", "Link", "Memory", "MemoryKind", "OpCost"]
