"""The results directory of a batch: ``results.jsonl`` (one record per line) and ``schedules/``.

Records are appended with one ``write`` of the whole line, then flushed and
fsynced, so a crash can leave at most one torn line, at the end; :func:`read_records`
finds it, and :meth:`ResultsLog.open` cuts it off so that its job is run again.
Schedules are written to ``schedules/<key>.json`` atomically (temporary file, then
rename) before their record.  The record schema is in ``instances/README.md``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from monet_ilp.batch.job import RECORD_FORMAT, canonical_json
from monet_ilp.errors import MonetError

try:
    import fcntl
except ImportError:  # not POSIX: results are written without a lock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "RESULTS_FILE",
    "SCHEDULES_DIR",
    "STATUSES",
    "TIMING_FIELDS",
    "ReadReport",
    "ResultsLog",
    "content_of",
    "latest_records",
    "read_records",
    "same_content",
]

RESULTS_FILE = "results.jsonl"
SCHEDULES_DIR = "schedules"
#: Every status a record may carry: the solver's, plus ``timeout`` (killed past its deadline).
STATUSES = ("optimal", "feasible", "infeasible", "unknown", "error", "timeout")
#: Fields that depend on when and where a job ran, not on what it found.
TIMING_FIELDS = ("wall_time_s", "build_s", "elapsed_s", "host", "executor", "finished_at", "stats")


@dataclass(frozen=True)
class ReadReport:
    """What :func:`read_records` found.

    Attributes
    ----------
    records
        The valid records, in file order.
    bad_lines
        ``(line number, reason)`` of every line that is not a valid record.
    good_bytes
        Length of the file up to the end of its last valid line; a torn tail lies
        past it.
    torn_lines
        ``(line number, reason)`` of the invalid lines at the end of the file (a
        torn write): they are cut at ``good_bytes`` before anything is appended.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    good_bytes: int = 0
    torn_lines: list[tuple[int, str]] = field(default_factory=list)

    @property
    def torn_tail(self) -> bool:
        return bool(self.torn_lines)


def _check_record(line: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError) as err:
        return None, f"not JSON ({err})"
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        return None, f'not a batch record (expected "format": "{RECORD_FORMAT}")'
    if not isinstance(record.get("key"), str) or record.get("status") not in STATUSES:
        return None, "a record without a key or with an unknown status"
    return record, ""


def read_records(path: str | Path) -> ReadReport:
    """Every valid record of a ``results.jsonl`` file, and where it is damaged.

    A line without its final newline, or that is not a record, is bad; bad lines
    at the end of the file form the torn tail.
    """
    path = Path(path)
    if not path.exists():
        return ReadReport()
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    tail: list[tuple[int, str]] = []  # bad lines since the last good one
    offset, good_end, number = 0, 0, 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        complete = end != -1
        stop = end + 1 if complete else len(data)
        chunk = data[offset:stop]
        number += 1
        offset = stop
        if not chunk.strip():
            if not tail:
                good_end = stop
            continue
        record, reason = _check_record(chunk) if complete else (None, "no final newline (a torn write)")
        if record is None:
            tail.append((number, reason))
        else:
            records.append(record)
            bad.extend(tail)
            tail, good_end = [], stop
    return ReadReport(records, bad + tail, good_end, tail)


def latest_records(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last record of every key (a job rerun with ``--retry-failed`` is appended again)."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        out.pop(record["key"], None)
        out[record["key"]] = dict(record)
    return out


def content_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its timing and host fields: what two runs of the same job must agree on."""
    return {k: v for k, v in record.items() if k not in TIMING_FIELDS}


class ResultsLog:
    """Appends records to ``<out>/results.jsonl`` and schedules to ``<out>/schedules/``.

    Use :meth:`open` (a context manager): it takes an exclusive lock on the
    directory (two runs must not interleave their lines), cuts a torn tail, and
    keeps the file open for appending.
    """

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.path = self.dir / RESULTS_FILE
        self.schedules = self.dir / SCHEDULES_DIR
        self._fd: int | None = None
        self._lock_fd: int | None = None

    # ------------------------------------------------------------ lifecycle
    def open(self) -> Self:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schedules.mkdir(exist_ok=True)
        self._lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self) -> None:
        self._lock_fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:  # not POSIX: no lock
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise MonetError("another batch run is writing to this results directory", file=str(self.dir),
                             fix="wait for it to finish, or choose another --out") from None

    # -------------------------------------------------------------- reading
    def read(self) -> ReadReport:
        return read_records(self.path)

    def cut_torn_tail(self, report: ReadReport) -> None:
        """Drop the invalid lines at the end of the file so that the next record starts a clean line."""
        if report.torn_tail:
            os.truncate(self.path, report.good_bytes)
            self._fsync_path(self.path)

    # -------------------------------------------------------------- writing
    def write_schedule(self, key: str, schedule: Mapping[str, Any]) -> str:
        """Write ``schedules/<key>.json`` atomically; return its path relative to the directory."""
        target = self.schedules / f"{key}.json"
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self.schedules)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(schedule) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._fsync_path(self.schedules)
        return f"{SCHEDULES_DIR}/{key}.json"

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record: a single write of the whole line, then flush and fsync."""
        assert self._fd is not None, "open the log first"
        data = (json.dumps(record, separators=(", ", ": ")) + "\n").encode()
        written = os.write(self._fd, data)
        while written < len(data):  # only on a full disk or a signal; the reader drops a torn line
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)

    @staticmethod
    def _fsync_path(path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def same_content(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when two records agree on everything but timing and host."""
    return canonical_json(content_of(a)) == canonical_json(content_of(b))
