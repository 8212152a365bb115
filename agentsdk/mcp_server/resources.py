"""The MCP resources ``agentnet mcp`` serves: the identity's channels and their transcripts.

* ``agentnet://channels``: the identity's channels (``channels(action="list", state="all")``).
* ``agentnet://channels/{channel_id}``: one channel (``channels(action="info")``: metadata,
  state, whose turn it is).
* ``agentnet://channels/{channel_id}/transcript``: the channel's latest envelopes the identity may
  see, oldest first: at most :data:`MAX_TRANSCRIPT_ENVELOPES` of them and
  :data:`MAX_TRANSCRIPT_BYTES` of JSON (older ones are left out; ``first_seq`` and ``truncated``
  say so), each envelope's text or event data clipped to :data:`MAX_ENVELOPE_BYTES`.

All are JSON (``application/json``). Reading a channel the identity may not see fails with the
hub's refusal (``PERMISSION_DENIED``, ``NOT_FOUND``) as the JSON-RPC error's message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from agentsdk.mcp_server.tools import error_text
from agentsdk.network.clients import HumanClient
from agentsdk.network.deps import AGENT_CLIENT_DEP
from agentsdk.network.plugin import HubTool
from netkernel.clip import clip_text
from netkernel.envelope import Envelope
from netkernel.errors import AgentNetError
from netkernel.tool_schemas import ChannelsArgs

CHANNELS_URI = "agentnet://channels"
"""The identity's channels."""
CHANNEL_TEMPLATE = "agentnet://channels/{channel_id}"
"""One channel: metadata, adapter state, whose turn it is."""
TRANSCRIPT_TEMPLATE = "agentnet://channels/{channel_id}/transcript"
"""One channel's latest envelopes."""
MAX_TRANSCRIPT_ENVELOPES = 100
"""A transcript resource holds at most this many of the channel's latest envelopes."""
MAX_TRANSCRIPT_BYTES = 256 * 1024
"""A transcript resource's JSON is at most this many bytes (the oldest envelopes are left out first)."""
MAX_ENVELOPE_BYTES = 16 * 1024
"""An envelope's text (or its event data as JSON) in a transcript is clipped to this many bytes."""
MAX_LISTED_CHANNELS = 100
"""``resources/list`` lists the transcripts of at most this many of the identity's active channels."""

