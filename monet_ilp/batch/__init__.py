"""Batch solving: instance sets from YAML manifests, run on a local process pool or a Dask cluster.

The outermost layer next to the CLI: a manifest (:mod:`.manifest`) expands into
:class:`~.job.Job` s, each job is solved in its own process (:mod:`.isolation`,
:mod:`.worker`) under a hard deadline, and every result is appended to
``results.jsonl`` as soon as it exists (:mod:`.results`).  :mod:`.summary` and
:mod:`.plots` read that file back.  The manifest format and the record schema are in
``instances/README.md``.

The names below are imported on first use: every job's worker process imports
this package, and should pay only for what it runs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BackendSummary": "summary",
    "BatchReport": "runner",
    "Job": "job",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "ResultsLog": "results",
    "content_of": "results",
    "job_key": "job",
    "latest_records": "results",
    "load_manifest": "manifest",
    "parse_manifest": "manifest",
    "read_records": "results",
    "run_batch": "runner",
    "summarize_records": "summary",
}

__all__ = ['BackendSummary', 'BatchReport', 'Job', 'Manifest', 'ManifestError', 'ResultsLog', 'content_of', 'job_key', 'latest_records', 'load_manifest', 'parse_manifest', 'read_records', 'run_batch', 'summarize_records']  # the keys of _EXPORTS


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'monet_ilp.batch' has no attribute {name!r}")
    return getattr(importlib.import_module(f"monet_ilp.batch.{_EXPORTS[name]}"), name)
