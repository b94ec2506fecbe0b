"""P4 in batch runs: a ``plans`` section sweeps models, cluster sizes and batches; every plan is
verified, recorded as soon as it exists, resumed without repeats, and plotted against the devices."""

from __future__ import annotations

import json
import textwrap

import pytest

from monet_ilp.batch import parse_manifest, read_records, run_batch
from monet_ilp.batch.plots import plan_records, plot_results
from monet_ilp.batch.summary import summarize_records
from monet_ilp.errors import MonetError
from tests.batch.conftest import REPO

PLANS = """
    name: p4_tiny
    plans:
      models: [{family: gpt2, preset: small}]
      clusters: [{preset: dgx_a100, nodes: [1, 2]}, {file: instances/clusters/dgx_h100.yaml}]
      global_batches: [64]
      objectives: [time, energy]
    time_limits: [20]
"""


def manifest(text: str):
    return parse_manifest(textwrap.dedent(text), source="test.yaml", base=REPO)


def test_a_plans_section_expands_the_grid():
    m = manifest(PLANS)
    assert len(m.jobs) == 1 * 3 * 1 * 2
    assert {j.backend for j in m.jobs} == {"plan"}
    assert len({j.key for j in m.jobs}) == len(m.jobs)
    assert any("dgx_a100x2" in j.describe() for j in m.jobs)


@pytest.mark.parametrize(("change", "where"), [
    ("{family: gpt2, preset: huge}", "plans.models[0]"),
    ("{family: bert}", "plans.models[0]"),
])
def test_bad_plans_name_the_line_and_the_key(change, where):
    text = PLANS.replace("{family: gpt2, preset: small}", change)
    with pytest.raises(MonetError) as err:
        manifest(text)
    assert where in err.value.message and "test.yaml" in err.value.message


def test_bad_cluster_and_missing_keys():
    with pytest.raises(MonetError, match="plans.clusters"):
        manifest(PLANS.replace("preset: dgx_a100,", "preset: dgx_a1000,"))
    with pytest.raises(MonetError, match="global_batches"):
        manifest(PLANS.replace("      global_batches: [64]\n", ""))
    with pytest.raises(MonetError, match="plans.colour"):
        manifest(PLANS.replace("      objectives: [time, energy]\n", "      colour: red\n"))


def test_plans_run_resume_and_plot(tmp_path):
    m = manifest(PLANS.replace("objectives: [time, energy]", "objectives: [time]")
                 .replace(", {file: instances/clusters/dgx_h100.yaml}", ""))
    report = run_batch(m.jobs, tmp_path, workers=2)
    assert report.ran == 2 and not report.interrupted
    records = read_records(tmp_path / "results.jsonl").records
    assert len(records) == 2
    for r in records:
        assert r["status"] in ("optimal", "feasible") and r["feasible"] is True
        assert r["bound"] <= r["objective"] == r["stats"]["time_per_iteration_s"]
        plan = json.loads((tmp_path / r["schedule"]).read_text())
        assert plan["format"] == "monet-ilp/p4-plan" and sum(plan["stages"]) == 12
    assert sorted(r["stats"]["devices"] for r in records) == [8, 16]
    again = run_batch(m.jobs, tmp_path, workers=2, resume=True)
    assert again.ran == 0
    assert len(plan_records(records)) == 2
    written = plot_results(records, tmp_path / "plots")
    assert any(p.name == "plan_scaling.png" and p.stat().st_size > 0 for p in written)
    (summary,) = summarize_records(records)
    assert summary.backend == "plan" and summary.solved == 2
