"""Clusters of devices for multi-device training (P4): devices, nodes and the network between them.

The input of P4 beside the model (``formulations/p4_problem.md``, P4.H1-H4), as the
hardware files are for P1-P3.  A cluster is ``nodes`` nodes of ``devices_per_node``
identical devices: devices of one node talk over the node's fabric (NVLink and
NVSwitch, or an on-chip mesh), nodes over the network (InfiniBand, Ethernet).  Every
figure is per device and per direction, in SI units (FLOP/s, bytes, bytes/s, seconds,
watts), with its source or assumption in ``p4_problem.md`` (section "Presets").
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from monet_ilp.errors import MonetError
from monet_ilp.hardware.schema import parse_size

__all__ = ["CLUSTERS", "ClusterSpec", "DeviceSpec", "cluster", "cluster_from_dict", "dgx_a100", "dgx_h100",
           "edge_tpu_mesh", "load_cluster", "with_device"]

GiB = 2**30


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator (P4.H1).

    Attributes
    ----------
    name
        What it is.
    peak_flops
        Dense 16-bit peak, FLOP/s.
    gemm_efficiency
        The share of ``peak_flops`` a large matrix product sustains (an assumption per
        preset, ``p4_problem.md``): the roofline's compute ceiling.
    memory_bytes
        Device memory (HBM, or the DRAM share of an edge device).
    memory_bandwidth
        Bytes/s of that memory: the roofline's memory ceiling, for the element-wise ops.
    busy_w, idle_w
        Power while computing or communicating, and while waiting (the pipeline bubble).
    sm_count, gemm_tile
        P4.C1b: the streaming multiprocessors a matrix product's output tiles are spread
        over, and the side of one output tile (a ``gemm_tile`` x ``gemm_tile`` block per
        thread block); a product's tiles run in waves of ``sm_count``, so a partial tile
        or a partial last wave costs a whole one.  ``0``: no such quantisation.
    """

    name: str
    peak_flops: float
    gemm_efficiency: float
    memory_bytes: int
    memory_bandwidth: float
    busy_w: float
    idle_w: float
    sm_count: int = 0
    gemm_tile: int = 0

    def __post_init__(self) -> None:
        for field in ("peak_flops", "memory_bytes", "memory_bandwidth"):
            if getattr(self, field) <= 0:
                raise MonetError(f"device {self.name!r}: {field} must be positive", field=field,
                                 fix="give a positive number")
        if not 0 < self.gemm_efficiency <= 1:
            raise MonetError(f"device {self.name!r}: gemm_efficiency = {self.gemm_efficiency}",
                             field="gemm_efficiency", fix="give a share in (0, 1]")
        if self.sm_count < 0 or self.gemm_tile < 0 or (self.sm_count > 0) != (self.gemm_tile > 0):
            raise MonetError(f"device {self.name!r}: sm_count {self.sm_count}, gemm_tile {self.gemm_tile}",
                             field="sm_count", fix="give both as positive integers, or both 0 (no quantisation)")
        if self.busy_w < 0 or self.idle_w < 0:
            raise MonetError(f"device {self.name!r}: power must not be negative", field="busy_w",
                             fix="give watts >= 0")


@dataclass(frozen=True)
class ClusterSpec:
    """``nodes`` nodes of ``devices_per_node`` devices and the links between them (P4.H2-H4).

    Attributes
    ----------
    intra_bandwidth, intra_latency_s
        A device's bandwidth to the other devices of its node (bytes/s, one direction)
        and the latency of one step of a collective there.
    inter_bandwidth, inter_latency_s
        A device's share of the network between nodes (bytes/s, one direction: the NIC
        bandwidth per device) and the latency of one step across nodes.
    host_bandwidth, host_memory_bytes
        A device's link to host memory (PCIe, bytes/s one direction) and its share of the
        host's memory, where activations may be offloaded; 0 when there is no host.
    hardware
        The device as the cost model sees it: a hardware preset name or a hardware YAML
        file (``monet-ilp hw show``), which P4 plans for a training graph cost each op on
        (P4.G3); empty when the cluster names none.
    """

    name: str
    device: DeviceSpec
    devices_per_node: int
    nodes: int
    intra_bandwidth: float
    intra_latency_s: float
    inter_bandwidth: float
    inter_latency_s: float
    host_bandwidth: float = 0.0
    host_memory_bytes: int = 0
    hardware: str = ""

    def __post_init__(self) -> None:
        if self.devices_per_node < 1 or self.nodes < 1:
            raise MonetError(f"cluster {self.name!r} has no devices", field="nodes",
                             fix="give at least one node of at least one device")
        if min(self.intra_bandwidth, self.inter_bandwidth) <= 0:
            raise MonetError(f"cluster {self.name!r}: bandwidths must be positive", field="inter_bandwidth",
                             fix="give positive bytes/s")

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    def link(self, group: int, stride: int) -> tuple[float, float]:
        """Bandwidth and step latency of a collective over ``group`` devices ``stride`` apart.

        Devices are numbered node by node; a group whose members span more than one
        node (``group * stride > devices_per_node``) runs at the network's figures (its
        slowest hop), otherwise at the node fabric's.
        """
        if group * stride <= self.devices_per_node:
            return self.intra_bandwidth, self.intra_latency_s
        return self.inter_bandwidth, self.inter_latency_s

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "device": dict(self.device.__dict__), "devices_per_node": self.devices_per_node,
                "nodes": self.nodes, "intra_bandwidth": self.intra_bandwidth,
                "intra_latency_s": self.intra_latency_s, "inter_bandwidth": self.inter_bandwidth,
                "inter_latency_s": self.inter_latency_s, "host_bandwidth": self.host_bandwidth,
                "host_memory_bytes": self.host_memory_bytes, "hardware": self.hardware}


