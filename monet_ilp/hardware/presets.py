"""Hardware presets: parametrised :class:`~monet_ilp.hardware.model.Hardware` builders.

Second input of the pipeline, like a YAML file: each preset writes the explicit
YAML form (:mod:`.schema`) and validates it with :func:`.schema.hardware_from_dict`,
so a preset and its YAML file (``instances/hardware/*.yaml``) are the same thing.
Parameters, their sources and the assumptions are tabled in
``formulations/cost_model.md`` (section "Presets").
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from monet_ilp.errors import MonetError
from monet_ilp.hardware.schema import (
    DRAM_BUS,
    HardwareError,
    hardware_from_dict,
    mesh_links,
    parse_frequency,
    parse_size,
)

if TYPE_CHECKING:
    from monet_ilp.hardware.model import Hardware, Link

__all__ = ["PRESETS", "datacenter_gpu", "edge_tpu", "hetero_quad", "parse_set", "preset"]

#: Size parameters that may be 0 (every other size must be positive).
_SIZE_PARAMS_OPTIONAL_ZERO = {"rf_bytes"}


def _kind(param: str) -> str:
    """How a parameter is checked, from its unit suffix: ``factor`` (in (0, 1]), ``size``
    (bytes), ``freq`` (Hz), ``energy`` (>= 0), ``rate`` (> 0) or ``count`` (int >= 1)."""
    if param.endswith("_utilisation"):
        return "factor"
    if param.endswith("_bytes"):
        return "size"
    if param.endswith("_hz"):
        return "freq"
    if param.endswith(("_pj", "_pj_per_byte", "_mw")):
        return "energy"
    if param.endswith("_per_cycle") and not param.endswith("ops_per_cycle"):
        return "rate"
    return "count"


def _check(preset_name: str, param: str, value: Any) -> Any:
    """Normalise one parameter value (sizes and clocks to ints), or raise HardwareError."""
    field = f"{preset_name}.{param}"
    kind = _kind(param)
    if value is None and param.endswith("ops_per_cycle"):
        return None  # derived (see the preset's docstring)
    if kind == "size":
        size = parse_size(value, field=field)
        if size <= 0 and param not in _SIZE_PARAMS_OPTIONAL_ZERO:
            raise HardwareError(f"{param} = {value!r} is not positive", field=field, fix="give a positive size, e.g. 2MiB")
        return size
    if kind == "freq":
        return parse_frequency(value, field=field)
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise HardwareError(f"{param} = {value!r} is not a positive integer", field=field,
                                fix=f"pass {param}=<integer >= 1>")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise HardwareError(f"{param} = {value!r} is not a number", field=field, fix=f"pass {param}=<number>")
    if kind == "factor" and not 0 < value <= 1:
        raise HardwareError(f"{param} = {value!r} is outside (0, 1]", field=field, fix="give a factor in (0, 1]")
    if kind == "rate" and value <= 0:
        raise HardwareError(f"{param} = {value!r} must be positive", field=field, fix="give a number > 0")
    if kind == "energy" and value < 0:
        raise HardwareError(f"{param} = {value!r} is negative", field=field, fix="energies and powers must be >= 0")
    return float(value)


def _check_names(name: str, given: Mapping[str, Any]) -> None:
    defaults = PRESETS[name]
    for key in given:
        if key not in defaults:
            close = difflib.get_close_matches(key, list(defaults), n=1)
            raise HardwareError(
                f"unknown parameter {key!r} of preset {name!r}",
                field=f"{name}.{key}",
                fix=(f"did you mean {close[0]!r}? " if close else "") + f"parameters: {', '.join(defaults)}",
            )


def _resolve(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of preset ``name``, checked and normalised (sizes and clocks as ints)."""
    _check_names(name, given)
    return {key: _check(name, key, given.get(key, default)) for key, default in PRESETS[name].items()}


