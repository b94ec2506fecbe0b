"""``monet-ilp hw``: show and validate hardware descriptions (presets or YAML files)."""

from __future__ import annotations

import sys
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml
from rich.table import Table

from monet_ilp.cli.render import console, err_console, show
from monet_ilp.errors import MonetError
from monet_ilp.hardware.presets import PRESETS, parse_set, preset
from monet_ilp.hardware.schema import hardware_to_dict, load_hardware, validate_hardware_file
from monet_ilp.units import human_bytes

if TYPE_CHECKING:
    from monet_ilp.hardware.model import Hardware

__all__ = ["hw", "load_hw"]


@click.group()
def hw() -> None:
    """Show and validate hardware descriptions (presets or YAML files)."""


def load_hw(source: str, sets: tuple[str, ...]) -> Hardware:
    """The hardware of ``--hw SOURCE`` (a preset, with ``--set KEY=VALUE`` parameters, or a YAML file)."""
    if source in PRESETS:
        return preset(source, **parse_set(list(sets)))
    if sets:
        raise MonetError("--set applies to presets, not to YAML files", field="--set",
                         fix=f"edit the file, or use a preset: {', '.join(PRESETS)}")
    if not Path(source).suffix:
        close = get_close_matches(source, list(PRESETS), n=1)
        raise MonetError(f"unknown hardware {source!r}", field="--hw",
                         fix=(f"did you mean {close[0]!r}? " if close else "")
                         + f"use a preset ({', '.join(PRESETS)}) or a YAML file")
    return load_hardware(source)


@hw.command("show")
@click.argument("source")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Preset parameter (repeatable).")
@click.option("--yaml", "yaml_out", type=click.Path(dir_okay=False), help="Write the description as YAML.")
def hw_show(source: str, sets: tuple[str, ...], yaml_out: str | None) -> None:
    """Print the cores, memories and links of a preset or YAML file."""
    hardware = load_hw(source, sets)
    cores = Table(title=f"{hardware.name}: cores (clock {hardware.clock_hz / 1e6:g} MHz)")
    for col in ("core", "U x L", "MACs/cycle", "SRAM", "SRAM B/cycle", "MAC pJ", "vector ops/cycle", "static mW"):
        cores.add_column(col, justify="left" if col == "core" else "right")
    for c in hardware.cores:
        cores.add_row(c.id, f"{c.simd_units} x {c.lanes}", str(c.macs_per_cycle), human_bytes(c.sram_bytes),
                      f"{c.sram_bandwidth_bytes_per_cycle:g}", f"{c.mac_pj:g}", str(c.vector_ops_per_cycle),
                      f"{c.static_mw:g}")
    show(cores)
    memories = Table(title="memories")
    for col in ("memory", "kind", "capacity", "B/cycle", "read pJ/B", "write pJ/B"):
        memories.add_column(col, justify="left" if col in ("memory", "kind") else "right")
    for m in hardware.memories:
        memories.add_row(m.id, str(m.kind), human_bytes(m.capacity_bytes), f"{m.bandwidth_bytes_per_cycle:g}",
                         f"{m.read_pj_per_byte:g}", f"{m.write_pj_per_byte:g}")
    show(memories)
    links = Table(title="links")
    for col in ("link", "endpoints", "B/cycle", "pJ/B", "latency"):
        links.add_column(col, justify="left" if col in ("link", "endpoints") else "right")
    for link in hardware.links:
        links.add_row(link.id, ", ".join(link.endpoints), f"{link.bandwidth_bytes_per_cycle:g}",
                      f"{link.pj_per_byte:g}", str(link.latency_cycles))
    show(links)
    if yaml_out:
        Path(yaml_out).write_text(yaml.safe_dump(hardware_to_dict(hardware), sort_keys=False))
        err_console.print(f"wrote {yaml_out}")


@hw.command("validate")
@click.argument("path", type=click.Path(dir_okay=False))
def hw_validate(path: str) -> None:
    """Check a hardware YAML file; print every error with its file, key path and fix."""
    errors = validate_hardware_file(path)
    if not errors:
        console.print(f"{path}: valid")
        return
    for err in errors:
        err_console.print(f"error: {err.message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(2)
