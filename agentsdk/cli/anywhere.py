"""Global options anywhere on the command line: ``agentnet knowledge ls / --namespace x`` means what
``agentnet --namespace x knowledge ls /`` means.

click reads a group's options only before the subcommand's name; :class:`GlobalOptionsGroup` first
moves every option of the top-level group that appears after it (with its value) to the front. A
subcommand never has an option of the same name (tests/agentsdk/cli guards it), and ``--`` ends the search."""

from __future__ import annotations

from typer._click.core import Context, Parameter  # typer's own copy of click
from typer.core import TyperGroup
from typer.core import TyperOption as Option


def hoist(args: list[str], params: list[Parameter]) -> list[str]:
    """``args`` with the options of ``params`` (and their values) moved to the front, in their order."""
    takes_value: dict[str, bool] = {}
    for param in params:
        if isinstance(param, Option) and param.name != "help":  # a subcommand's --help is its own
            for name in (*param.opts, *param.secondary_opts):
                takes_value[name] = not param.is_flag and param.nargs != 0
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in takes_value:
            front.append(arg)
            if takes_value[name] and "=" not in arg and i + 1 < len(args):
                front.append(args[i + 1])
                i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


class GlobalOptionsGroup(TyperGroup):
    """The ``agentnet`` group: its options are accepted before or after the subcommand."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """click's parsing, after moving this group's options to the front."""
        return super().parse_args(ctx, hoist(list(args), self.get_params(ctx)))
