"""Errors a user can cause; every one names the file, the field and the fix.

The CLI catches :class:`MonetError`, prints its message on one line and exits with
status 2, so each subclass must carry a message a user can act on without a
traceback.
"""

from __future__ import annotations

#: An error's problem is cut here: a message that quotes a whole schedule helps nobody.
MAX_PROBLEM_CHARS = 400


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


class MonetError(Exception):
    """Base class of every error caused by user input.

    Parameters
    ----------
    problem
        What is wrong, in one sentence.
    file
        The file (or model/zoo name) the bad input came from, if any.
    field
        The field, key path, node or op that is wrong, if any.
    fix
        What the user should do about it.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ):
        self.problem = problem
        self.file = file
        self.field = field
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        where = ": ".join(str(p) for p in (self.file, self.field) if p)
        problem = clip(self.problem, MAX_PROBLEM_CHARS)
        text = f"{where}: {problem}" if where else problem
        if self.fix:
            text += f" (fix: {self.fix})"
        return text

    def with_file(self, file: str) -> MonetError:
        """Return the same error, attributed to ``file`` if it names none yet."""
        if self.file is None:
            self.file = file
            self.args = (self.message,)
        return self


class InputFormatError(MonetError):
    """A file is missing, truncated, or not in the format it claims to be."""


class GraphError(MonetError):
    """A graph is structurally wrong: cycles, dangling tensors, bad sizes."""


class UnsupportedOpError(GraphError):
    """An ONNX op has no autodiff rule (pass ``allow_unknown`` to treat it as elementwise)."""


class UnknownModelError(MonetError):
    """A zoo name that does not exist."""
