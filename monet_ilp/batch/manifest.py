"""Instance-set manifests (YAML) -> validated :class:`~monet_ilp.batch.job.Job` s.

A manifest spells out a grid: models x hardware points x problems x budgets x
objectives x fusion plans x backends x time limits x seeds (the format is in
``instances/README.md``).  It is read with a ``yaml.SafeLoader`` that remembers the
line of every key and list item, so each error names the file, the line and the
key path, e.g. ``edge.yaml: line 12, key hardware[0].sweep.lanes[2]: ...``.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import inspect
import itertools
import random
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from monet_ilp.batch.job import Job, job_key
from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import PHASES
from monet_ilp.graph.fusion import load_fusion
from monet_ilp.graph.load import GENERATED, KINDS, builder
from monet_ilp.hardware.cluster import load_cluster
from monet_ilp.hardware.presets import PRESETS, preset
from monet_ilp.hardware.schema import load_hardware
from monet_ilp.make import parse_budget
from monet_ilp.problems import registry
from monet_ilp.problems.p4.instance import p4_instance_from_dict

__all__ = ["MONET_EDGE_TPU_SPACE", "Manifest", "ManifestError", "load_manifest", "parse_manifest"]


class ManifestError(MonetError):
    """A manifest is malformed; the message names the file, the line and the key."""


#: MONET's Edge-TPU design space (Morlier et al., Fig. 4): SIMD units U, lanes L,
#: SRAM per PE, and PEs per side of a square mesh (``mesh`` sets n_pe_x = n_pe_y).
MONET_EDGE_TPU_SPACE: Mapping[str, tuple[Any, ...]] = {
    "simd_units": (16, 32, 64, 128),
    "lanes": (1, 2, 4, 8),
    "pe_sram_bytes": ("512KiB", "1MiB", "2MiB", "4MiB"),
    "mesh": (1, 2, 3, 4, 5, 6, 7, 8),
}
SPACES = {"monet": ("edge_tpu", MONET_EDGE_TPU_SPACE)}

TOP_KEYS = ("name", "description", "plugins", "models", "hardware", "problems", "budgets", "objectives",
            "backends", "options", "time_limits", "seeds", "workers", "alpha", "runtime_limit_cycles",
            "offload", "plans", "fusion")
#: The keys of a ``plans`` section (P4: transformers on clusters, ``formulations/p4_problem.md``).
PLAN_KEYS = ("models", "clusters", "global_batches", "objectives", "alpha")
#: The fields of a P4 model spec an error may name (the entry of ``plans.models`` it is about).
_MODEL_FIELDS = {"model", "family", "preset", "seq", "name", "layers", "hidden", "heads", "vocab", "ffn", "gated",
                 "dropout", "dtype_bytes", "kv_heads", "tied", "learned_positions"}
MODEL_KINDS = KINDS
PROBLEMS = ("P1", "P2", "P3")
OBJECTIVES = ("compute", "latency", "energy", "weighted")
DEFAULT_TIME_LIMIT = 60.0


@dataclass(frozen=True)
class Manifest:
    """A validated manifest and the jobs it expands to (in grid order, duplicates dropped)."""

    name: str
    path: str
    description: str
    jobs: tuple[Job, ...]
    duplicates: int = 0


# ======================================================================= YAML
class _Map(dict[Any, Any]):
    """A mapping that remembers its own line and the line of each key (1-based)."""

    line = 0
    lines: dict[Any, int]


class _Seq(list[Any]):
    """A list that remembers its own line and the line of each item (1-based)."""

    line = 0
    lines: list[int]


class _Loader(yaml.SafeLoader):
    """SafeLoader building :class:`_Map` / :class:`_Seq`, rejecting a key repeated in one mapping."""


def _construct_map(loader: yaml.SafeLoader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)
    out = _Map()
    out.line = node.start_mark.line + 1
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(None, None, "a key must be a plain value",
                                                    key_node.start_mark)
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first given at line {out.lines[key]})", key_node.start_mark)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


def _construct_seq(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> _Seq:
    out = _Seq(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)


def _plain(value: Any) -> Any:
    """Plain dicts and lists (JSON-able) from the marked containers."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# ================================================================= checking
