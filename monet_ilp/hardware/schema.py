"""Hardware YAML -> :class:`~monet_ilp.hardware.model.Hardware` (second input of the pipeline).

A hardware file is parsed with ``yaml.safe_load`` (duplicate keys rejected), then
checked key by key; :func:`validate_hardware_file` collects every error (each names
the file, the key path such as ``cores[2].sram_bytes`` or ``links.noc_0_1.endpoints``,
and the fix), :func:`hardware_from_dict` raises the first.  ``formulations/cost_model.md``
documents the same schema next to the cost model that uses it.

Schema (units are in the key names: ``_bytes``, ``_pj``, ``_pj_per_byte``,
``_per_cycle``, ``_hz``, ``_mw``, ``_cycles``)::

    name: edge_tpu_2x2                  # required, a string
    clock_hz: 800MHz                    # required: reference clock of every cycle count
    cores:                              # required, a non-empty list
      - id: pe                          # required; no '.' or whitespace
        count: 4                        # optional: replicate as pe_0 .. pe_3
        array: {simd_units: 64, lanes: 4}   # U x L MAC array (weight stationary)
        sram_bytes: 2MiB
        sram_bandwidth_bytes_per_cycle: 128
        sram_read_pj_per_byte: 1.63
        sram_write_pj_per_byte: 1.48
        mac_pj: 4.6
        vector_ops_per_cycle: 64
        vector_op_pj: 0.9
        clock_hz: 800MHz                # optional, default: the top-level clock_hz
        rf_bytes: 32KiB                 # optional, default 0 (informative only)
        static_mw: 0                    # optional, default 0
        utilisation: {Conv: 0.9, default: 1.0}   # optional, values in (0, 1]
        op_types: [Conv, Gemm, MatMul]  # optional: anchor types it runs (empty: all)
    dram:                               # required
      capacity_bytes: 4GiB
      bandwidth_bytes_per_cycle: 32
      read_pj_per_byte: 125
      write_pj_per_byte: 125
      static_mw: 0                      # optional
    host: {...}                         # optional, the same keys as dram
    links:                              # optional if topology gives the links
      - id: noc_0_1
        endpoints: [pe_0.sram, pe_1.sram]   # memory ids: <core id>.sram, dram, host
        bandwidth_bytes_per_cycle: 32
        pj_per_byte: 0.5
        latency_cycles: 0               # optional, default 0
    topology:                           # optional shorthand, adds links
      kind: mesh                        # the cores, in order, fill rows x cols row-major
      rows: 2
      cols: 2
      noc_bandwidth_bytes_per_cycle: 32 # one link noc_<i>_<j> per pair of neighbours
      noc_pj_per_byte: 0.5
      noc_latency_cycles: 0             # optional
      dram_bus_bandwidth_bytes_per_cycle: 32   # optional: one shared link 'dram_bus'
      dram_bus_pj_per_byte: 0           #   joining every core's SRAM and dram
      dram_bus_latency_cycles: 0        # optional
    params: {...}                       # optional, free-form record (preset parameters)

Sizes are integers or strings such as ``2MiB``, ``512KiB``, ``1GiB`` (powers of 1024)
or ``4MB``, ``4kB`` (powers of 1000); frequencies are integers or strings such as
``800MHz``, ``1.41GHz``.  Every core's SRAM must reach ``dram`` through links.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from monet_ilp.errors import MonetError
from monet_ilp.hardware.model import Core, Hardware, Link, Memory, MemoryKind

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "HardwareError",
    "hardware_from_dict",
    "hardware_to_dict",
    "load_hardware",
    "parse_frequency",
    "parse_size",
    "validate_hardware_file",
]


class HardwareError(MonetError):
    """A hardware description (YAML file, dict or preset parameter) is wrong."""


# ------------------------------------------------------------------------ keys
TOP_REQUIRED = ("name", "clock_hz", "cores", "dram")
TOP_OPTIONAL = ("host", "links", "topology", "params")
CORE_REQUIRED = (
    "id",
    "array",
    "sram_bytes",
    "sram_bandwidth_bytes_per_cycle",
    "sram_read_pj_per_byte",
    "sram_write_pj_per_byte",
    "mac_pj",
    "vector_ops_per_cycle",
    "vector_op_pj",
)
CORE_OPTIONAL = ("count", "clock_hz", "rf_bytes", "static_mw", "utilisation", "op_types")
ARRAY_REQUIRED = ("simd_units", "lanes")
MEMORY_REQUIRED = ("capacity_bytes", "bandwidth_bytes_per_cycle", "read_pj_per_byte", "write_pj_per_byte")
MEMORY_OPTIONAL = ("static_mw",)
LINK_REQUIRED = ("id", "endpoints", "bandwidth_bytes_per_cycle", "pj_per_byte")
LINK_OPTIONAL = ("latency_cycles",)
TOPOLOGY_REQUIRED = ("kind", "rows", "cols", "noc_bandwidth_bytes_per_cycle", "noc_pj_per_byte")
TOPOLOGY_OPTIONAL = (
    "noc_latency_cycles",
    "dram_bus_bandwidth_bytes_per_cycle",
    "dram_bus_pj_per_byte",
    "dram_bus_latency_cycles",
)
TOPOLOGY_KINDS = ("mesh",)

#: Id of the shared DRAM bus a ``topology`` (and the edge_tpu preset) creates.
DRAM_BUS = "dram_bus"


# ----------------------------------------------------------------------- units
_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}
_FREQ_UNITS = {"": 1, "HZ": 1, "KHZ": 10**3, "MHZ": 10**6, "GHZ": 10**9}
_QUANTITY = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def _quantity(value: Any, units: Mapping[str, int], what: str, example: str, field: str | None,
              file: str | None) -> Decimal:
    """An exact Decimal from an int, an integral float or a string with a unit suffix."""
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        return Decimal(value)
    elif isinstance(value, float) and math.isfinite(value):
        return Decimal(repr(value))
    elif isinstance(value, str):
        match = _QUANTITY.match(value)
        if match:
            number, unit = match.groups()
            # 'Mb' would be megabits: units end in a capital B (sizes) or Hz (clocks).
            key = unit.upper()
            if key in units and (unit == "" or unit[-1] in "Bz"):
                try:
                    return Decimal(number.replace("_", "")) * units[key]
                except InvalidOperation:
                    pass
    raise HardwareError(
        f"{value!r} is not a {what}",
        file=file,
        field=field,
        fix=f"write a number or a string such as {example}",
    )


def parse_size(value: Any, *, field: str | None = None, file: str | None = None) -> int:
    """Bytes from an int or a string such as ``2MiB``, ``512KiB``, ``1GiB``, ``4MB``, ``64B``.

    ``KiB/MiB/GiB/TiB`` are powers of 1024, ``kB/MB/GB/TB`` powers of 1000.  The result
    must be a whole, non-negative number of bytes; anything else raises
    :class:`HardwareError` naming ``field`` (and ``file``).
    """
    amount = _quantity(value, _SIZE_UNITS, "size in bytes", "2MiB, 512KiB or 4MB", field, file)
    if amount < 0 or amount != amount.to_integral_value():
        raise HardwareError(
            f"{value!r} is not a whole, non-negative number of bytes",
            file=file,
            field=field,
            fix="give a non-negative integer number of bytes (e.g. 2MiB)",
        )
    return int(amount)


def parse_frequency(value: Any, *, field: str | None = None, file: str | None = None) -> int:
    """Hertz from an int or a string such as ``800MHz``, ``1GHz``, ``1.41GHz`` (a positive integer)."""
    amount = _quantity(value, _FREQ_UNITS, "frequency", "800MHz or 1GHz", field, file)
    if amount <= 0 or amount != amount.to_integral_value():
        raise HardwareError(
            f"{value!r} is not a positive whole number of hertz",
            file=file,
            field=field,
            fix="give a positive frequency such as 800MHz",
        )
    return int(amount)


# ------------------------------------------------------------------------ YAML
class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key repeated in one mapping."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False
                       ) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, Hashable):
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first given at line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: str | Path) -> tuple[Any, HardwareError | None]:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, HardwareError("file not found", file=str(path), fix="check the path")
    except (OSError, UnicodeDecodeError) as err:
        return None, HardwareError(
            f"cannot read the file ({err})", file=str(path), fix="pass a readable UTF-8 YAML file"
        )
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        if mark is not None:
            line, col = mark.line + 1, mark.column + 1
            duplicate = problem.startswith("duplicate key")
            return None, HardwareError(
                f"{'' if duplicate else 'malformed YAML: '}{problem} (line {line}, column {col})",
                file=str(path),
                field=f"line {line}",
                fix="keep one of the two entries" if duplicate
                else "repair the YAML there (indentation, a missing ':' or an unclosed bracket or quote)",
            )
        return None, HardwareError(
            f"malformed YAML: {problem}", file=str(path), fix="repair the YAML syntax"
        )
    if data is None:
        return None, HardwareError(
            "the file is empty",
            file=str(path),
            fix="describe the hardware (name, clock_hz, cores, dram, links); "
            "see `monet-ilp hw show edge_tpu --yaml FILE` for an example",
        )
    return data, None


def load_hardware(path: str | Path) -> Hardware:
    """Read and validate a hardware YAML file; raise the first :class:`HardwareError`."""
    data, err = _read_yaml(path)
    if err is not None:
        raise err
    return hardware_from_dict(data, source=str(path))


def validate_hardware_file(path: str | Path) -> list[MonetError]:
    """Every error of a hardware YAML file (an empty list when it is valid)."""
    data, err = _read_yaml(path)
    if err is not None:
        return [err]
    checker = _Checker(str(path))
    checker.hardware(data)
    return list(checker.errors)


def hardware_from_dict(data: Any, source: str | None = None) -> Hardware:
    """Build a :class:`Hardware` from parsed YAML; ``source`` names the file in errors.

    Raises the first :class:`HardwareError` found (its message counts the others).
    """
    checker = _Checker(source)
    hw = checker.hardware(data)
    if checker.errors:
        first = checker.errors[0]
        more = len(checker.errors) - 1
        if more:
            hint = f"`monet-ilp hw validate {source}` lists them" if source else "fix this one first"
            first = HardwareError(
                f"{first.problem} (and {more} more error{'s' if more > 1 else ''}: {hint})",
                file=first.file,
                field=first.field,
                fix=first.fix,
            )
        raise first
    assert hw is not None
    return hw


def hardware_to_dict(hw: Hardware) -> dict[str, Any]:
    """The explicit YAML form of ``hw`` (no ``count``, no ``topology``).

    ``hardware_from_dict(hardware_to_dict(hw)) == hw`` for every valid ``hw``.
    """
    data: dict[str, Any] = {"name": hw.name, "clock_hz": hw.clock_hz, "cores": []}
    for c in hw.cores:
        data["cores"].append(
            {
                "id": c.id,
                "array": {"simd_units": c.simd_units, "lanes": c.lanes},
                "sram_bytes": c.sram_bytes,
                "sram_bandwidth_bytes_per_cycle": c.sram_bandwidth_bytes_per_cycle,
                "sram_read_pj_per_byte": c.sram_read_pj_per_byte,
                "sram_write_pj_per_byte": c.sram_write_pj_per_byte,
                "mac_pj": c.mac_pj,
                "vector_ops_per_cycle": c.vector_ops_per_cycle,
                "vector_op_pj": c.vector_op_pj,
                "clock_hz": c.clock_hz,
                "rf_bytes": c.rf_bytes,
                "static_mw": c.static_mw,
                "utilisation": dict(c.utilisation),
                "op_types": list(c.op_types),
            }
        )
    for kind in (MemoryKind.DRAM, MemoryKind.HOST):
        for m in hw.memories_of_kind(kind):
            data[str(kind)] = {
                "capacity_bytes": m.capacity_bytes,
                "bandwidth_bytes_per_cycle": m.bandwidth_bytes_per_cycle,
                "read_pj_per_byte": m.read_pj_per_byte,
                "write_pj_per_byte": m.write_pj_per_byte,
                "static_mw": m.static_mw,
            }
    data["links"] = [
        {
            "id": l.id,
            "endpoints": list(l.endpoints),
            "bandwidth_bytes_per_cycle": l.bandwidth_bytes_per_cycle,
            "pj_per_byte": l.pj_per_byte,
            "latency_cycles": l.latency_cycles,
        }
        for l in hw.links
    ]
    if hw.params:
        data["params"] = dict(hw.params)
    return data


# -------------------------------------------------------------------- checking
def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _closest(word: str, options: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return found[0] if found else None


class _Checker:
    """Walks a parsed hardware description, collecting every error it finds."""

    def __init__(self, source: str | None):
        self.source = source
        self.errors: list[HardwareError] = []
        self.link_ids: list[str] = []  # ids of the explicit links, valid or not

    def fail(self, field: str, problem: str, fix: str) -> None:
        self.errors.append(HardwareError(problem, file=self.source, field=field or None, fix=fix))

    # ------------------------------------------------------------ primitives
    def mapping(self, value: Any, path: str, what: str) -> Mapping[Any, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.fail(path, f"{what} must be a mapping (key: value), got {_type(value)}",
                  f"write {path or 'the file'} as 'key: value' lines")
        return None

    def keys(self, record: Mapping[Any, Any], path: str, required: Sequence[str], optional: Sequence[str]
             ) -> None:
        allowed = tuple(required) + tuple(optional)
        for key in record:
            if not isinstance(key, str) or key not in allowed:
                close = _closest(str(key), allowed)
                self.fail(
                    _join(path, str(key)),
                    f"unknown key {key!r}",
                    (f"did you mean {close!r}? " if close else "")
                    + f"allowed keys: {', '.join(allowed)}",
                )
        for key in required:
            if key not in record:
                self.fail(_join(path, key), f"missing key {key!r}", f"add '{key}:'")

    def integer(self, record: Mapping[Any, Any], key: str, path: str, *, minimum: int,
                default: int | None = None) -> int | None:
        if key not in record:
            return default
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(_join(path, key), f"{key} must be an integer, got {_type(value)} {value!r}",
                      f"give an integer >= {minimum}")
            return None
        if value < minimum:
            self.fail(_join(path, key), f"{key} = {value} is below {minimum}", f"give an integer >= {minimum}")
            return None
        return value

    def size(self, record: Mapping[Any, Any], key: str, path: str, *, positive: bool = True,
             default: int | None = None) -> int | None:
        if key not in record:
            return default
        try:
            value = parse_size(record[key], field=_join(path, key), file=self.source)
        except HardwareError as err:
            self.errors.append(err)
            return None
        if positive and value <= 0:
            self.fail(_join(path, key), f"{key} = {record[key]!r} is not positive", "give a positive size, e.g. 2MiB")
            return None
        return value

    def frequency(self, record: Mapping[Any, Any], key: str, path: str, *, default: int | None = None
                  ) -> int | None:
        if key not in record:
            return default
        try:
            return parse_frequency(record[key], field=_join(path, key), file=self.source)
        except HardwareError as err:
            self.errors.append(err)
            return None

    def number(self, record: Mapping[Any, Any], key: str, path: str, *, positive: bool,
               default: float | None = None) -> float | None:
        """A finite float; ``positive`` for rates (> 0), else energies and powers (>= 0)."""
        if key not in record:
            return default
        value = _as_number(record[key])
        field = _join(path, key)
        if value is None:
            self.fail(field, f"{key} must be a number, got {_type(record[key])} {record[key]!r}",
                      "give a plain number (no unit: the unit is in the key name)")
            return None
        if positive and value <= 0:
            self.fail(field, f"{key} = {record[key]!r} must be positive", "give a number > 0")
            return None
        if not positive and value < 0:
            self.fail(field, f"{key} = {record[key]!r} is negative", "energies and powers must be >= 0")
            return None
        return value

    def ident(self, record: Mapping[Any, Any], path: str, what: str, *, dots: bool = False) -> str | None:
        if "id" not in record:
            return None
        value = record["id"]
        if not isinstance(value, str) or not value or any(ch.isspace() for ch in value):
            self.fail(_join(path, "id"), f"{what} id must be a non-empty string without spaces, got {value!r}",
                      f"give the {what} an id such as 'pe'")
            return None
        if not dots and "." in value:
            self.fail(_join(path, "id"), f"{what} id {value!r} contains '.'",
                      f"'.' is reserved for memory ids such as '{value.split('.')[0]}.sram'; rename the {what}")
            return None
        return value

    # ------------------------------------------------------------- sections
    def hardware(self, data: Any) -> Hardware | None:
        top = self.mapping(data, "", "the hardware description")
        if top is None:
            return None
        self.keys(top, "", TOP_REQUIRED, TOP_OPTIONAL)
        name = top.get("name")
        if "name" in top and (not isinstance(name, str) or not name.strip()):
            self.fail("name", f"name must be a non-empty string, got {name!r}", "give the hardware a name")
            name = None
        clock = self.frequency(top, "clock_hz", "")
        cores, core_ids = self.cores(top.get("cores"), clock) if "cores" in top else ([], [])
        memories = [
            Memory(
                id=c.sram,
                kind=MemoryKind.SRAM,
                capacity_bytes=c.sram_bytes,
                bandwidth_bytes_per_cycle=c.sram_bandwidth_bytes_per_cycle,
                read_pj_per_byte=c.sram_read_pj_per_byte,
                write_pj_per_byte=c.sram_write_pj_per_byte,
            )
            for _, c in cores
        ]
        dram_ok = True
        for kind in (MemoryKind.DRAM, MemoryKind.HOST):
            if str(kind) in top:
                memory = self.memory(top[str(kind)], kind)
                if memory is None:
                    dram_ok = dram_ok and kind is not MemoryKind.DRAM
                else:
                    memories.append(memory)
            elif kind is MemoryKind.DRAM:
                dram_ok = False
        known = [f"{c}.sram" for c in core_ids] + [str(k) for k in (MemoryKind.DRAM, MemoryKind.HOST) if str(k) in top]
        links: list[Link] = []
        links_ok = True
        generated_links: list[Link] = []
        if "topology" in top:
            generated = self.topology(top["topology"], core_ids)
            links_ok = generated is not None
            generated_links = generated or []
            links.extend(generated_links)
        if "links" in top:
            explicit = self.links(top["links"], known)
            links_ok = links_ok and explicit is not None
            links.extend(explicit or [])
        seen_links: set[str] = set()
        for link_id in [l.id for l in generated_links] + self.link_ids:
            if link_id in seen_links:
                self.fail(f"links.{link_id}", f"duplicate link id {link_id!r}",
                          "give every link a unique id (topology links are noc_<i>_<j> and dram_bus)")
            seen_links.add(link_id)
        params = top.get("params", {})
        if self.mapping(params, "params", "params") is None:
            params = {}
        if links_ok and dram_ok:
            self.reachability(cores, [m for m in memories if m.kind is MemoryKind.HOST], links)
        if self.errors or name is None or clock is None:
            return None
        return Hardware(
            name=name,
            clock_hz=clock,
            cores=tuple(c for _, c in cores),
            memories=tuple(memories),
            links=tuple(links),
            params=dict(params),
        )

    def cores(self, value: Any, clock: int | None) -> tuple[list[tuple[int, Core]], list[str]]:
        """The cores that built, with the index of their entry, and every declared core id."""
        if not isinstance(value, list) or not value:
            self.fail("cores", f"cores must be a non-empty list, got {_type(value)}",
                      "list at least one core under 'cores:' (each item starts with '- id:')")
            return [], []
        cores: list[tuple[int, Core]] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(value):
            path = f"cores[{i}]"
            record = self.mapping(entry, path, "a core")
            if record is None:
                continue
            declared = self.declared_ids(record, path)
            unique = True
            for core_id in declared:
                if core_id in seen:
                    self.fail(_join(path, "id"), f"duplicate core id {core_id!r} (also cores[{seen[core_id]}])",
                              "give every core a unique id")
                    unique = False
                else:
                    seen[core_id] = i
            built = self.core(record, path, clock)
            if unique:
                cores.extend((i, core) for core in built)
        return cores, list(seen)

    def declared_ids(self, record: Mapping[Any, Any], path: str) -> list[str]:
        core_id = self.ident(record, path, "core")
        if core_id is None:
            return []
        count = record.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            return [f"{core_id}_{k}" for k in range(count)]
        return [core_id]

    def core(self, record: Mapping[Any, Any], path: str, clock: int | None) -> list[Core]:
        errors_before = len(self.errors)
        self.keys(record, path, CORE_REQUIRED, CORE_OPTIONAL)
        core_id = record.get("id") if self.declared_ids_ok(record) else None
        array_path = _join(path, "array")
        simd_units = lanes = None
        if "array" in record:
            array = self.mapping(record["array"], array_path, "array")
            if array is not None:
                self.keys(array, array_path, ARRAY_REQUIRED, ())
                simd_units = self.integer(array, "simd_units", array_path, minimum=1)
                lanes = self.integer(array, "lanes", array_path, minimum=1)
        fields: dict[str, Any] = {  # the keyword arguments of Core (None: not given or not valid)
            "sram_bytes": self.size(record, "sram_bytes", path),
            "sram_bandwidth_bytes_per_cycle": self.number(record, "sram_bandwidth_bytes_per_cycle", path, positive=True),
            "sram_read_pj_per_byte": self.number(record, "sram_read_pj_per_byte", path, positive=False),
            "sram_write_pj_per_byte": self.number(record, "sram_write_pj_per_byte", path, positive=False),
            "mac_pj": self.number(record, "mac_pj", path, positive=False),
            "vector_ops_per_cycle": self.integer(record, "vector_ops_per_cycle", path, minimum=1),
            "vector_op_pj": self.number(record, "vector_op_pj", path, positive=False),
            "clock_hz": self.frequency(record, "clock_hz", path, default=clock),
            "rf_bytes": self.size(record, "rf_bytes", path, positive=False, default=0),
            "static_mw": self.number(record, "static_mw", path, positive=False, default=0.0),
        }
        count = self.integer(record, "count", path, minimum=1, default=None)
        utilisation = self.utilisation(record, path)
        op_types = self.op_types(record, path)
        if (len(self.errors) > errors_before or core_id is None or simd_units is None or lanes is None
                or None in fields.values()):
            return []
        ids = [core_id] if count is None else [f"{core_id}_{k}" for k in range(count)]
        return [
            Core(id=cid, simd_units=simd_units, lanes=lanes, utilisation=utilisation, op_types=op_types, **fields)
            for cid in ids
        ]

    @staticmethod
    def declared_ids_ok(record: Mapping[Any, Any]) -> bool:
        value = record.get("id")
        return isinstance(value, str) and bool(value) and "." not in value and not any(ch.isspace() for ch in value)

    def utilisation(self, record: Mapping[Any, Any], path: str) -> dict[str, float]:
        if "utilisation" not in record:
            return {"default": 1.0}
        field = _join(path, "utilisation")
        table = self.mapping(record["utilisation"], field, "utilisation")
        if table is None:
            return {"default": 1.0}
        out: dict[str, float] = {}
        for op_type, value in table.items():
            number = _as_number(value)
            if not isinstance(op_type, str) or number is None or not 0 < number <= 1:
                self.fail(_join(field, str(op_type)), f"utilisation of {op_type!r} is {value!r}, outside (0, 1]",
                          "give a factor in (0, 1] per op type (e.g. Conv: 0.9, default: 1.0)")
                continue
            out[op_type] = number
        return out

    def op_types(self, record: Mapping[Any, Any], path: str) -> tuple[str, ...]:
        if "op_types" not in record:
            return ()
        value = record["op_types"]
        if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
            self.fail(_join(path, "op_types"), f"op_types must be a list of op type names, got {value!r}",
                      "list anchor op types, e.g. [Conv, Gemm, MatMul, loss, optimizer]; omit it for all")
            return ()
        return tuple(value)

    def memory(self, value: Any, kind: MemoryKind) -> Memory | None:
        path = str(kind)
        record = self.mapping(value, path, path)
        if record is None:
            return None
        before = len(self.errors)
        self.keys(record, path, MEMORY_REQUIRED, MEMORY_OPTIONAL)
        fields: dict[str, Any] = {  # the keyword arguments of Memory (None: not given or not valid)
            "capacity_bytes": self.size(record, "capacity_bytes", path),
            "bandwidth_bytes_per_cycle": self.number(record, "bandwidth_bytes_per_cycle", path, positive=True),
            "read_pj_per_byte": self.number(record, "read_pj_per_byte", path, positive=False),
            "write_pj_per_byte": self.number(record, "write_pj_per_byte", path, positive=False),
            "static_mw": self.number(record, "static_mw", path, positive=False, default=0.0),
        }
        if len(self.errors) > before or None in fields.values():
            return None
        return Memory(id=path, kind=kind, **fields)

    def links(self, value: Any, known: list[str]) -> list[Link] | None:
        if not isinstance(value, list):
            self.fail("links", f"links must be a list, got {_type(value)}",
                      "list the links under 'links:', each item starting with '- id:'")
            return None
        before = len(self.errors)
        links = []
        for i, entry in enumerate(value):
            record = self.mapping(entry, f"links[{i}]", "a link")
            if record is None:
                continue
            link_id = self.ident(record, f"links[{i}]", "link", dots=True)
            if link_id is not None:
                self.link_ids.append(link_id)
            path = f"links.{link_id}" if link_id else f"links[{i}]"
            self.keys(record, path, LINK_REQUIRED, LINK_OPTIONAL)
            endpoints = self.endpoints(record, path, known)
            bandwidth = self.number(record, "bandwidth_bytes_per_cycle", path, positive=True)
            pj = self.number(record, "pj_per_byte", path, positive=False)
            latency = self.integer(record, "latency_cycles", path, minimum=0, default=0)
            if (link_id is not None and endpoints is not None and bandwidth is not None and pj is not None
                    and latency is not None):
                links.append(Link(link_id, endpoints, bandwidth, pj, latency))
        return links if len(self.errors) == before else None

    def endpoints(self, record: Mapping[Any, Any], path: str, known: list[str]) -> tuple[str, ...] | None:
        if "endpoints" not in record:
            return None
        field = _join(path, "endpoints")
        value = record["endpoints"]
        if not isinstance(value, list) or not all(isinstance(e, str) for e in value):
            self.fail(field, f"endpoints must be a list of memory ids, got {value!r}",
                      "write e.g. [pe_0.sram, dram]")
            return None
        ok = True
        if len(value) < 2:
            self.fail(field, f"a link needs at least two endpoints, got {len(value)}",
                      "name the two (or more, for a bus) memories it joins")
            ok = False
        if len(set(value)) != len(value):
            self.fail(field, f"endpoints {value} repeat a memory", "name each memory once")
            ok = False
        for e in value:
            if e not in known:
                close = _closest(e, known)
                self.fail(field, f"unknown memory {e!r}",
                          (f"did you mean {close!r}? " if close else "")
                          + "endpoints are '<core id>.sram', 'dram' or 'host'; known: " + ", ".join(known))
                ok = False
        return tuple(value) if ok else None

    def topology(self, value: Any, core_ids: list[str]) -> list[Link] | None:
        record = self.mapping(value, "topology", "topology")
        if record is None:
            return None
        before = len(self.errors)
        self.keys(record, "topology", TOPOLOGY_REQUIRED, TOPOLOGY_OPTIONAL)
        kind = record.get("kind")
        if "kind" in record and kind not in TOPOLOGY_KINDS:
            close = _closest(str(kind), TOPOLOGY_KINDS)
            self.fail("topology.kind", f"unknown topology {kind!r}",
                      (f"did you mean {close!r}? " if close else "") + f"use one of: {', '.join(TOPOLOGY_KINDS)}")
        rows = self.integer(record, "rows", "topology", minimum=1)
        cols = self.integer(record, "cols", "topology", minimum=1)
        noc_bw = self.number(record, "noc_bandwidth_bytes_per_cycle", "topology", positive=True)
        noc_pj = self.number(record, "noc_pj_per_byte", "topology", positive=False)
        noc_lat = self.integer(record, "noc_latency_cycles", "topology", minimum=0, default=0)
        bus_bw = self.number(record, "dram_bus_bandwidth_bytes_per_cycle", "topology", positive=True, default=None)
        bus_pj = self.number(record, "dram_bus_pj_per_byte", "topology", positive=False, default=None)
        bus_lat = self.integer(record, "dram_bus_latency_cycles", "topology", minimum=0, default=0)
        if bus_bw is not None and "dram_bus_pj_per_byte" not in record:
            self.fail("topology.dram_bus_pj_per_byte", "missing key 'dram_bus_pj_per_byte'",
                      "give the DRAM bus's energy per byte with its bandwidth")
        if bus_bw is None and "dram_bus_bandwidth_bytes_per_cycle" not in record and "dram_bus_pj_per_byte" in record:
            self.fail("topology.dram_bus_bandwidth_bytes_per_cycle",
                      "missing key 'dram_bus_bandwidth_bytes_per_cycle'",
                      "give the DRAM bus's bandwidth with its energy per byte")
        if rows is not None and cols is not None and core_ids and rows * cols != len(core_ids):
            self.fail("topology.rows", f"a {rows} x {cols} mesh holds {rows * cols} cores, but there are "
                      f"{len(core_ids)}", "make rows x cols equal the number of cores (count included)")
        if len(self.errors) > before:
            return None
        # Without errors every required key is there and valid (a missing one is an error).
        assert rows is not None and cols is not None and noc_bw is not None and noc_pj is not None
        assert noc_lat is not None and bus_lat is not None
        if not core_ids:
            return []
        return mesh_links(
            [f"{c}.sram" for c in core_ids], rows, cols, noc_bw, noc_pj, noc_lat,
            dram_bus=(bus_bw, bus_pj, bus_lat) if bus_bw is not None and bus_pj is not None else None,
        )

    def reachability(self, cores: list[tuple[int, Core]], hosts: list[Memory], links: list[Link]) -> None:
        import networkx as nx  # networkx takes 0.1 s to import: only when a description is checked

        connected: nx.Graph[str] = nx.Graph()
        connected.add_nodes_from(["dram", *(core.sram for _, core in cores), *(h.id for h in hosts)])
        for link in links:
            nx.add_path(connected, link.endpoints)
        with_dram = nx.node_connected_component(connected, "dram")
        for i, core in cores:
            if core.sram not in with_dram:
                self.fail(f"cores[{i}]", f"core {core.id!r} has no path from {core.sram!r} to 'dram'",
                          f"add a link whose endpoints include {core.sram!r} and 'dram' "
                          "(or a core it is linked to), or a topology with a dram bus")
        for host in hosts:
            if not any(core.sram in nx.node_connected_component(connected, host.id) for _, core in cores):
                self.fail("host", "no link reaches the 'host' memory from a core",
                          "add a link whose endpoints include 'host' and a core's SRAM or 'dram'")


def mesh_links(
    srams: list[str],
    rows: int,
    cols: int,
    bandwidth: float,
    pj_per_byte: float,
    latency_cycles: int = 0,
    *,
    dram_bus: tuple[float, float, int] | None = None,
) -> list[Link]:
    """Links of a ``rows x cols`` mesh over ``srams`` (row-major), and an optional DRAM bus.

    Neighbours ``i < j`` (``j = i + 1`` in a row, ``j = i + cols`` in a column) get
    link ``noc_<i>_<j>``, in increasing ``(i, j)`` order; ``dram_bus`` =
    ``(bandwidth, pj_per_byte, latency_cycles)`` adds one shared link ``dram_bus``
    whose endpoints are every SRAM and ``dram``.
    """
    pairs = set()
    for i in range(rows * cols):
        r, c = divmod(i, cols)
        if c + 1 < cols:
            pairs.add((i, i + 1))
        if r + 1 < rows:
            pairs.add((i, i + cols))
    links = [
        Link(f"noc_{i}_{j}", (srams[i], srams[j]), float(bandwidth), float(pj_per_byte), latency_cycles)
        for i, j in sorted(pairs)
    ]
    if dram_bus is not None:
        bw, pj, lat = dram_bus
        links.append(Link(DRAM_BUS, (*srams, "dram"), float(bw), float(pj), lat))
    return links


def _as_number(value: Any) -> float | None:
    """A finite float from an int, a float or a numeric string (YAML reads ``1e9`` as a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.replace("_", ""))
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _type(value: Any) -> str:
    return {
        type(None): "nothing",
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }.get(type(value), type(value).__name__)
