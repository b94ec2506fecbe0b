"""Manifests: grids and sweeps expand as written, keys are stable, and every error names line and key."""

from __future__ import annotations

import textwrap

import pytest

from monet_ilp.batch.manifest import (
    MONET_EDGE_TPU_SPACE,
    ManifestError,
    load_manifest,
    parse_manifest,
)
from monet_ilp.hardware.schema import parse_size
from monet_ilp.problems import registry
from tests.batch.conftest import PLUGIN, REPO, cli

SHIPPED = ("chains", "random_dags", "zoo_remat", "edge_resnet18", "gpt2_small_remat", "tiny_exact",
           "monet_design_space")


def parse(text: str, **kw):
    return parse_manifest(textwrap.dedent(text), source="m.yaml", base=REPO, **kw)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sets_load_and_have_a_readme_line(name):
    m = load_manifest(REPO / "instances" / f"{name}.yaml")
    assert m.name == name and m.jobs and m.duplicates == 0
    assert len({j.key for j in m.jobs}) == len(m.jobs)
    assert f"`{name}`" in (REPO / "instances" / "README.md").read_text()


def test_grid_is_the_product_in_order():
    m = parse("""
        models:
          - chain: {costs: 2}
            sweep: {length: [3, 4]}
          - random: {n: 12, seed: 1}
        budgets: [0.7, 0.9]
        backends: [cpsat, {name: milp, label: milp-cbc, options: {milp_solver: cbc}}]
        seeds: [0, 1]
        time_limits: 5
    """)
    assert len(m.jobs) == 3 * 2 * 2 * 2
    first = m.jobs[0].params
    assert first["model"] == {"chain": {"costs": 2, "length": 3}} and first["budget"] == 0.7
    assert first["backend"] == "cpsat" and first["seed"] == 0 and first["time_limit"] == 5.0
    cbc = [j for j in m.jobs if j.label == "milp-cbc"]
    assert len(cbc) == 12 and all(j.params["options"] == {"milp_solver": "cbc"} for j in cbc)
    assert m.jobs[-1].params["model"] == {"random": {"n": 12, "seed": 1}}


def test_keys_are_stable_and_depend_only_on_what_changes_the_answer():
    text = """
        name: {name}
        models: [{{chain: {{length: 4}}}}]
        budgets: [{budget}, 0.9]
        backends: [dp]
    """
    a = parse(text.format(name="one", budget=0.5))
    b = parse(text.format(name="two", budget=0.5))
    c = parse(text.format(name="one", budget=0.6))
    assert [j.key for j in a.jobs] == [j.key for j in b.jobs]  # the set's name is not part of a key
    assert a.jobs[0].key != c.jobs[0].key and a.jobs[1].key == c.jobs[1].key


def test_monet_space_is_sampled_reproducibly():
    text = """
        models: [{zoo: resnet18}]
        hardware:
          - preset: edge_tpu
            space: monet
            sample: 12
            seed: 3
        problems: P3
        backends: [heuristic:store_all]
    """
    m1, m2 = parse(text), parse(text)
    assert [j.key for j in m1.jobs] == [j.key for j in m2.jobs] and len(m1.jobs) == 12
    sizes = {parse_size(s) for s in MONET_EDGE_TPU_SPACE["pe_sram_bytes"]}
    for job in m1.jobs:
        p = job.params["hardware"]["params"]
        assert p["simd_units"] in MONET_EDGE_TPU_SPACE["simd_units"]
        assert p["lanes"] in MONET_EDGE_TPU_SPACE["lanes"]
        assert p["pe_sram_bytes"] in sizes
        assert p["n_pe_x"] == p["n_pe_y"] and 1 <= p["n_pe_x"] <= 8
    other = parse(text.replace("seed: 3", "seed: 4"))
    assert {j.key for j in other.jobs} != {j.key for j in m1.jobs}


def test_space_dimensions_can_be_pinned():
    m = parse("""
        models: [{zoo: mlp}]
        hardware:
          - preset: edge_tpu
            space: monet
            params: {lanes: 4}
            sweep: {mesh: [2]}
        problems: P3
        backends: [heuristic:store_all]
    """)
    assert len(m.jobs) == 4 * 4  # U x SRAM; lanes fixed, mesh swept once
    assert {j.params["hardware"]["params"]["lanes"] for j in m.jobs} == {4}