_URI = re.compile(r"^agentnet://channels/([A-Za-z0-9_.:-]{1,128})(/transcript)?$")
RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code MCP uses for an unknown resource."""


@dataclass(frozen=True)
class ResourceRef:
    """A parsed resource URI."""

    uri: str
    channel_id: str = ""
    """Empty for the channel list."""
    transcript: bool = False


def parse_uri(uri: str) -> ResourceRef:
    """The resource ``uri`` names; MCPError (resource not found) for any other URI."""
    if uri == CHANNELS_URI:
        return ResourceRef(uri)
    match = _URI.match(uri)
    if match is None:
        raise MCPError(
            RESOURCE_NOT_FOUND,
            f"no resource {uri!r}: the resources are {CHANNELS_URI}, {CHANNEL_TEMPLATE} and {TRANSCRIPT_TEMPLATE}.",
        )
    return ResourceRef(uri, match.group(1), bool(match.group(2)))


def channel_uris(channel_id: str) -> tuple[str, str]:
    """The channel's resource URI and its transcript's."""
    channel = CHANNEL_TEMPLATE.format(channel_id=channel_id)
    return channel, channel + "/transcript"


def envelope_json(envelope: Envelope, names: dict[str, str]) -> dict[str, Any]:
    """One envelope of a transcript, as JSON."""
    out: dict[str, Any] = {
        "seq": envelope.seq,
        "envelope_id": envelope.envelope_id,
        "sender_id": envelope.sender_id,
        "sender": names.get(envelope.sender_id, envelope.sender_id),
        "event_type": envelope.event_type,
        "created_at": envelope.created_at,
    }
    if envelope.text:
        out["text"] = clip_text(envelope.text, MAX_ENVELOPE_BYTES)
        out["clipped"] = out["text"] != envelope.text
        images = envelope.event_data.get("images")
        if isinstance(images, list) and images:
            out["images"] = len(images)  # their bytes are not part of a transcript
    else:
        raw = json.dumps(envelope.event_data, ensure_ascii=False)
        if len(raw.encode()) <= MAX_ENVELOPE_BYTES:
            out["event_data"] = envelope.event_data
            out["clipped"] = False
        else:
            out["event_data_json"] = clip_text(raw, MAX_ENVELOPE_BYTES)
            out["clipped"] = True
    if envelope.causation_id:
        out["causation_id"] = envelope.causation_id
    return out


class NetworkResources:
    """Lists and reads the resources of one identity."""

    def __init__(self, client: HumanClient) -> None:
        self.client = client
        """The identity whose channels these are."""
        self._channels = HubTool("channels", ChannelsArgs)

    @staticmethod
    def templates() -> list[types.ResourceTemplate]:
        """The two per-channel templates."""
        return [
            types.ResourceTemplate(
                name="channel",
                uri_template=CHANNEL_TEMPLATE,
                description="A channel of this identity: metadata, adapter state and whose turn it is.",
                mime_type="application/json",
            ),
            types.ResourceTemplate(
                name="transcript",
                uri_template=TRANSCRIPT_TEMPLATE,
                description=f"A channel's latest envelopes (at most {MAX_TRANSCRIPT_ENVELOPES}, "
                f"{MAX_TRANSCRIPT_BYTES // 1024} KiB), oldest first.",
                mime_type="application/json",
            ),
        ]

    async def listing(self) -> list[types.Resource]:
        """The channel list, and the transcript of each active channel (at most :data:`MAX_LISTED_CHANNELS`)."""
        resources = [
            types.Resource(
                name="channels", uri=CHANNELS_URI, description="This identity's channels.", mime_type="application/json"
            )
        ]
        listed = await self._run({"action": "list", "state": "active"})
        for channel in _channel_list(listed)[:MAX_LISTED_CHANNELS]:
            channel_id = str(channel.get("channel_id", ""))
            if _URI.match(CHANNEL_TEMPLATE.format(channel_id=channel_id)):
                resources.append(
                    types.Resource(
                        name=f"transcript {channel_id}",
                        uri=channel_uris(channel_id)[1],
                        description=f"{channel.get('type', '')} channel {channel_id}: latest envelopes.",
                        mime_type="application/json",
                    )
                )
        return resources

    async def read(self, uri: str) -> types.ReadResourceResult:
        """The resource's JSON; MCPError with the hub's refusal when the identity may not read it."""
        ref = parse_uri(uri)
        if not ref.channel_id:
            value: Any = await self._run({"action": "list", "state": "all"})
        elif not ref.transcript:
            value = await self._run({"action": "info", "channel_id": ref.channel_id})
        else:
            value = await self._transcript(ref.channel_id)
        text = json.dumps(value, ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def _run(self, arguments: dict[str, Any]) -> Any:
        try:
            return await self._channels.run(arguments, {AGENT_CLIENT_DEP: self.client})
        except AgentNetError as err:
            raise _refused(err) from None

    async def _transcript(self, channel_id: str) -> dict[str, Any]:
        try:
            metadata, _, _ = await self.client.channel_info(channel_id)
            first = max(1, metadata.last_seq - MAX_TRANSCRIPT_ENVELOPES + 1)
            envelopes = await self.client.read_wal(channel_id, from_seq=first, until_seq=metadata.last_seq)
        except AgentNetError as err:
            raise _refused(err) from None
        names = {p.agent_id: p.name for p in metadata.participants if p.name}
        rows = [envelope_json(e, names) for e in envelopes[-MAX_TRANSCRIPT_ENVELOPES:]]
        truncated = first > 1
        sizes = [len(json.dumps(r, ensure_ascii=False).encode()) + 1 for r in rows]
        total = sum(sizes)
        while rows and total > MAX_TRANSCRIPT_BYTES - 1024:  # room for the fields around the rows
            total -= sizes.pop(0)
            rows.pop(0)
            truncated = True
        return {
            "channel_id": channel_id,
            "type": metadata.type,
            "state": metadata.state,
            "last_seq": metadata.last_seq,
            "first_seq": rows[0]["seq"] if rows else metadata.last_seq + 1,
            "truncated": truncated,
            "envelopes": rows,
        }


def _channel_list(listed: Any) -> list[dict[str, Any]]:
    """The channels of a ``channels(action="list")`` result."""
    channels = listed.get("channels") if isinstance(listed, dict) else listed
    return [c for c in channels if isinstance(c, dict)] if isinstance(channels, list) else []


def _refused(err: AgentNetError) -> MCPError:
    """A hub refusal of a read, as the JSON-RPC error the host gets (the gRPC status name leads the message)."""
    code = RESOURCE_NOT_FOUND if err.code.name == "NOT_FOUND" else types.INVALID_PARAMS
    return MCPError(code, error_text(err))