# sm_count: 108 SMs on the A100 and 132 on the H100 SXM5 (NVIDIA's A100 and H100 datasheets);
# gemm_tile 128: the 128 x 128 output tile of NVIDIA's "Matrix Multiplication Background"
# guide, whose tile and wave quantisation P4.C1b models.  The A100's gemm_efficiency is the
# one parameter fitted to the six runs of scripts/bench_plan.py (0.70 before P4.C1b).
A100_80GB = DeviceSpec("A100-SXM4-80GB", peak_flops=312e12, gemm_efficiency=0.74, memory_bytes=80 * GiB,
                       memory_bandwidth=2.039e12, busy_w=400.0, idle_w=90.0, sm_count=108, gemm_tile=128)
H100_80GB = DeviceSpec("H100-SXM5-80GB", peak_flops=989e12, gemm_efficiency=0.65, memory_bytes=80 * GiB,
                       memory_bandwidth=3.35e12, busy_w=700.0, idle_w=120.0, sm_count=132, gemm_tile=128)


def dgx_a100(*, nodes: int = 1, network_gbps: float = 200.0) -> ClusterSpec:
    """DGX-A100-like nodes: 8 A100 80 GB on NVSwitch (NVLink 3: 300 GB/s per direction),
    one ``network_gbps`` NIC per GPU between nodes (HDR InfiniBand: 200 Gb/s), PCIe 4.0
    x16 to 2 TiB of host memory (25 GB/s sustained, 256 GiB per GPU)."""
    return ClusterSpec(f"dgx_a100x{nodes}", A100_80GB, 8, nodes, intra_bandwidth=300e9, intra_latency_s=5e-6,
                       inter_bandwidth=network_gbps * 1e9 / 8, inter_latency_s=10e-6, host_bandwidth=25e9,
                       host_memory_bytes=256 * GiB, hardware="datacenter_gpu")


def dgx_h100(*, nodes: int = 1, network_gbps: float = 400.0) -> ClusterSpec:
    """DGX-H100-like nodes: 8 H100 80 GB on NVSwitch (NVLink 4: 450 GB/s per direction),
    one ``network_gbps`` NIC per GPU (NDR InfiniBand: 400 Gb/s), PCIe 5.0 x16 to 2 TiB of
    host memory (50 GB/s sustained, 256 GiB per GPU)."""
    return ClusterSpec(f"dgx_h100x{nodes}", H100_80GB, 8, nodes, intra_bandwidth=450e9, intra_latency_s=5e-6,
                       inter_bandwidth=network_gbps * 1e9 / 8, inter_latency_s=10e-6, host_bandwidth=50e9,
                       host_memory_bytes=256 * GiB)


def edge_tpu_mesh(*, nodes: int = 1, chips: int = 4, simd_units: int = 64, lanes: int = 4, pes: int = 4,
                  clock_hz: float = 800e6, dram_bytes: int = 4 * GiB, dram_bytes_per_cycle: float = 32,
                  link_bytes_per_cycle: float = 32, mac_pj: float = 4.6) -> ClusterSpec:
    """Edge-TPU-like chips as devices (the ``edge_tpu`` preset's PE array, ``pes`` PEs per
    chip): ``chips`` per board on the mesh links, boards linked at the same rate.

    Peak: 2 FLOP per MAC, ``simd_units * lanes`` MACs per PE per cycle; power while busy:
    the MAC energy at peak (``mac_pj`` per MAC), idle: a tenth of it.
    """
    macs = simd_units * lanes * pes * clock_hz
    busy = macs * mac_pj * 1e-12
    device = DeviceSpec(f"edge_tpu_U{simd_units}_L{lanes}_x{pes}", peak_flops=2 * macs, gemm_efficiency=0.9,
                        memory_bytes=dram_bytes, memory_bandwidth=dram_bytes_per_cycle * clock_hz,
                        busy_w=busy, idle_w=busy / 10)
    link = link_bytes_per_cycle * clock_hz
    # The chip as the cost model sees it: the edge_tpu preset with the same PE array,
    # clock, DRAM and MAC energy (a square or 1 x n mesh of the PEs).
    side = math.isqrt(pes)
    rows, cols = (side, side) if side * side == pes else (1, pes)
    hardware = (f"edge_tpu n_pe_x={cols} n_pe_y={rows} simd_units={simd_units} lanes={lanes} "
                f"clock_hz={int(clock_hz)} dram_bytes={dram_bytes} dram_bandwidth_bytes_per_cycle={dram_bytes_per_cycle:g} "
                f"mac_pj={mac_pj:g}")
    return ClusterSpec(f"edge_tpu_mesh{chips}x{nodes}", device, chips, nodes, intra_bandwidth=link,
                       intra_latency_s=1e-6, inter_bandwidth=link, inter_latency_s=2e-6, hardware=hardware)


