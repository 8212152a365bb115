"""Objects holding a secret keep it out of their repr (which logs and tracebacks print)."""

from __future__ import annotations

from agentsdk.a2a.context import Dispatch
from agentsdk.config import OpenAIConfig
from agentsdk.network.credentials import SavedIdentity

SECRET = "s3cr3t-value-0123456789"


def test_credentials_api_keys_and_call_tokens_are_not_in_reprs() -> None:
    identity = SavedIdentity(agent_id="a1", name="a", kind="agent", credential=f"a1.{SECRET}")
    config = OpenAIConfig(model="m", api_key=SECRET)
    dispatch = Dispatch(execution_id="e1", root_session_id="r1", message="hi", call_token=f"e1.{SECRET}")
    for obj in (identity, config, dispatch):
        assert SECRET not in repr(obj)
        assert SECRET not in str(obj)
    assert "agent_id='a1'" in repr(identity) and "model='m'" in repr(config) and "execution_id='e1'" in repr(dispatch)