def _human(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def _core(core_id: str, simd_units: int, lanes: int, sram_bytes: int, p: Mapping[str, Any], prefix: str = "",
          **extra: Any) -> dict[str, Any]:
    def g(key: str) -> Any:
        return p[prefix + key]

    vector = p.get(prefix + "vector_ops_per_cycle")
    record = {
        "id": core_id,
        "array": {"simd_units": simd_units, "lanes": lanes},
        "sram_bytes": sram_bytes,
        "sram_bandwidth_bytes_per_cycle": g("sram_bandwidth_bytes_per_cycle"),
        "sram_read_pj_per_byte": g("sram_read_pj_per_byte"),
        "sram_write_pj_per_byte": g("sram_write_pj_per_byte"),
        "mac_pj": g("mac_pj"),
        "vector_ops_per_cycle": vector if vector is not None else simd_units,
        "vector_op_pj": g("vector_op_pj"),
    }
    record.update(extra)
    return record


def _link_dict(link: Link) -> dict[str, Any]:
    return {
        "id": link.id,
        "endpoints": list(link.endpoints),
        "bandwidth_bytes_per_cycle": link.bandwidth_bytes_per_cycle,
        "pj_per_byte": link.pj_per_byte,
        "latency_cycles": link.latency_cycles,
    }


# ====================================================================== presets
def edge_tpu(
    *,
    n_pe_x: int = 2,
    n_pe_y: int = 2,
    simd_units: int = 64,
    lanes: int = 4,
    pe_sram_bytes: int | str = "2MiB",
    rf_bytes: int | str = "32KiB",
    clock_hz: int | str = "800MHz",
    sram_bandwidth_bytes_per_cycle: float = 128,
    vector_ops_per_cycle: int | None = None,
    mac_pj: float = 4.6,
    vector_op_pj: float = 0.9,
    sram_read_pj_per_byte: float = 1.63,
    sram_write_pj_per_byte: float = 1.48,
    noc_bandwidth_bytes_per_cycle: float = 32,
    noc_pj_per_byte: float = 0.5,
    dram_bytes: int | str = "4GiB",
    dram_bandwidth_bytes_per_cycle: float = 32,
    dram_pj_per_byte: float = 125.0,
    dram_bus_pj_per_byte: float = 0.0,
) -> Hardware:
    """An Edge-TPU-like mesh of PEs, as in MONET's Fig. 4 (MONET's design-space sweep).

    ``n_pe_x x n_pe_y`` PEs ``pe_0 .. pe_{n-1}`` (row-major: ``pe_i`` sits at
    ``x = i % n_pe_x``, ``y = i // n_pe_x``); each PE is a core with a
    ``simd_units x lanes`` MAC array and ``pe_sram_bytes`` of SRAM.  Neighbouring
    PEs are joined by NoC links ``noc_<i>_<j>``; every PE reaches DRAM over one
    shared link ``dram_bus`` (all PE SRAMs and ``dram`` are its endpoints, so DRAM
    transfers of different PEs serialise, as with Stream's single-port off-chip
    core).  ``vector_ops_per_cycle=None`` means ``simd_units`` (one vector ALU per
    SIMD unit).  MONET's sweep: U in {16, 32, 64, 128}, L in {1, 2, 4, 8}, SRAM
    0.5 to 4 MiB, 1 to 8 PEs a side.  Sources and assumptions: cost_model.md.
    """
    p = _resolve("edge_tpu", locals())
    n = p["n_pe_x"] * p["n_pe_y"]
    srams = [f"pe_{i}.sram" for i in range(n)]
    name = f"edge_tpu_{p['n_pe_x']}x{p['n_pe_y']}"
    defaults = PRESETS["edge_tpu"]
    if p["simd_units"] != defaults["simd_units"]:
        name += f"_U{p['simd_units']}"
    if p["lanes"] != defaults["lanes"]:
        name += f"_L{p['lanes']}"
    if p["pe_sram_bytes"] != parse_size(defaults["pe_sram_bytes"]):
        name += f"_sram{_human(p['pe_sram_bytes'])}"
    links = mesh_links(
        srams, p["n_pe_y"], p["n_pe_x"], p["noc_bandwidth_bytes_per_cycle"], p["noc_pj_per_byte"],
        dram_bus=(p["dram_bandwidth_bytes_per_cycle"], p["dram_bus_pj_per_byte"], 0),
    )
    p["vector_ops_per_cycle"] = p["vector_ops_per_cycle"] or p["simd_units"]
    data = {
        "name": name,
        "clock_hz": p["clock_hz"],
        "cores": [
            _core(f"pe_{i}", p["simd_units"], p["lanes"], p["pe_sram_bytes"], p, rf_bytes=p["rf_bytes"])
            for i in range(n)
        ],
        "dram": {
            "capacity_bytes": p["dram_bytes"],
            "bandwidth_bytes_per_cycle": p["dram_bandwidth_bytes_per_cycle"],
            "read_pj_per_byte": p["dram_pj_per_byte"],
            "write_pj_per_byte": p["dram_pj_per_byte"],
        },
        "links": [_link_dict(l) for l in links],
        "params": {"preset": "edge_tpu", **p},
    }
    assert links[-1].id == DRAM_BUS
    return hardware_from_dict(data, source="preset edge_tpu")


def hetero_quad(
    *,
    big_simd_units: int = 32,
    big_lanes: int = 32,
    big_sram_bytes: int | str = "2MiB",
    big_sram_bandwidth_bytes_per_cycle: float = 256,
    big_sram_read_pj_per_byte: float = 1.63,
    big_sram_write_pj_per_byte: float = 1.48,
    big_vector_ops_per_cycle: int = 64,
    big_conv_utilisation: float = 0.9,
    little_simd_units: int = 16,
    little_lanes: int = 8,
    little_sram_bytes: int | str = "512KiB",
    little_sram_bandwidth_bytes_per_cycle: float = 64,
    little_sram_read_pj_per_byte: float = 0.9,
    little_sram_write_pj_per_byte: float = 0.8,
    little_vector_ops_per_cycle: int = 16,
    clock_hz: int | str = "1GHz",
    mac_pj: float = 4.6,
    vector_op_pj: float = 0.9,
    noc_bandwidth_bytes_per_cycle: float = 32,
    noc_pj_per_byte: float = 0.5,
    dram_bytes: int | str = "4GiB",
    dram_bandwidth_bytes_per_cycle: float = 32,
    dram_pj_per_byte: float = 125.0,
    dram_bus_pj_per_byte: float = 0.0,
) -> Hardware:
    """Four Stream-like cores of two sizes: ``big_0, big_1`` (a TPU-like 32 x 32 array)
    and ``little_0, little_1`` (16 x 8), on a 2 x 2 mesh (row-major in that order:
    links ``noc_0_1`` big-big, ``noc_0_2`` and ``noc_1_3`` big-little, ``noc_2_3``
    little-little) plus one shared ``dram_bus``.  The big cores' utilisation is
    ``big_conv_utilisation`` for Conv, Gemm and MatMul (array fill and drain).
    """
    p = _resolve("hetero_quad", locals())
    u = p["big_conv_utilisation"]
    shared = {"mac_pj": p["mac_pj"], "vector_op_pj": p["vector_op_pj"]}
    big = {**{k[4:]: v for k, v in p.items() if k.startswith("big_")}, **shared}
    little = {**{k[7:]: v for k, v in p.items() if k.startswith("little_")}, **shared}
    cores = [
        _core(f"big_{i}", p["big_simd_units"], p["big_lanes"], p["big_sram_bytes"], big,
              utilisation={"Conv": u, "Gemm": u, "MatMul": u, "default": 1.0})
        for i in range(2)
    ] + [
        _core(f"little_{i}", p["little_simd_units"], p["little_lanes"], p["little_sram_bytes"], little)
        for i in range(2)
    ]
    links = mesh_links(
        [f"{c['id']}.sram" for c in cores], 2, 2, p["noc_bandwidth_bytes_per_cycle"], p["noc_pj_per_byte"],
        dram_bus=(p["dram_bandwidth_bytes_per_cycle"], p["dram_bus_pj_per_byte"], 0),
    )
    data = {
        "name": "hetero_quad",
        "clock_hz": p["clock_hz"],
        "cores": cores,
        "dram": {
            "capacity_bytes": p["dram_bytes"],
            "bandwidth_bytes_per_cycle": p["dram_bandwidth_bytes_per_cycle"],
            "read_pj_per_byte": p["dram_pj_per_byte"],
            "write_pj_per_byte": p["dram_pj_per_byte"],
        },
        "links": [_link_dict(l) for l in links],
        "params": {"preset": "hetero_quad", **p},
    }
    return hardware_from_dict(data, source="preset hetero_quad")


def datacenter_gpu(
    *,
    simd_units: int = 432,
    lanes: int = 256,
    sram_bytes: int | str = "40MiB",
    sram_bandwidth_bytes_per_cycle: float = 5120,
    clock_hz: int | str = "1410MHz",
    vector_ops_per_cycle: int = 6912,
    mac_pj: float = 1.0,
    vector_op_pj: float = 0.5,
    sram_read_pj_per_byte: float = 1.0,
    sram_write_pj_per_byte: float = 1.0,
    hbm_bytes: int | str = "40GiB",
    hbm_bandwidth_bytes_per_cycle: float = 1103,
    hbm_pj_per_byte: float = 31.2,
    host_bytes: int | str = "256GiB",
    host_bandwidth_bytes_per_cycle: float = 145,
    host_pj_per_byte: float = 60.0,
    pcie_bandwidth_bytes_per_cycle: float = 22,
    pcie_pj_per_byte: float = 10.0,
) -> Hardware:
    """One A100-like GPU seen as a single core ``gpu`` (108 SMs x 4 tensor cores as
    U = 432 SIMD units of L = 256 lanes), its on-chip memory (L2) as ``gpu.sram``,
    HBM as ``dram`` (link ``hbm``) and host memory as ``host``, reached from the
    GPU over PCIe (link ``pcie``, endpoints ``gpu.sram`` and ``host``: host offload).
    """
    p = _resolve("datacenter_gpu", locals())
    data = {
        "name": "datacenter_gpu",
        "clock_hz": p["clock_hz"],
        "cores": [_core("gpu", p["simd_units"], p["lanes"], p["sram_bytes"], p)],
        "dram": {
            "capacity_bytes": p["hbm_bytes"],
            "bandwidth_bytes_per_cycle": p["hbm_bandwidth_bytes_per_cycle"],
            "read_pj_per_byte": p["hbm_pj_per_byte"],
            "write_pj_per_byte": p["hbm_pj_per_byte"],
        },
        "host": {
            "capacity_bytes": p["host_bytes"],
            "bandwidth_bytes_per_cycle": p["host_bandwidth_bytes_per_cycle"],
            "read_pj_per_byte": p["host_pj_per_byte"],
            "write_pj_per_byte": p["host_pj_per_byte"],
        },
        "links": [
            {"id": "hbm", "endpoints": ["gpu.sram", "dram"],
             "bandwidth_bytes_per_cycle": p["hbm_bandwidth_bytes_per_cycle"], "pj_per_byte": 0.0,
             "latency_cycles": 0},
            {"id": "pcie", "endpoints": ["gpu.sram", "host"],
             "bandwidth_bytes_per_cycle": p["pcie_bandwidth_bytes_per_cycle"], "pj_per_byte": p["pcie_pj_per_byte"],
             "latency_cycles": 0},
        ],
        "params": {"preset": "datacenter_gpu", **p},
    }
    return hardware_from_dict(data, source="preset datacenter_gpu")


_BUILDERS: dict[str, Callable[..., Hardware]] = {
    "edge_tpu": edge_tpu,
    "hetero_quad": hetero_quad,
    "datacenter_gpu": datacenter_gpu,
}

#: Preset names -> their parameters' defaults (as written in the signatures).
PRESETS: Mapping[str, Mapping[str, Any]] = {
    name: {k: v.default for k, v in inspect.signature(fn).parameters.items()} for name, fn in _BUILDERS.items()
}


def preset(name: str, **params: Any) -> Hardware:
    """Build preset ``name`` with ``params`` overriding its defaults (see :data:`PRESETS`).

    Unknown presets and parameters raise :class:`~monet_ilp.errors.MonetError`
    naming the closest match; values are checked (sizes accept ``"2MiB"``, clocks
    ``"800MHz"``).
    """
    if name not in _BUILDERS:
        close = difflib.get_close_matches(str(name), list(_BUILDERS), n=1)
        raise HardwareError(
            f"unknown hardware preset {name!r}",
            field="preset",
            fix=(f"did you mean {close[0]!r}? " if close else "") + f"presets: {', '.join(_BUILDERS)}",
        )
    _check_names(name, params)
    return _BUILDERS[name](**params)


def parse_set(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["n_pe_x=4", "pe_sram_bytes=2MiB"]`` -> ``{"n_pe_x": 4, "pe_sram_bytes": "2MiB"}``.

    Values are read as YAML scalars (``4`` is an int, ``0.5`` a float, ``2MiB`` a
    string); the preset checks names and values.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or not key or not text.strip():
            raise MonetError(f"--set {item!r} is not KEY=VALUE", field="--set",
                             fix="write e.g. --set n_pe_x=4 --set pe_sram_bytes=2MiB")
        if key in out:
            raise MonetError(f"--set gives {key!r} twice", field=f"--set {key}", fix="give each parameter once")
        try:
            value = yaml.safe_load(text.strip())
        except yaml.YAMLError:
            value = text.strip()
        if isinstance(value, (list, dict)) or value is None:
            raise MonetError(f"--set {key}={text} is not a single value", field=f"--set {key}",
                             fix="give a number or a size such as 2MiB")
        out[key] = value
    return out
