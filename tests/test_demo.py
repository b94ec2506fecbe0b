"""The demo's pipeline (monet_ilp/demo.py) at small sizes, in the default run: a row per
method, every feasible row within the bounds it is graded by, the figures written.  The
``monet-ilp demo`` command at its README sizes is ``tests/cli/test_cli.py::test_demo_runs``
(slow tier)."""

from __future__ import annotations

from monet_ilp.demo import demo_rows


def test_every_method_is_a_row_graded_against_its_bounds(tmp_path):
    rows, info = demo_rows(time_limit=2, generations=2, population=8, out_dir=tmp_path)
    methods = [row.method for row in rows]
    assert methods[0].startswith("store-all") and methods[1:3] == ["Chen sqrt(n)", "GA (fastest point)"]
    assert len(methods) == 4 and methods[3].startswith("auto: ")
    assert not rows[0].feasible and rows[0].violations  # store-all breaks the 3 MiB SRAMs
    assert info["errors"] == []  # no bound above a feasible row's value (BD.C1)
    for row in rows:
        if row.feasible:
            assert row.latency_gap is not None and row.latency_gap >= 0
            assert row.energy_gap is not None and row.energy_gap >= 0
    assert info["files"]["pareto"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
