"""Tests of the baseline schedulers (monet_ilp.heuristics)."""
