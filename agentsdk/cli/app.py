"""The ``agentnet`` command line (typer): an operator's view of the hub's agents, channels, WALs, tasks,
audit log, A2A calls, knowledge and console (the web console: :mod:`agentsdk.console`). Every command has
``--json``; a failure prints the reason and what to do and exits non-zero (:data:`EXIT_CODES`).

This module assembles it: :mod:`~agentsdk.cli.common` holds the Typer :data:`app`, its global options and
the helpers every command uses; the modules imported below register their commands on it, in the order
``agentnet --help`` lists them."""

from __future__ import annotations

# Each module registers its commands on the app when imported, in the order `agentnet --help` lists them.
from agentsdk.cli import reads  # noqa: F401

# isort: split
from agentsdk.cli import console_command  # noqa: F401

# isort: split
from agentsdk.cli import knowledge_command  # noqa: F401

# isort: split
from agentsdk.cli import mcp_command  # noqa: F401

# isort: split
from agentsdk.cli import data  # noqa: F401

# isort: split
from agentsdk.cli.common import EXIT_CODES, PROGRESS_AT, JsonOption, app, knowledge_app

__all__ = ["EXIT_CODES", "PROGRESS_AT", "JsonOption", "app", "knowledge_app", "main"]


def main() -> None:
    """The ``agentnet`` entry point."""
    app()


if __name__ == "__main__":
    main()
