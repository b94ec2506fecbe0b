"""Schedules: what every backend returns and the evaluator checks (plain data, JSON).

A timed :class:`Schedule` lists op runs (instance 0 is the first computation,
1, 2, ... are recomputations), transfers between memories over links, explicit
frees of tensor copies, and persistent tensors pinned in a memory.  The P1
:class:`Sequence` form lists only computations and frees in order; the evaluator
times it on one core.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.graph.ir import read_json

if TYPE_CHECKING:
    from monet_ilp.instance import Instance

FORMAT_NAME = "monet-ilp/schedule"
FORMAT_VERSION = 1


@dataclass(frozen=True, order=True)
class OpRun:
    """One execution of ``op`` on ``core`` during [start, end)."""

    start: int
    end: int
    op: str
    instance: int
    core: str


@dataclass(frozen=True, order=True)
class Transfer:
    """A copy of ``tensor`` from memory ``src`` to memory ``dst`` over ``link`` during [start, end).

    The destination copy occupies ``dst`` from ``start``; it can be read from ``end``.
    """

    start: int
    end: int
    tensor: str
    src: str
    dst: str
    link: str


@dataclass(frozen=True, order=True)
class Free:
    """The copy of ``tensor`` in ``memory`` is released at ``time``."""

    time: int
    tensor: str
    memory: str


@dataclass(frozen=True)
class Schedule:
    """A timed schedule.  ``pinned`` lists (persistent tensor, memory) pairs held all iteration."""

    ops: tuple[OpRun, ...]
    transfers: tuple[Transfer, ...] = ()
    frees: tuple[Free, ...] = ()
    pinned: tuple[tuple[str, str], ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))

    @property
    def makespan(self) -> int:
        ends = [r.end for r in self.ops] + [t.end for t in self.transfers]
        return max(ends, default=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "kind": "timed",
            "ops": [[r.op, r.instance, r.core, r.start, r.end] for r in self.ops],
            "transfers": [[t.tensor, t.src, t.dst, t.link, t.start, t.end] for t in self.transfers],
            "frees": [[f.tensor, f.memory, f.time] for f in self.frees],
            "pinned": [list(p) for p in self.pinned],
            "meta": dict(self.meta),
        }


@dataclass(frozen=True)
class Compute:
    """Sequence step: compute ``op`` (again, if it ran before)."""

    op: str


@dataclass(frozen=True)
class Release:
    """Sequence step: free ``tensor`` (right after the preceding computation)."""

    tensor: str


@dataclass(frozen=True)
class Sequence:
    """The P1 form: computations and frees in order, on one core."""

    steps: tuple[Compute | Release, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))

    @property
    def computations(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.steps if isinstance(s, Compute))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "kind": "sequence",
            "steps": [["compute", s.op] if isinstance(s, Compute) else ["free", s.tensor] for s in self.steps],
            "meta": dict(self.meta),
        }


def save_schedule(schedule: Schedule | Sequence, path: str | Path) -> None:
    Path(path).write_text(json.dumps(schedule.to_dict()) + "\n")


def schedule_from_dict(data: Mapping[str, Any], *, source: str | None = None) -> Schedule | Sequence:
    """Rebuild a :class:`Schedule` or :class:`Sequence`; errors name ``source`` and the field."""

    def fail(problem: str, field_name: str) -> InputFormatError:
        return InputFormatError(problem, file=source, field=field_name,
                                fix="regenerate the schedule, or follow the format in the README")

    if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
        raise fail(f'not a monet-ilp schedule (expected "format": "{FORMAT_NAME}")', "format")
    if data.get("version") != FORMAT_VERSION:
        raise fail(f"unsupported schedule version {data.get('version')!r}", "version")
    kind = data.get("kind")
    try:
        if kind == "sequence":
            steps = []
            for k, (what, name) in enumerate(data["steps"]):
                if what not in ("compute", "free") or not isinstance(name, str):
                    raise fail(f"step {k} must be [\"compute\"|\"free\", name]", f"steps[{k}]")
                steps.append(Compute(name) if what == "compute" else Release(name))
            return Sequence(tuple(steps), data.get("meta", {}))
        if kind == "timed":
            ops = tuple(OpRun(op=o, instance=_int(i), core=c, start=_int(s), end=_int(e))
                        for o, i, c, s, e in data["ops"])
            transfers = tuple(Transfer(tensor=t, src=a, dst=b, link=l, start=_int(s), end=_int(e))
                              for t, a, b, l, s, e in data.get("transfers", []))
            frees = tuple(Free(tensor=t, memory=m, time=_int(x)) for t, m, x in data.get("frees", []))
            pinned = tuple((str(t), str(m)) for t, m in data.get("pinned", []))
            return Schedule(ops, transfers, frees, pinned, data.get("meta", {}))
    except MonetError:
        raise
    except (KeyError, TypeError, ValueError) as err:
        raise fail(f"malformed schedule ({type(err).__name__}: {err})",
                   str(err.args[0]) if isinstance(err, KeyError) else "ops/transfers/frees") from None
    raise fail(f"unknown schedule kind {kind!r} (expected \"timed\" or \"sequence\")", "kind")


def load_schedule(path: str | Path, instance: Instance | None = None) -> Schedule | Sequence:
    """Read a schedule; with ``instance``, also check that it was made for it (:func:`check_made_for`)."""
    schedule = schedule_from_dict(read_json(path), source=str(path))
    if instance is not None:
        check_made_for(schedule, instance, source=str(path))
    return schedule


def stamped(schedule: Schedule | Sequence, instance: Instance, source: str) -> Schedule | Sequence:
    """``schedule`` with where it came from and the fingerprint of ``instance`` in its ``meta``."""
    return replace(schedule, meta={**schedule.meta, "source": source, "instance": instance.fingerprint})


def check_made_for(schedule: Schedule | Sequence, instance: Instance, *, source: str | None = None) -> None:
    """Raise if ``schedule`` records the fingerprint of another instance.

    Schedules from :func:`monet_ilp.solve.solve` carry ``meta["instance"]``, the
    :attr:`~monet_ilp.instance.Instance.fingerprint` of what they solve.  One made for
    another graph or hardware would only produce a wall of violations; schedules
    without a fingerprint (hand-written, older files) are accepted.
    """
    made_for = schedule.meta.get("instance")
    if made_for is not None and made_for != instance.fingerprint:
        raise MonetError(
            f"this schedule was made for another instance (fingerprint {made_for}, "
            f"but {instance.name!r} has {instance.fingerprint})", file=source, field="meta.instance",
            fix="pass the instance the schedule was solved for, or solve this instance "
                "(`monet-ilp solve INSTANCE --out SCHEDULE`)")


def _int(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise ValueError(f"expected an integer, got {x!r}")  # noqa: TRY004  (read as a malformed value)
    return x
