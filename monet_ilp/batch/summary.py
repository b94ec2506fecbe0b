"""Per-backend figures of a results directory: solved, optimal, mean gap, geometric-mean time.

Reads the last record of every key.  "Solved" counts only schedules the evaluator
verified (README, "Statuses"); "optimal" only proven optima.  Times are
summarised by the shifted geometric mean ``exp(mean(log(t + s))) - s`` with
``s = 1`` second, the usual way to average solver times that span orders of
magnitude (MIPLIB's shift is 1 s as well).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["TIME_SHIFT_S", "BackendSummary", "is_solved", "shifted_geomean", "summarize_records", "time_of",
           "write_csv"]

#: Shift of the geometric mean of times, in seconds.
TIME_SHIFT_S = 1.0


@dataclass(frozen=True)
class BackendSummary:
    """The figures of one backend (by its label) over the records of a results directory.

    Attributes
    ----------
    backend
        The backend's label (its name, unless the manifest gave the variant a label).
    jobs
        Records (last per key).
    solved
        Records with a schedule the evaluator verified (status optimal or feasible).
    optimal
        Proven optima.
    infeasible, unknown, timeout, error
        Records of each of these statuses.
    mean_gap
        Mean relative gap of the solved records that have a bound (``None`` if none).
    geomean_time_s
        Shifted geometric mean of the solve time of every record with one (a
        timeout counts as its time until the kill).
    """

    backend: str
    jobs: int
    solved: int
    optimal: int
    infeasible: int
    unknown: int
    timeout: int
    error: int
    mean_gap: float | None
    geomean_time_s: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def shifted_geomean(values: Iterable[float], shift: float = TIME_SHIFT_S) -> float | None:
    values = [max(0.0, float(v)) for v in values]
    if not values:
        return None
    return math.exp(sum(math.log(v + shift) for v in values) / len(values)) - shift


def time_of(record: Mapping[str, Any]) -> float | None:
    """The solve time of a record, in seconds: its wall time, or for a timeout its time until the kill."""
    if record.get("wall_time_s") is not None:
        return float(record["wall_time_s"])
    if record.get("status") == "timeout" and record.get("elapsed_s") is not None:
        return float(record["elapsed_s"]) - float(record.get("build_s") or 0.0)
    return None


def is_solved(record: Mapping[str, Any]) -> bool:
    """A verified schedule: the evaluator accepted it and the status is optimal or feasible."""
    return record.get("feasible") is True and record.get("status") in ("optimal", "feasible")


def summarize_records(records: Iterable[Mapping[str, Any]]) -> list[BackendSummary]:
    """One :class:`BackendSummary` per backend label, by label."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        label = record.get("params", {}).get("label") or record.get("params", {}).get("backend", "?")
        groups.setdefault(label, []).append(record)
    out = []
    for label, group in sorted(groups.items()):
        status = [r.get("status") for r in group]
        solved = [r for r in group if is_solved(r)]
        gaps = [float(r["gap"]) for r in solved if r.get("gap") is not None]
        times = [t for t in map(time_of, group) if t is not None]
        out.append(BackendSummary(
            backend=label,
            jobs=len(group),
            solved=len(solved),
            optimal=sum(1 for r in solved if r.get("status") == "optimal"),
            infeasible=status.count("infeasible"),
            unknown=status.count("unknown"),
            timeout=status.count("timeout"),
            error=status.count("error"),
            mean_gap=sum(gaps) / len(gaps) if gaps else None,
            geomean_time_s=shifted_geomean(times),
        ))
    return out


def write_csv(rows: Iterable[BackendSummary], path: str | Path) -> None:
    """The summary as CSV, one row per backend (empty cells for missing values)."""
    rows = list(rows)
    columns = list(BackendSummary.__dataclass_fields__)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.as_dict().items()})
