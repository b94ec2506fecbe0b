"""A click group whose commands are imported by name, when one is invoked (click's lazy-loading pattern).

Each command module imports what it needs at its top (the solvers, the evaluator, the
plotting library); the group imports a module only when its command runs, so
``monet-ilp --help`` and ``monet-ilp --version`` load none of them.  The listing in
``--help`` takes each command's summary from the table the group is given, not from the
command itself (a test checks that the two agree).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """A group of commands named by ``"module:attribute"``, each imported when first asked for.

    Parameters
    ----------
    lazy
        Command name -> ``("module:attribute", summary)``: where the click command is,
        and the first paragraph of its help (what ``--help`` lists beside its name).
    """

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[cmd_name][0]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, as click writes it, without importing a command."""
        listed = [(name, self.commands.get(name) or click.Command(name, help=self.lazy[name][1]))
                  for name in self.list_commands(ctx)]
        listed = [(name, command) for name, command in listed if not command.hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in listed])