class _Where:
    """Builds errors that name the manifest file, the line and the key path."""

    def __init__(self, path: str):
        self.path = path

    def error(self, container: Any, index: Any, keypath: str, problem: str, fix: str) -> ManifestError:
        line = None
        if isinstance(container, _Map):
            line = container.lines.get(index, container.line) if index is not None else container.line
        elif isinstance(container, _Seq):
            line = container.lines[index] if isinstance(index, int) and index < len(container.lines) \
                else container.line
        where = f"line {line}, key {keypath}" if line else f"key {keypath}"
        return ManifestError(problem, file=self.path, field=where, fix=fix)


def _unknown_keys(w: _Where, data: _Map, allowed: tuple[str, ...], prefix: str) -> None:
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            raise w.error(data, key, f"{prefix}{key}", f"unknown key {key!r}",
                          (f"did you mean {close[0]!r}? " if close else "") + f"keys: {', '.join(allowed)}")


def _as_list(w: _Where, data: _Map, key: str, default: list[Any]) -> _Seq:
    """A grid dimension: a list, or a single value meaning a list of one."""
    if key not in data:
        out = _Seq(default)
        out.line, out.lines = data.line, [data.line] * len(default)
        return out
    value = data[key]
    if isinstance(value, _Seq):
        if not value:
            raise w.error(data, key, key, f"{key} is an empty list", f"give at least one value, or drop {key}")
        return value
    out = _Seq([value])
    out.line, out.lines = data.lines[key], [data.lines[key]]
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _file(w: _Where, base: Path, container: Any, index: Any, keypath: str, value: Any) -> Path:
    if not isinstance(value, str) or not value:
        raise w.error(container, index, keypath, f"{value!r} is not a file path",
                      "give a path, relative to the manifest's folder")
    path = (base / value).resolve()
    if not path.is_file():
        raise w.error(container, index, keypath, f"file not found: {path}",
                      "give a path relative to the manifest's folder, or an absolute path")
    return path


def _sweep(w: _Where, entry: _Map, keypath: str) -> list[dict[str, Any]]:
    """The points of an entry's ``sweep`` (cartesian product, keys in the order written)."""
    sweep = entry.get("sweep")
    if sweep is None:
        return [{}]
    if not isinstance(sweep, _Map) or not sweep:
        raise w.error(entry, "sweep", f"{keypath}.sweep", "sweep must be a mapping of parameter -> list",
                      "write e.g. sweep: {n: [50, 100]}")
    for key, values in sweep.items():
        if not isinstance(values, _Seq) or not values:
            raise w.error(sweep, key, f"{keypath}.sweep.{key}", f"sweep.{key} must be a non-empty list",
                          f"write {key}: [value, value, ...]")
    keys = list(sweep)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(sweep[k] for k in keys))]


def _where_param(entry: _Map, key: str, keypath: str, value: Any = None) -> tuple[Any, Any, str]:
    """The container, index and key path where parameter ``key`` (and ``value``) is written."""
    for section in ("sweep", "params"):
        block = entry.get(section)
        if isinstance(block, _Map) and key in block:
            if section == "sweep" and isinstance(block[key], _Seq) and value in block[key]:
                i = block[key].index(value)
                return block[key], i, f"{keypath}.sweep.{key}[{i}]"
            return block, key, f"{keypath}.{section}.{key}"
    for kind in MODEL_KINDS:
        block = entry.get(kind)
        if isinstance(block, _Map) and key in block:
            return block, key, f"{keypath}.{kind}.{key}"
    return entry, None, keypath


def _params_block(w: _Where, entry: _Map, keypath: str) -> dict[str, Any]:
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise w.error(entry, "params", f"{keypath}.params", "params must be a mapping",
                      "write e.g. params: {batch: 8}")
    return dict(params)


def _check_overlap(w: _Where, entry: _Map, keypath: str, fixed: Mapping[str, Any]) -> None:
    sweep = entry.get("sweep")
    if isinstance(sweep, _Map):
        for key in sweep:
            if key in fixed:
                raise w.error(sweep, key, f"{keypath}.sweep.{key}", f"{key!r} is given both fixed and swept",
                              "keep it in one place")


# =================================================================== models
def _allowed_params(fn: Callable[..., Any], drop: tuple[str, ...] = ()) -> tuple[str, ...]:
    return tuple(name for name, p in inspect.signature(fn).parameters.items()
                 if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name not in drop)


