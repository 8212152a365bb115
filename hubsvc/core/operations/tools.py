"""ListTools: the schemas of the tools a caller may use now (plugin tools, and the adapter's ``say``)."""

from __future__ import annotations

from agentnet.v1 import hub_pb2

from hubsvc.adapters.common import require_participant
from hubsvc.core.hub import HubCore
from netkernel.errors import ChannelClosed
from netkernel.tool_schemas import ALL_TOOLS, PLUGIN_TOOLS, description, parameters_schema_json


class ToolOps:
    """ListTools."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    def list_tools(self, caller: str, channel_id: str, *, include_plugin: bool) -> list[hub_pb2.ToolSchema]:
        """Plugin tools plus the adapter tools ``channel_id`` offers the caller this turn."""
        names: list[tuple[str, hub_pb2.ToolSource.ValueType]] = []
        if include_plugin:
            names += [(n, hub_pb2.TOOL_SOURCE_PLUGIN) for n in PLUGIN_TOOLS]
        ch = self.core.live_channel(channel_id) if channel_id else None
        if channel_id and ch is None:
            self.core.placement.require(channel_id)  # live, held by another replica: it answers
            raise ChannelClosed(f"channel '{channel_id}' is not live; no adapter tools are offered.")
        if ch is not None:
            require_participant(caller, ch.participants, channel_id, "list its tools")
            names += [(n, hub_pb2.TOOL_SOURCE_ADAPTER) for n in ch.offered_tools(caller)]
        return [
            hub_pb2.ToolSchema(
                name=name,
                description=description(ALL_TOOLS[name]),
                parameters_json_schema=parameters_schema_json(ALL_TOOLS[name]),
                source=source,
            )
            for name, source in names
        ]
