"""The console's one-time login link and the live channel page's head (issue 41), against a real hub:
``agentnet console`` prints a link that logs in once from the operator token it read (a token file,
the data directory's, or none: then no link); the channel stream keeps whose turn, the adapter state
(participants by name, never raw ids) and the "Envelopes first–last of N" counts current."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from agentsdk.console.app import COOKIE, Console
from agentsdk.console.login_links import LoginLinks
from tests.agentsdk.console.conftest import ConsoleProcess, Hub, LoopThread, login, server_sent_events, start_console
from tests.hubsvc.harness import open_channel, register

_LINK = re.compile(r"log in once with this link \(it works one time\): (http://\S+)")


def test_a_login_link_logs_in_once_and_only_with_a_token_the_hub_takes(hub: Hub) -> None:
    console = Console(hub.target)
    good, wrong = console.login_link(hub.token), console.login_link("not-the-operator-token")
    assert hub.token not in good  # the link is a random token of its own
    with TestClient(console.app(), base_url="http://127.0.0.1", follow_redirects=False) as client:
        used = client.get(good)
        assert (used.status_code, used.headers["location"]) == (303, "/")
        assert COOKIE in client.cookies and client.get("/agents").status_code == 200
    with TestClient(console.app(), base_url="http://127.0.0.1", follow_redirects=False) as client:
        again = client.get(good)
        assert again.status_code == 401 and "used already or expired" in again.text
        assert COOKIE not in client.cookies
        assert client.get("/login?once=made-up").status_code == 401
        refused = client.get(wrong)
        assert refused.status_code == 401 and "does not accept this token" in refused.text


def test_an_unused_login_link_expires() -> None:
    now = [0.0]
    links = LoginLinks(ttl=60.0, clock=lambda: now[0])
    fresh, stale = links.issue("t1"), links.issue("t2")
    assert links.redeem(fresh) == "t1" and links.redeem(fresh) is None
    now[0] = 61.0
    assert links.redeem(stale) is None


def test_agentnet_console_prints_a_login_link_from_the_token_file(hub: Hub, tmp_path: Path) -> None:
    token_file = hub.data_dir / "hub-operator.token"
    process = start_console(hub.target, "--token-file", str(token_file), cwd=tmp_path)
    try:
        found = process.line_matching(_LINK)
        link = found.group(1) if found else None
        assert link and link.startswith(process.url + "/login?once=")
        assert hub.token not in "".join(process.output)
        with httpx.Client(timeout=30, follow_redirects=False) as http:
            assert http.get(link).status_code == 303
            assert http.get(process.url + "/agents").status_code == 200
        with httpx.Client(timeout=30, follow_redirects=False) as http:
            assert http.get(link).status_code == 401  # one time only
    finally:
        assert process.stop() == 0, "".join(process.output)
    # no token where the default looks (cwd/data): no link, the console still serves the login form
    process = start_console(hub.target, cwd=tmp_path)
    try:
        assert httpx.get(process.url + "/login", timeout=30).status_code == 200
        assert process.line_matching(_LINK, timeout=1.0) is None  # serving: anything printed before is read
    finally:
        assert process.stop() == 0, "".join(process.output)


def test_a_token_file_that_cannot_be_read_is_refused(hub: Hub, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="cannot read the operator token"):
        start_console(hub.target, "--token-file", str(tmp_path / "missing.token"), cwd=tmp_path)


def test_the_live_channel_head_follows_counts_turns_and_adapter_state_by_name(
    console: ConsoleProcess, hub: Hub, loop_thread: LoopThread
) -> None:
    first = loop_thread.run(register(hub.target, "head-first"))
    second = loop_thread.run(register(hub.target, "head-second"))
    loop_thread.run(first.connect())
    loop_thread.run(second.connect())
    try:
        channel_id = loop_thread.run(open_channel(first, "discussion", [second]))
        with httpx.Client(base_url=console.url, timeout=30, follow_redirects=False) as http:
            assert login(http, hub.token).status_code == 303
            page = http.get(f"/channels/{channel_id}").text
            shown = re.search(r'id="envelope-range">\s*(.*?)\s*</span>', page, re.S)
            assert shown
            seq = int(shown.group(1).rsplit(" ", 1)[1]) if shown.group(1) else 0
            live_url = re.search(r'data-live-url="([^"]+)"', page)
            assert live_url
            with http.stream("GET", live_url.group(1).replace("&amp;", "&")) as stream:
                loop_thread.run(first.say(channel_id, "my turn first"))  # then it is head-second's turn
                head: dict[str, str] = {}
                for event, data in server_sent_events(stream):
                    if event == "replace":
                        head[data["id"]] = html.unescape(data["html"])
                    if len(head) == 3:
                        break
        assert f"1–{seq + 1} of {seq + 1}" in head["envelope-range"]  # was "1–{seq} of {seq}" when read
        assert "head-second" in head["channel-turn"]
        state = re.search(r'<code id="adapter-state">(.*?)</code>', head["channel-fields"], re.S)
        assert state and json.loads(state.group(1))["expected_next_speaker"] == "head-second"
        assert second.agent_id not in head["channel-fields"] and first.agent_id not in head["channel-fields"]
    finally:
        loop_thread.run(first.close())
        loop_thread.run(second.close())