def _model_points(w: _Where, base: Path, entry: Any, keypath: str) -> list[tuple[dict[str, Any], str | None]]:
    """(canonical model spec, absolute file path or None) for every point of a model entry."""
    if not isinstance(entry, _Map):
        raise w.error(entry, None, keypath, "a model must be a mapping",
                      "write e.g. {zoo: resnet18, params: {batch: 8}} or {chain: {length: 8}}")
    kinds = [k for k in MODEL_KINDS if k in entry]
    if len(kinds) != 1:
        raise w.error(entry, None, keypath, f"a model names exactly one of {', '.join(MODEL_KINDS)}"
                      + (f" (found {', '.join(kinds)})" if kinds else ""),
                      "write e.g. zoo: resnet18, or chain: {length: 8}")
    kind = kinds[0]
    _unknown_keys(w, entry, (kind, "params", "sweep", "phase"), f"{keypath}.")
    phase = entry.get("phase", "training")
    if phase not in PHASES:
        raise w.error(entry, "phase", f"{keypath}.phase", f"unknown phase {phase!r}",
                      f"use one of {', '.join(PHASES)} (inference: the forward ops alone)")
    value = entry[kind]
    fixed = _params_block(w, entry, keypath)
    path: Path | None = None
    if kind == "zoo":
        if not isinstance(value, str) or value not in zoo.MODELS:
            close = difflib.get_close_matches(str(value), list(zoo.MODELS), n=1)
            raise w.error(entry, kind, f"{keypath}.zoo", f"unknown zoo model {value!r}",
                          (f"did you mean {close[0]!r}? " if close else "") + f"models: {', '.join(zoo.MODELS)}")
        allowed = _allowed_params(zoo.MODELS[value], drop=("name",)) + tuple(zoo.IMPORT_OPTIONS)
    elif kind in GENERATED:
        if value is None:
            value = _Map()
        if not isinstance(value, _Map):
            raise w.error(entry, kind, f"{keypath}.{kind}", f"{kind} must be a mapping of its parameters",
                          "write e.g. chain: {length: 8, costs: [1, 10]}" if kind == "chain"
                          else "write e.g. random: {n: 50, seed: 0}")
        allowed = _allowed_params(builder(kind), drop=("name",))
        fixed = {**dict(value), **fixed}
    elif kind == "onnx":
        path = _file(w, base, entry, kind, f"{keypath}.onnx", value)
        allowed = _allowed_params(builder(kind), drop=("model", "name"))
    else:
        path = _file(w, base, entry, kind, f"{keypath}.{kind}", value)
        allowed = ()
    _check_overlap(w, entry, keypath, fixed)
    points = []
    for point in _sweep(w, entry, keypath):
        params = {**fixed, **point}
        for key in params:
            if key not in allowed:
                container, index, where = _where_param(entry, key, keypath)
                close = difflib.get_close_matches(str(key), allowed, n=1)
                raise w.error(container, index, where, f"unknown parameter {key!r} of {kind} {value!r}"
                              if isinstance(value, str) else f"unknown parameter {key!r} of {kind}",
                              (f"did you mean {close[0]!r}? " if close else "")
                              + (f"parameters: {', '.join(allowed)}" if allowed else "this kind takes none"))
        if kind in GENERATED:
            required = GENERATED[kind]
            if required not in params:
                raise w.error(entry, kind, f"{keypath}.{kind}", f"{kind} needs {required!r}",
                              f"give {required}, fixed or in sweep")
            spec: dict[str, Any] = {kind: _plain(params)}
        elif kind == "zoo":
            spec = {"zoo": value, "params": _plain(params)}
        else:
            assert path is not None  # every kind but zoo and the generated ones names a file
            spec = {kind: value, "sha256": _sha256(path)}
            if params:
                spec["params"] = _plain(params)
        if phase != "training":  # the key only when it is not the default: earlier job keys stay
            spec["phase"] = phase
        points.append((spec, str(path) if path else None))
    return points