#: Cluster presets by name (``--cluster``): each takes ``nodes`` and its own keywords.
CLUSTERS: dict[str, Callable[..., ClusterSpec]] = {
    "dgx_a100": dgx_a100,
    "dgx_h100": dgx_h100,
    "edge_tpu_mesh": edge_tpu_mesh,
}


def cluster(name: str, *, nodes: int = 1, **params: Any) -> ClusterSpec:
    """A cluster preset by name, with ``nodes`` nodes (a user error for an unknown name)."""
    if name not in CLUSTERS:
        close = difflib.get_close_matches(name, CLUSTERS, n=1)
        raise MonetError(f"unknown cluster {name!r}", field="cluster",
                         fix=f"use one of {', '.join(sorted(CLUSTERS))}" + (f" (did you mean {close[0]!r}?)"
                                                                            if close else ""))
    if nodes < 1:
        raise MonetError(f"nodes = {nodes}", field="nodes", fix="give at least one node")
    try:
        return CLUSTERS[name](nodes=nodes, **params)
    except TypeError as err:
        raise MonetError(f"cluster {name!r}: {err}", field="cluster", fix="check the preset's parameters") from err


def with_device(spec: ClusterSpec, **changes: Any) -> ClusterSpec:
    """The cluster with some device figures changed (a what-if)."""
    return replace(spec, device=replace(spec.device, **changes))


_SIZES = {"memory_bytes", "host_memory_bytes"}


def cluster_from_dict(data: Mapping[str, Any], *, source: str | None = None) -> ClusterSpec:
    """A cluster from its YAML/JSON form: :class:`ClusterSpec`'s fields, ``device`` a mapping
    of :class:`DeviceSpec`'s; sizes may be written ``80GiB``, numbers ``312e12``."""
    if not isinstance(data, Mapping):
        raise MonetError("a cluster file holds a mapping", file=source, field="cluster",
                         fix="write name, device, devices_per_node, nodes, bandwidths and latencies")
    device = data.get("device")
    if not isinstance(device, Mapping):
        raise MonetError("the cluster has no device mapping", file=source, field="device",
                         fix="write device: {name, peak_flops, gemm_efficiency, memory_bytes, ...}")

    def read(cls: type, values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        names = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise MonetError(f"unknown key {unknown[0]!r}", file=source, field=prefix + unknown[0],
                             fix=f"use {', '.join(names)}")
        out: dict[str, Any] = {}
        for key, value in values.items():
            if key == "device":
                continue
            where = prefix + key
            try:
                if key in _SIZES:
                    out[key] = parse_size(value, field=where, file=source)
                elif key in ("name", "hardware"):
                    out[key] = str(value)
                elif key in ("devices_per_node", "nodes", "sm_count", "gemm_tile"):
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise ValueError(value)
                    out[key] = value
                else:
                    out[key] = float(value)
            except (TypeError, ValueError):
                raise MonetError(f"{key} = {value!r} is not a number", file=source, field=where,
                                 fix="give a number (e.g. 312e12, 0.7, 5e-6)") from None
        missing = sorted(f.name for f in fields(cls) if f.name not in values and f.name != "device"
                         and f.default is MISSING and f.default_factory is MISSING)
        if missing:
            raise MonetError(f"missing {missing[0]!r}", file=source, field=prefix + missing[0],
                             fix=f"give every field: {', '.join(names)}")
        return out

    try:
        top = read(ClusterSpec, data, "")
        spec = read(DeviceSpec, device, "device.")
        return ClusterSpec(device=DeviceSpec(**spec), **top)
    except MonetError as err:
        raise (err.with_file(source) if source else err) from None


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read a cluster YAML file (a user error naming the file and the field when it is wrong)."""
    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise MonetError(f"cannot read the cluster file ({err.strerror})", file=where, field="cluster",
                         fix="give an existing YAML file or a preset name") from None
    except yaml.YAMLError as err:
        raise MonetError(f"not valid YAML: {err}", file=where, field="cluster", fix="fix the YAML syntax") from None
    return cluster_from_dict(data, source=where)
