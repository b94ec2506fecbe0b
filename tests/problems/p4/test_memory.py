"""Activation memory of a layer: the terms add up to Korthikanti et al.'s closed forms, to the byte."""

from __future__ import annotations

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.memory import closed_form, layer_activations, stage_extra_bytes

# (s, b, h, a): GPT-3 175B, 22B, 530B shapes (Korthikanti et al., Table 3), a small one
SHAPES = [(2048, 1, 12288, 96), (2048, 4, 6144, 64), (2048, 1, 20480, 128), (1024, 8, 1024, 16)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("tp", "sequence_parallel"), [(1, False), (2, False), (4, False), (8, False), (2, True),
                                                       (4, True), (8, True)])
@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_terms_add_up_to_the_published_closed_form(shape, tp, sequence_parallel, recompute):
    s, b, h, a = shape
    acts = layer_activations(seq=s, batch=b, hidden=h, heads=a, tp=tp, sequence_parallel=sequence_parallel,
                             recompute=recompute)
    published = closed_form(seq=s, batch=b, hidden=h, heads=a, tp=tp, sequence_parallel=sequence_parallel,
                            recompute=recompute)
    assert published.denominator == 1
    assert acts.bytes == published


def test_the_table_2_expressions_by_hand():
    """sbh(34 + 5as/h) at t = 1; selective with sequence parallelism 34sbh/t; full 2sbh."""
    s, b, h, a = 2048, 1, 12288, 96
    sbh = s * b * h
    assert layer_activations(seq=s, batch=b, hidden=h, heads=a).bytes == sbh * 34 + 5 * a * s * s * b
    assert layer_activations(seq=s, batch=b, hidden=h, heads=a, tp=8, sequence_parallel=True,
                             recompute="selective").bytes == 34 * sbh // 8
    assert layer_activations(seq=s, batch=b, hidden=h, heads=a, tp=8, recompute="full").bytes == 2 * sbh
    # the 5x of the paper's abstract: no recomputation at t = 1 against selective + SP at t = 8
    none = layer_activations(seq=s, batch=b, hidden=h, heads=a).bytes
    assert none / (34 * sbh // 8) > 5


def test_ends_of_the_pipeline():
    s, b, h, v = 2048, 1, 12288, 51200
    assert stage_extra_bytes(seq=s, batch=b, hidden=h, vocab=v, first=True, last=False) == s * b * h
    assert stage_extra_bytes(seq=s, batch=b, hidden=h, vocab=v, tp=8, first=False, last=True) == \
        4 * s * b * h + 4 * s * b * v // 8


@pytest.mark.parametrize("kwargs", [{"tp": 5}, {"tp": 8, "sequence_parallel": True, "seq": 100},
                                    {"recompute": "most"}])
def test_degrees_that_do_not_divide_are_user_errors(kwargs):
    base = {"seq": 2048, "batch": 1, "hidden": 12288, "heads": 96}
    with pytest.raises(MonetError):
        layer_activations(**{**base, **kwargs})