# ================================================================= hardware
def _hardware_points(
    w: _Where, base: Path, entry: Any, keypath: str,
) -> list[tuple[dict[str, Any] | None, str | None]]:
    """(canonical hardware spec or None, absolute file path or None) for every point of an entry."""
    if entry is None or entry == "none":
        return [(None, None)]
    if not isinstance(entry, _Map):
        raise w.error(entry, None, keypath, "a hardware entry must be a mapping or null",
                      "write e.g. {preset: edge_tpu, params: {n_pe_x: 2}}, {file: hw.yaml}, or null "
                      "(P1 with the graph's own costs)")
    if ("preset" in entry) == ("file" in entry):
        raise w.error(entry, None, keypath, "a hardware entry names exactly one of preset, file",
                      "write e.g. preset: edge_tpu, or file: my_accel.yaml")
    if "file" in entry:
        _unknown_keys(w, entry, ("file",), f"{keypath}.")
        path = _file(w, base, entry, "file", f"{keypath}.file", entry["file"])
        try:
            hw = load_hardware(path)
        except MonetError as err:
            raise w.error(entry, "file", f"{keypath}.file", f"invalid hardware file: {err.message}",
                          f"check it with `monet-ilp hw validate {path}`") from None
        return [({"file": entry["file"], "sha256": _sha256(path), "name": hw.name}, str(path))]
    _unknown_keys(w, entry, ("preset", "params", "sweep", "space", "sample", "seed"), f"{keypath}.")
    name = entry["preset"]
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name), list(PRESETS), n=1)
        raise w.error(entry, "preset", f"{keypath}.preset", f"unknown hardware preset {name!r}",
                      (f"did you mean {close[0]!r}? " if close else "") + f"presets: {', '.join(PRESETS)}")
    fixed = _params_block(w, entry, keypath)
    _check_overlap(w, entry, keypath, fixed)
    points = _sweep(w, entry, keypath)
    if "space" in entry:
        space = entry["space"]
        if space not in SPACES or SPACES[space][0] != name:
            known = [s for s, (p, _) in SPACES.items() if p == name]
            raise w.error(entry, "space", f"{keypath}.space", f"unknown design space {space!r} for preset {name!r}",
                          f"spaces: {', '.join(known)}" if known else f"preset {name!r} has no named space")
        given = set(fixed) | (set(entry["sweep"]) if isinstance(entry.get("sweep"), _Map) else set())
        space_dims = {k: v for k, v in SPACES[space][1].items() if k not in given
                      and not (k == "mesh" and given & {"n_pe_x", "n_pe_y"})}
        keys = list(space_dims)
        points = [{**dict(zip(keys, combo, strict=True)), **p} for combo in itertools.product(*space_dims.values())
                  for p in points]
    allowed = tuple(PRESETS[name]) + (("mesh",) if name == "edge_tpu" else ())
    checked: set[tuple[str, str]] = set()
    for point in points:
        for key, value in {**fixed, **point}.items():
            if (key, repr(value)) in checked:
                continue
            checked.add((key, repr(value)))
            container, index, where = _where_param(entry, key, keypath, value)
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                raise w.error(container, index, where, f"unknown parameter {key!r} of preset {name!r}",
                              (f"did you mean {close[0]!r}? " if close else "") + f"parameters: {', '.join(allowed)}")
            try:
                preset(name, **_preset_params(name, {key: value}))
            except MonetError as err:
                raise w.error(container, index, where, f"{key} = {value!r}: {err.problem}",
                              err.fix or "see `monet-ilp hw show " + name + "`") from None
            if key == "mesh" and ({"n_pe_x", "n_pe_y"} & (set(fixed) | set(point))):
                raise w.error(container, index, where, "mesh sets n_pe_x and n_pe_y; give one or the other",
                              "drop mesh, or drop n_pe_x/n_pe_y")
    points = _sample(w, entry, keypath, points)
    out: list[tuple[dict[str, Any] | None, str | None]] = []
    for point in points:
        params = _preset_params(name, {**fixed, **point})
        try:
            hw = preset(name, **params)
        except MonetError as err:
            raise w.error(entry, None, keypath, f"the point {params} is invalid: {err.problem}",
                          err.fix or "check the parameters") from None
        resolved = {k: v for k, v in dict(hw.params).items() if k != "preset"}
        out.append(({"preset": name, "name": hw.name, "params": _plain(resolved)}, None))
    return out


def _preset_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(params)
    if name == "edge_tpu" and "mesh" in out:
        side = out.pop("mesh")
        out["n_pe_x"] = out["n_pe_y"] = side
    return out


