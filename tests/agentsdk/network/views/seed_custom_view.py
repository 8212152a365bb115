# mypy: disable-error-code="no-untyped-def"
"""The seed's custom-view example ("Views → Custom views"), verbatim except the imports.

``ag2.events`` / ``ag2.network`` become ``agentsdk.events`` / ``agentsdk.network``;
formatting is left exactly as in the seed.
"""

from agentsdk.events import BaseEvent, ModelMessage, ModelRequest, TextInput
from agentsdk.network import EV_TEXT, ViewPolicy

# fmt: off


class FromOneOnly(ViewPolicy):
    """Show only envelopes from a single named sender."""
    name = "from_one_only"

    def __init__(self, sender_id: str) -> None:
        self.sender_id = sender_id

    async def project(
        self,
        wal,
        *,
        participant_id,
        channel,
        render_envelope,                 # required by the protocol
        name_for=lambda agent_id: agent_id,
    ):
        out: list[BaseEvent] = []
        for env in wal:
            if env.event_type != EV_TEXT or env.sender_id != self.sender_id:
                continue
            text = render_envelope(env)   # adapter renders the envelope to a string (or None)
            if text is None:
                continue
            out.append(
                ModelMessage(text) if env.sender_id == participant_id
                else ModelRequest([TextInput(text)])
            )
        return out


# fmt: on
