"""Check the labels of ``formulations/*.md`` and their citations; print a table.

Every label carries the code of the document that defines it (``P2C.C5``: constraint
C5 of ``p2_cpsat.md``; ``formulations/README.md`` lists the codes). A label is
*defined* where it opens a bold span (``**P2C.C5 reads.**``, ``**(DP.D3) Run.**``),
the first cell of a table row (``| P3M.X1 |``) or a heading (``## EV.E1. Copies``),
with its own document's code. The check fails (exit 1) when

- two documents define the same prefixed label (two documents with one code);
- a definition has no code (``**C17 ...**``);
- a label cited in ``formulations/*.md`` or ``monet_ilp/**/*.py`` is not defined in
  the document its code names. A part of a label (``P3M.M11f``, ``P3M.M1c'``) counts as
  cited when the label is defined; a range (``P1C.C1-C3``) needs both ends.

    python scripts/check_labels.py
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The code of each document of ``formulations/``.
CODES = {
    "training_graph.md": "TG", "cost_model.md": "CM", "evaluator.md": "EV",
    "bounds.md": "BD", "time_limits.md": "TL", "random_dags.md": "RD",
    "p1_problem.md": "P1", "p1_cpsat.md": "P1C", "p1_milp.md": "P1M", "dp.md": "DP",
    "p1_interval.md": "P1I", "p1_portfolio.md": "PF",
    "p2_problem.md": "P2", "p2_cpsat.md": "P2C", "p2_milp.md": "P2M",
    "p3_problem.md": "P3", "p3_cpsat.md": "P3C", "p3_milp.md": "P3M",
    "p4_problem.md": "P4", "oracle.md": "OR", "fusion.md": "FU", "torch_checkpoint.md": "TC",
}

_LABEL = r"[A-Z]{1,2}[0-9]+(?:\.[0-9]+|[a-z]+)?['′]?"
_CODE = "|".join(sorted(set(CODES.values()), key=len, reverse=True))
#: A cited label: code, label, and the end of a range (``P1C.C1-C3``).
CITED = re.compile(rf"(?<![\w.])({_CODE})\.({_LABEL})(?:[-–]({_LABEL}))?(?![\w])")
#: Where a label is defined: a bold span, a table row's first cell, a heading.
BOLD = re.compile(rf"\*\*\(?(?:({_CODE})\.)?({_LABEL})(?![\w])")
CELL = re.compile(rf"^\|\s*(?:\*\*)?(?:({_CODE})\.)?({_LABEL})(?![\w])")
HEADING = re.compile(rf"^#+ .*?(?<![\w.])({_CODE})\.({_LABEL})(?![\w])")
#: Bold or first-cell tokens that look like labels but are not: the problem classes.
NOT_LABELS = {"P1", "P2", "P3"}


class Report:
    """What the check found: definitions, citations and the problems."""

    def __init__(self) -> None:
        #: code -> label -> where it is defined (``doc:line``)
        self.defined: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.cited_in_docs: dict[str, int] = defaultdict(int)
        self.cited_in_code: dict[str, int] = defaultdict(int)
        self.problems: list[str] = []


def base(label: str) -> str:
    """The label a part belongs to: ``M11f`` -> ``M11``, ``M1c'`` -> ``M1``, ``E1.3`` -> ``E1``."""
    return re.sub(r"(?<=[0-9])(?:\.[0-9]+|[a-z]+)?['′]?$", "", label)


def family(label: str) -> str:
    """The letters of a label: ``C12`` -> ``C``."""
    return label.rstrip("0123456789.abcdefghijklmnopqrstuvwxyz'′").rstrip("0123456789")


def definitions(report: Report, doc: Path) -> None:
    """Record the labels ``doc`` defines (with its own code), and definitions without one."""
    code = CODES[doc.name]
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        found = [m.groups() for m in BOLD.finditer(line)]
        found += [m.groups() for m in CELL.finditer(line)]
        found += [m.groups() for m in HEADING.finditer(line)]
        for prefix, label in found:
            if prefix is None:
                if label not in NOT_LABELS:
                    report.problems.append(
                        f"{doc.name}:{number}: {label} is defined without its code ({code}.{label})")
            elif prefix == code:
                report.defined[code][label].append(f"{doc.name}:{number}")


def is_defined(report: Report, code: str, label: str) -> bool:
    """Whether ``label`` (or the label it is a part of) is defined by document ``code``."""
    labels = report.defined.get(code, {})
    return label in labels or label.rstrip("'′") in labels or base(label) in labels


def citations(report: Report, root: Path, path: Path, counts: dict[str, int]) -> None:
    """Check every prefixed label cited in ``path``."""
    name = path.relative_to(root).as_posix()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in CITED.finditer(line):
            code, label, end = match.groups()
            counts[code] += 1
            for one in (label, end):
                if one is not None and not is_defined(report, code, one):
                    report.problems.append(
                        f"{name}:{number}: {code}.{one} is not defined in {document(code)}")
            if end is not None and family(label) != family(end):
                report.problems.append(f"{name}:{number}: range {match.group(0)} mixes families")


def document(code: str) -> str:
    """The document of ``code``."""
    return next(doc for doc, one in CODES.items() if one == code)


def check(root: Path = ROOT) -> Report:
    """Collect every definition, then check every citation in the documents and the code."""
    report = Report()
    docs = sorted((root / "formulations").glob("*.md"))
    known = {doc.name for doc in docs} - {"README.md"}
    for missing in sorted(known - set(CODES)):
        report.problems.append(f"{missing} has no code in scripts/check_labels.py CODES")
    by_code: dict[str, list[str]] = defaultdict(list)
    for name, code in CODES.items():
        by_code[code].append(name)
    for code, docs_of_code in by_code.items():
        if len(docs_of_code) > 1:
            report.problems.append(f"code {code} names {len(docs_of_code)} documents: {docs_of_code}")
    for doc in docs:
        if doc.name in CODES:
            definitions(report, doc)
    owners: dict[str, set[str]] = defaultdict(set)
    for code, labels in report.defined.items():
        for label, places in labels.items():
            owners[f"{code}.{label}"].update(place.split(":")[0] for place in places)
    for label, docs_of_label in sorted(owners.items()):
        if len(docs_of_label) > 1:
            report.problems.append(f"{label} is defined by {sorted(docs_of_label)}")
    for doc in docs:
        citations(report, root, doc, report.cited_in_docs)
    for module in sorted((root / "monet_ilp").rglob("*.py")):
        citations(report, root, module, report.cited_in_code)
    return report


def main() -> int:
    """Print one row per document, then the problems; 1 if there are any."""
    report = check()
    print(f"{'document':<18} {'code':<4} {'labels':>6} {'cited in docs':>13} {'cited in code':>13}")
    for doc, code in CODES.items():
        print(f"{doc:<18} {code:<4} {len(report.defined.get(code, {})):>6} "
              f"{report.cited_in_docs.get(code, 0):>13} {report.cited_in_code.get(code, 0):>13}")
    for problem in report.problems:
        print(problem)
    print(f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
