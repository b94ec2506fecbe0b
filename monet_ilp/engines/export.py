"""One model export for every MILP backend: MPS (``.mps``) or CPLEX LP (``.lp``), by suffix.

The file is written by HiGHS from the :class:`~monet_ilp.engines.milp.SparseMilp` the
solvers take (:meth:`~monet_ilp.engines.milp.SparseMilp.for_file`: the objective
constant is a column fixed at 1, a contradiction an infeasible row), so it solves
elsewhere (Gurobi, CPLEX, HiGHS, CBC) to the same optimum.  The backends' ``export``
option and P1's ``export_model`` use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import highspy

from monet_ilp.engines.highs import highs_lp
from monet_ilp.errors import MonetError

if TYPE_CHECKING:
    from monet_ilp.engines.milp import SparseMilp

__all__ = ["FORMATS", "export_path", "write_model"]

#: The file formats, by suffix.
FORMATS = {".mps": "MPS", ".lp": "CPLEX LP"}


def export_path(path: str | Path, *, field: str = "export") -> Path:
    """``path`` as a :class:`~pathlib.Path` whose suffix names a format of :data:`FORMATS`,
    else a user error about ``field``."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise MonetError(f"cannot tell the model format of {str(path)!r}", field=field,
                         fix="end the file name with .mps or .lp")
    return path


def write_model(milp: SparseMilp, path: str | Path, *, field: str = "export") -> Path:
    """Write ``milp`` (with its names) to ``path``, in the format its suffix names."""
    path = export_path(path, field=field)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(highs_lp(milp.for_file(), names=True))
    status = h.writeModel(str(path))
    if status != highspy.HighsStatus.kOk or not path.exists():
        raise MonetError(f"HiGHS could not write {str(path)!r}", field=field,
                         fix="check that the directory exists and is writable")
    return path
