"""Schedules round-trip through JSON, and bad files give clear errors."""

from __future__ import annotations

import json

import pytest

from monet_ilp.errors import InputFormatError
from monet_ilp.schedule import (
    Compute,
    Free,
    OpRun,
    Release,
    Schedule,
    Sequence,
    Transfer,
    load_schedule,
    save_schedule,
)


def test_timed_round_trip(tmp_path):
    s = Schedule(
        ops=(OpRun(0, 5, "A", 0, "c0"), OpRun(5, 9, "A", 1, "c1")),
        transfers=(Transfer(5, 7, "a", "c0.sram", "dram", "bus"),),
        frees=(Free(9, "a", "dram"),),
        pinned=(("w", "c0.sram"),),
        meta={"backend": "test"},
    )
    save_schedule(s, tmp_path / "s.json")
    assert load_schedule(tmp_path / "s.json") == s
    assert s.makespan == 9


def test_sequence_round_trip(tmp_path):
    s = Sequence((Compute("A"), Compute("B"), Release("a"), Compute("A")), meta={"heuristic": "x"})
    save_schedule(s, tmp_path / "s.json")
    assert load_schedule(tmp_path / "s.json") == s
    assert s.computations == ("A", "B", "A")


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"format": "monet-ilp/schedule", "version": 1, "kind": "sideways"}, "unknown schedule kind"),
        ({"format": "monet-ilp/schedule", "version": 1, "kind": "timed", "ops": [["A", 0, "c", "0", 1]]},
         "expected an integer"),
        ({"format": "monet-ilp/schedule", "version": 1, "kind": "sequence", "steps": [["eat", "A"]]}, "steps[0]"),
        ({"format": "monet-ilp/schedule", "version": 1, "kind": "timed"}, "ops"),
        ({"nodes": []}, "not a monet-ilp schedule"),
    ],
)
def test_bad_schedule_files(tmp_path, data, fragment):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputFormatError) as err:
        load_schedule(path)
    assert fragment in str(err.value) and str(path) in str(err.value)