# (manifest, line, key path, words of the problem)
MALFORMED = [
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\nbudget: 0.5\n", 3, "key budget", "did you mean 'budgets'"),
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\nbudgets:\n  - 0.5\n  - 1.5\n", 5, "key budgets[1]",
     "not a fraction"),
    ("models: [{chain: {length: 4}}]\nbackends:\n  - dp\n  - cpsta\n", 4, "key backends[1]", "did you mean 'cpsat'"),
    ("models:\n  - zoo: resnet19\nbackends: [dp]\n", 2, "key models[0].zoo", "did you mean 'resnet18'"),
    ("models:\n  - zoo: mlp\n    params: {bacth: 4}\nbackends: [dp]\n", 3, "key models[0].params.bacth",
     "did you mean 'batch'"),
    ("models:\n  - chain: {costs: 1}\n    sweep:\n      length: 4\nbackends: [dp]\n", 4,
     "key models[0].sweep.length", "non-empty list"),
    (("models: [{zoo: mlp}]\nproblems: P3\nhardware:\n  - preset: edge_tpu\n    sweep:\n      lanes:\n"
     "        - 1\n        - 0\nbackends: [heuristic:store_all]\n"), 8, "key hardware[0].sweep.lanes[1]",
     "not a positive integer"),
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\nbackends: [cpsat]\n", 3, "line 3", "duplicate key"),
    ("models: [{chain: {length: 4}\nbackends: [dp]\n", 2, "line 2", "malformed YAML"),
    ("backends: [dp]\n", 1, "key models", "lists no models"),
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\ntime_limits: [10, -1]\n", 3, "key time_limits[1]",
     "not a positive number"),
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\nproblems: [P1, P3]\n", 3, "key problems[1]",
     "P3 needs hardware"),
    ("models:\n  - onnx: nowhere/model.onnx\nbackends: [dp]\n", 2, "key models[0].onnx", "file not found"),
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\nobjectives:\n  - latncy\n", 4, "key objectives[0]",
     "did you mean 'latency'"),
    (("models: [{zoo: mlp}]\nhardware:\n  - preset: edge_tpu\n    space: monet\n    sample: 0\n"
     "problems: P3\nbackends: [dp]\n"), 5, "key hardware[0].sample", "not a positive integer"),
    ("models: [{chain: {length: 4}}]\nbackends: [dp]\noptions:\n  milp: {milp_solver: cbc}\n", 4,
     "key options.milp", "not listed"),
    ("models:\n  - random: {seed: 3}\nbackends: [dp]\n", 2, "key models[0].random", "needs 'n'"),
    ("models: [{chain: {length: 4}}]\nbackends:\n  - name: cpsat\n    options: {encodng: 2}\n", 4,
     "key backends[0].options.encodng", "backend 'cpsat' has no option 'encodng'"),
    ("models: [{chain: {length: 4}}]\nbackends: [milp]\noptions:\n  milp: {solver: cbc}\n", 4,
     "key options.milp.solver", "backend 'milp' has no option 'solver'"),
    ("- just\n- a list\n", 1, "line 1", "must be a mapping"),
    ("models:\n  - zoo: mlp\n    phase: infer\nbackends: [dp]\n", 3, "key models[0].phase",
     "unknown phase 'infer'"),
]


@pytest.mark.parametrize("text, line, key, words", MALFORMED)
def test_malformed_manifests_name_line_and_key(text, line, key, words):
    with pytest.raises(ManifestError) as info:
        parse_manifest(text, source="bad.yaml", base=REPO)
    message = info.value.message
    assert message.startswith("bad.yaml: ") and f"line {line}" in message, message
    assert key in message and words in message, message


def test_an_unknown_option_is_refused_in_the_words_of_solve():
    """The manifest names the file and the key; the problem and the fix are the registry's."""
    with pytest.raises(ManifestError) as info:
        parse("models: [{chain: {length: 4}}]\nbackends:\n  - name: dp\n    options: {nope: 1}\n")
    err = info.value
    assert err.problem == registry.unknown_option_message("dp", None, ["nope"])
    assert err.fix == registry.option_fix(registry.options_of("dp")) and "monet-ilp backends" in err.fix


def test_options_of_a_plugin_that_declares_none_pass():
    m = parse(f"models: [{{chain: {{length: 4}}}}]\nplugins: [{PLUGIN}]\n"
              "backends: [{name: test:sleep, options: {seconds: 1, anything: 2}}]\n")
    assert m.jobs[0].params["options"] == {"seconds": 1, "anything": 2}


def test_plugin_that_cannot_be_imported():
    with pytest.raises(ManifestError, match=r"line 3, key plugins\[0\].*cannot import plugin 'no_such_mod'"):
        parse("models: [{chain: {length: 4}}]\nbackends: [dp]\nplugins: [no_such_mod]\n")


def test_cli_reports_a_malformed_manifest_on_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("models:\n  - zoo: mlp\nbackends: [cpsat]\nbudgets: [0.5, 2MB, -3]\n")
    result = cli("batch", "run", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: line 4, key budgets[2]"), result.stderr
    assert not (tmp_path / "out").exists()


def test_a_model_in_its_inference_phase():
    """``phase: inference`` builds the forward part of the graph; training stays the default,
    and its job keys do not change."""
    from monet_ilp.batch.job import build_graph
    from monet_ilp.graph.ir import OpKind

    m = parse("""
        models:
          - zoo: mlp
          - zoo: mlp
            phase: inference
        backends: [heuristic:store_all]
    """)
    training, inference = (j.params["model"] for j in m.jobs)
    assert "phase" not in training and inference["phase"] == "inference"
    assert {op.kind for op in build_graph(inference, None).ops} == {OpKind.FORWARD}
    assert any(op.kind is OpKind.BACKWARD_DATA for op in build_graph(training, None).ops)
    assert m.jobs[0].key == parse("models: [{zoo: mlp}]\nbackends: [heuristic:store_all]\n").jobs[0].key
    assert "(inference)" in m.jobs[1].describe()
