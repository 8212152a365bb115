"""The ``agentnet`` command line: an operator's view of a running network (docs/operations.md "The
agentnet command line"). :mod:`~agentsdk.cli.settings` resolves where the services are and which
secret to send, :mod:`~agentsdk.cli.render` draws rich tables and envelopes, :mod:`~agentsdk.cli.app`
holds the commands (typer). The RPCs themselves are :class:`agentsdk.operator.OperatorClient`'s."""

from netkernel.extras import require

require("cli", "typer", "rich")