def _sample(w: _Where, entry: _Map, keypath: str, points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``sample: N, seed: S``: N points drawn without replacement, kept in grid order."""
    if "sample" not in entry:
        if "seed" in entry:
            raise w.error(entry, "seed", f"{keypath}.seed", "seed is given without sample",
                          "add sample: N (the number of points to draw), or drop seed")
        return points
    n, seed = entry["sample"], entry.get("seed", 0)
    if not _is_int(n) or n < 1:
        raise w.error(entry, "sample", f"{keypath}.sample", f"sample = {n!r} is not a positive integer",
                      "give the number of points to draw, e.g. sample: 16")
    if not _is_int(seed):
        raise w.error(entry, "seed", f"{keypath}.seed", f"seed = {seed!r} is not an integer",
                      "give an integer seed, e.g. seed: 0")
    if n >= len(points):
        return points
    chosen = sorted(random.Random(seed).sample(range(len(points)), n))
    return [points[i] for i in chosen]


# ================================================================ backends
def _backends(w: _Where, data: _Map, plugins: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(backend name, label, options) for every backend entry.

    Backend names and option names are checked against the registry
    (:mod:`monet_ilp.problems.registry`), with the words ``solve()`` uses for them.
    """
    for i, module in enumerate(plugins):
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001
            raise w.error(data["plugins"], i, f"plugins[{i}]", f"cannot import plugin {module!r} "
                          f"({type(err).__name__}: {err})", "put the module on PYTHONPATH (the workers "
                          "import it too), or drop it") from None
    known = registry.names()
    shared = data.get("options", _Map())
    if not isinstance(shared, _Map):
        raise w.error(data, "options", "options", "options must map backend names to option mappings",
                      "write e.g. options: {milp: {milp_solver: cbc}}")
    for name, opts in shared.items():
        if not isinstance(opts, _Map):
            raise w.error(shared, name, f"options.{name}", f"options of {name!r} must be a mapping",
                          "write e.g. milp: {milp_solver: cbc}")
    entries = _as_list(w, data, "backends", [])
    if "backends" not in data:
        raise w.error(data, None, "backends", "the manifest lists no backends",
                      f"add backends: [...], from: {', '.join(known)}")
    out: list[tuple[str, str, dict[str, Any]]] = []
    labels: dict[str, int] = {}
    for i, entry in enumerate(entries):
        where = f"backends[{i}]"
        container: _Map | _Seq = entries
        index: str | int = i
        own = _Map()
        if isinstance(entry, _Map):
            _unknown_keys(w, entry, ("name", "label", "options"), f"{where}.")
            if "name" not in entry:
                raise w.error(entries, i, where, "a backend entry needs a name", "write {name: milp, ...}")
            name, label = entry["name"], entry.get("label", entry["name"])
            container, index, where = entry, "name", f"{where}.name"
            own = entry.get("options", _Map())
            if not isinstance(own, _Map):
                raise w.error(entry, "options", f"backends[{i}].options", "options must be a mapping",
                              "write e.g. options: {milp_solver: cbc}")
        else:
            name = label = entry
        if not isinstance(name, str) or name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            raise w.error(container, index, where, f"unknown backend {name!r}",
                          (f"did you mean {close[0]!r}? " if close else "") + f"backends: {', '.join(known)}")
        _check_options(w, name, own, f"backends[{i}].options")
        if not isinstance(label, str) or not label:
            raise w.error(entry, "label", f"backends[{i}].label", "label must be a non-empty string",
                          "name the variant, e.g. label: milp-cbc")
        if label in labels:
            raise w.error(entries, i, f"backends[{i}]", f"backend label {label!r} is given twice "
                          f"(first as backends[{labels[label]}])", "give each variant its own label")
        labels[label] = i
        out.append((name, label, _plain({**dict(shared.get(name, {})), **own})))
    for name in shared:
        if name not in {b for b, _, _ in out}:
            raise w.error(shared, name, f"options.{name}", f"options for backend {name!r}, which is not listed",
                          "list it under backends, or drop its options")
        _check_options(w, name, shared[name], f"options.{name}")
    return out


def _check_options(w: _Where, name: str, options: _Map, keypath: str) -> None:
    """Refuse an option that backend ``name`` takes on no problem class, as ``solve()`` would."""
    known = registry.options_of(name)
    if known is None:  # a plugin that declares no options takes any
        return
    unknown = sorted((key for key in options if not str(key).startswith("_") and key not in known), key=str)
    if unknown:
        raise w.error(options, unknown[0], f"{keypath}.{unknown[0]}",
                      registry.unknown_option_message(name, None, map(str, unknown)), registry.option_fix(known))


# =================================================================== values
#: The plans a ``fusion`` entry may ask for (``formulations/fusion.md``): every chain fused
#: whole, Stream's rule (FU.K2), or a plan file.
FUSION_KINDS = ("chains", "stream", "file")


def _fusion(w: _Where, base: Path, seq: _Seq, i: int) -> dict[str, Any] | None:
    """A ``fusion`` entry: null or ``none`` (layer by layer), ``{chains: N}``, ``{stream: N}``
    (N tiles per stack), or ``{file: plan.json}``; each with an optional ``axis``."""
    entry = seq[i]
    where = f"fusion[{i}]"
    if entry is None or entry == "none":
        return None
    fix = "write null, {chains: 4}, {stream: 4} or {file: plan.json}, with an optional axis: rows or batch"
    if not isinstance(entry, _Map):
        raise w.error(seq, i, where, f"unknown fusion entry {entry!r}", fix)
    _unknown_keys(w, entry, (*FUSION_KINDS, "axis"), f"{where}.")
    kinds = [k for k in FUSION_KINDS if k in entry]
    if len(kinds) != 1:
        raise w.error(seq, i, where, "a fusion entry names exactly one of chains, stream and file", fix)
    kind = kinds[0]
    axis = entry.get("axis", "rows")
    if axis not in ("rows", "batch"):
        raise w.error(entry, "axis", f"{where}.axis", f"unknown axis {axis!r}", "use rows or batch")
    if kind == "file":
        path = base / str(entry["file"])
        try:
            load_fusion(path)
        except MonetError as err:
            raise w.error(entry, "file", f"{where}.file", err.problem, err.fix or "fix the plan file") from None
        return {"file": str(entry["file"]), "path": str(path), "axis": axis}
    tiles = entry[kind]
    if not _is_int(tiles) or tiles < 1:
        raise w.error(entry, kind, f"{where}.{kind}", f"{kind} = {tiles!r} is not a positive tile count",
                      f"give the tiles per stack, e.g. {kind}: 4")
    return {kind: int(tiles), "axis": axis}


def _budget(w: _Where, seq: _Seq, i: int) -> float | int | None:
    try:
        return parse_budget(seq[i], field=f"budgets[{i}]")
    except MonetError as err:
        raise w.error(seq, i, f"budgets[{i}]", err.problem, f"{err.fix}, or null") from None


def _choice(w: _Where, seq: _Seq, i: int, key: str, allowed: tuple[str, ...], nullable: bool) -> str | None:
    value = seq[i]
    if value is None and nullable:
        return None
    if value not in allowed:
        close = difflib.get_close_matches(str(value), allowed, n=1)
        raise w.error(seq, i, f"{key}[{i}]", f"unknown {key[:-1]} {value!r}",
                      (f"did you mean {close[0]!r}? " if close else "") + f"use one of: {', '.join(allowed)}"
                      + (" (or null for the default)" if nullable else ""))
    choice: str = value
    return choice


# ==================================================================== entry
def load_manifest(path: str | Path) -> Manifest:
    """Read, validate and expand a manifest file.

    Raises
    ------
    ManifestError
        Naming the file, the line and the key of the first problem found.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ManifestError("file not found", file=str(path), fix="check the path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"cannot read the file ({err})", file=str(path),
                            fix="pass a readable UTF-8 YAML file") from None
    return parse_manifest(text, source=str(path), base=path.resolve().parent)


def parse_manifest(text: str, *, source: str = "<manifest>", base: str | Path = ".") -> Manifest:
    """Validate and expand a manifest given as text (``source`` names it in errors)."""
    w = _Where(source)
    base = Path(base)
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        line = f"line {mark.line + 1}" if mark is not None else None
        raise ManifestError(f"malformed YAML: {problem}" + (f" (column {mark.column + 1})" if mark else ""),
                            file=source, field=line,
                            fix="keep one of the two entries" if problem.startswith("duplicate key")
                            else "repair the YAML there (indentation, a missing ':' or an unclosed bracket)") \
            from None
    if data is None:
        raise ManifestError("the manifest is empty", file=source,
                            fix="give at least models and backends (see instances/README.md)")
    if not isinstance(data, _Map):
        raise ManifestError("a manifest must be a mapping of keys (models, hardware, budgets, ...)",
                            file=source, field="line 1", fix="see instances/README.md for the format")
    _unknown_keys(w, data, TOP_KEYS, "")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise w.error(data, "name", "name", "name must be a non-empty string", "e.g. name: tiny_exact")
    description = data.get("description", "")
    plugins = _as_list(w, data, "plugins", [])
    for i, module in enumerate(plugins):
        if not isinstance(module, str) or not module:
            raise w.error(plugins, i, f"plugins[{i}]", f"{module!r} is not a module name",
                          "give importable module names, e.g. my_backends")

    limits_seq = _as_list(w, data, "time_limits", [DEFAULT_TIME_LIMIT])
    for i, limit in enumerate(limits_seq):
        if not _is_number(limit) or limit <= 0:
            raise w.error(limits_seq, i, f"time_limits[{i}]", f"time limit {limit!r} is not a positive number",
                          "give seconds, e.g. time_limits: [10, 60]")
    plan_jobs = _plan_jobs(w, base, data, name, [float(x) for x in limits_seq], list(plugins))
    if "plans" in data and "models" not in data:
        return Manifest(name=name, path=source, description=str(description), jobs=tuple(plan_jobs), duplicates=0)
    if "models" not in data:
        raise w.error(data, None, "models", "the manifest lists no models",
                      "add models: [{zoo: resnet18}, {chain: {length: 8}}, ...]")
    models_seq = _as_list(w, data, "models", [])
    models = [pt for i, entry in enumerate(models_seq)
              for pt in _model_points(w, base, entry, f"models[{i}]")]
    hardware_seq = _as_list(w, data, "hardware", [None])
    hardware = [pt for i, entry in enumerate(hardware_seq)
                for pt in _hardware_points(w, base, entry, f"hardware[{i}]")]

    problems_seq = _as_list(w, data, "problems", ["P1"])
    problems = [_choice(w, problems_seq, i, "problems", PROBLEMS, False) for i in range(len(problems_seq))]
    budgets_seq = _as_list(w, data, "budgets", [None])
    budgets = [_budget(w, budgets_seq, i) for i in range(len(budgets_seq))]
    objectives_seq = _as_list(w, data, "objectives", [None])
    objectives = [_choice(w, objectives_seq, i, "objectives", OBJECTIVES, True)
                  for i in range(len(objectives_seq))]
    fusion_seq = _as_list(w, data, "fusion", [None])
    fusions = [_fusion(w, base, fusion_seq, i) for i in range(len(fusion_seq))]
    seeds_seq = _as_list(w, data, "seeds", [None])
    for i, seed in enumerate(seeds_seq):
        if seed is not None and not _is_int(seed):
            raise w.error(seeds_seq, i, f"seeds[{i}]", f"seed {seed!r} is not an integer",
                          "give integers, e.g. seeds: [0, 1, 2]")
    backend_list = _backends(w, data, list(plugins))

    workers = data.get("workers", 1)
    if not _is_int(workers) or workers < 1:
        raise w.error(data, "workers", "workers", f"workers = {workers!r} is not a positive integer",
                      "give the solver threads per job, e.g. workers: 1")
    alpha = data.get("alpha", 0.5)
    if not _is_number(alpha) or not 0 <= alpha <= 1:
        raise w.error(data, "alpha", "alpha", f"alpha = {alpha!r} is not in [0, 1]",
                      "give the weight of latency in the weighted objective, e.g. 0.5")
    runtime_limit = data.get("runtime_limit_cycles")
    if runtime_limit is not None and (not _is_int(runtime_limit) or runtime_limit < 1):
        raise w.error(data, "runtime_limit_cycles", "runtime_limit_cycles",
                      f"runtime_limit_cycles = {runtime_limit!r} is not a positive integer",
                      "give a latency limit in cycles, or drop it")
    offload = data.get("offload", "dram")
    if offload not in ("dram", "host"):
        raise w.error(data, "offload", "offload", f"offload = {offload!r}", "use dram or host")
    for i, problem in enumerate(problems):
        if problem != "P1" and all(hw is None for hw, _ in hardware):
            raise w.error(problems_seq, i, f"problems[{i}]", f"{problem} needs hardware",
                          "add hardware: [{preset: edge_tpu}] (or a file)")

    jobs: list[Job] = []
    seen: set[str] = set()
    duplicates = 0
    grid = itertools.product(models, hardware, problems, budgets, objectives, fusions, backend_list, limits_seq,
                             seeds_seq)
    for (model, model_path), (hw, hw_path), problem, budget, objective, fusion, (backend, label, options), \
            limit, seed in grid:
        if hw is None and problem != "P1":
            continue  # P2/P3 points are only made with hardware
        if hw is None and fusion is not None:
            continue  # a fused point needs hardware to cost its tiles
        params = {
            "model": model,
            "hardware": hw,
            "problem": problem,
            "budget": budget,
            "objective": objective,
            "alpha": float(alpha),
            "runtime_limit_cycles": runtime_limit,
            "offload": offload,
            "backend": backend,
            "label": label,
            "options": options,
            "time_limit": float(limit),
            "seed": seed,
            "workers": workers,
            "plugins": list(plugins),
        }
        if fusion is not None:  # only fused points carry the key: earlier results keep their keys
            params["fusion"] = fusion
        key = job_key(params)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        paths = {k: v for k, v in (("model", model_path), ("hardware", hw_path)) if v}
        jobs.append(Job(key, name, params, paths))
    jobs += [job for job in plan_jobs if job.key not in seen]
    return Manifest(name=name, path=source, description=str(description), jobs=tuple(jobs), duplicates=duplicates)


# =================================================================== P4 plans
def _plan_jobs(w: _Where, base: Path, data: _Map, name: str, limits: list[float], plugins: list[str]) -> list[Job]:
    """The jobs of a ``plans`` section: models x clusters (nodes swept) x global batches x objectives.

    ::

        plans:
          models: [{family: gpt2, preset: medium}, {family: llama, preset: 1b}]
          clusters: [{preset: dgx_a100, nodes: [1, 2, 4]}, {file: clusters/dgx_h100.yaml}]
          global_batches: [512]
          objectives: [time]        # time, energy, weighted
          alpha: 0.5                # the weighted objective's

    Each job runs :func:`monet_ilp.problems.p4.search.plan_search` (backend ``plan``)
    with each of the manifest's ``time_limits``.
    """
    if "plans" not in data:
        return []
    plans = data["plans"]
    if not isinstance(plans, _Map):
        raise w.error(data, "plans", "plans", "plans must be a mapping",
                      "write plans: {models: [...], clusters: [...], global_batches: [...]}")
    _unknown_keys(w, plans, PLAN_KEYS, "plans.")
    for key in ("models", "clusters", "global_batches"):
        if key not in plans:
            raise w.error(plans, None, f"plans.{key}", f"plans has no {key}", f"add {key}: [...]")
    alpha = plans.get("alpha", 0.5)
    if not _is_number(alpha) or not 0 <= alpha <= 1:
        raise w.error(plans, "alpha", "plans.alpha", f"alpha = {alpha!r} is not in [0, 1]", "give e.g. 0.5")
    models = _as_list(w, plans, "models", [])
    clusters: list[dict[str, Any]] = []
    cluster_seq = _as_list(w, plans, "clusters", [])
    for i, entry in enumerate(cluster_seq):
        if not isinstance(entry, _Map):
            raise w.error(cluster_seq, i, f"plans.clusters[{i}]", "a cluster entry is a mapping",
                          "write {preset: dgx_a100, nodes: [1, 2, 4]} or {file: cluster.yaml}")
        if "file" in entry:
            path = _file(w, base, entry, "file", f"plans.clusters[{i}].file", entry["file"])
            try:
                spec = load_cluster(path).to_dict()
            except MonetError as err:
                raise w.error(entry, "file", f"plans.clusters[{i}].file", err.message, err.fix or "fix the file") \
                    from None
            nodes = entry.get("nodes", spec["nodes"])
            for n in nodes if isinstance(nodes, _Seq) else [nodes]:
                clusters.append({**spec, "nodes": n})
            continue
        nodes = entry.get("nodes", 1)
        for n in nodes if isinstance(nodes, _Seq) else [nodes]:
            clusters.append({**_plain(entry), "nodes": n})
    batches = _as_list(w, plans, "global_batches", [])
    objectives = _as_list(w, plans, "objectives", ["time"])
    jobs = []
    for (i, model), cluster_spec, (j, batch), (k, objective), limit in itertools.product(
            enumerate(models), clusters, enumerate(batches), enumerate(objectives), limits):
        spec = {"model": _plain(model), "cluster": cluster_spec, "global_batch": batch, "objective": objective,
                "alpha": float(alpha)}
        try:
            p4_instance_from_dict(spec, source=w.path)
        except MonetError as err:
            field = str(err.field).split(".")[0]
            container, index, where = (
                (models, i, f"plans.models[{i}]") if field in _MODEL_FIELDS else
                (batches, j, f"plans.global_batches[{j}]") if field == "global_batch" else
                (objectives, k, f"plans.objectives[{k}]") if field in ("objective", "alpha") else
                (plans, "clusters", "plans.clusters"))
            raise w.error(container, index, where, err.problem, err.fix or "see instances/README.md") from None
        params = {"p4": spec, "backend": "plan", "label": "plan", "time_limit": limit, "seed": None,
                  "workers": 1, "plugins": plugins}
        jobs.append(Job(job_key(params), name, params, {}))
    return jobs
