"""The ``agentnet`` command line: an operator's view of a running network (docs/operations.md "The
agentnet command line"). :mod:`~agentsdk.cli.settings` resolves where the services are and which
secret to send, :mod:`~agentsdk.cli.render` draws rich tables and envelopes, :mod:`~agentsdk.cli.common`
holds the Typer app and what every command uses, :mod:`~agentsdk.cli.app` assembles the commands (typer) of
:mod:`~agentsdk.cli.reads`, :mod:`~agentsdk.cli.console_command`, :mod:`~agentsdk.cli.knowledge_command`,
:mod:`~agentsdk.cli.mcp_command` and :mod:`~agentsdk.cli.data`. The RPCs themselves are
:class:`agentsdk.operator.OperatorClient`'s."""

from netkernel.extras import require

require("cli", "typer", "rich")
