"""The console's rules over HTTP, against a real hub: no session, no data (pages redirect to the login
form, streams and data endpoints answer 401); the login form checks the token with the hub and
carries a CSRF token; the session cookie is HttpOnly, SameSite=Strict and never the token; pages are
one page of rows with working next/older links; untrusted text is escaped; the live streams send
what is committed (and stop at logout)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from agentnet.v1 import hub_pb2, task_pb2
from starlette.testclient import TestClient

from agentsdk.console.app import COOKIE, Console
from agentsdk.console.options import ConsoleOptions
from tests.agentsdk.console.conftest import (
    ConsoleProcess,
    Hub,
    LoopThread,
    login,
    login_form_csrf,
    server_sent_events,
    start_console,
)
from tests.hubsvc.harness import EV_TEXT, make_envelope, open_channel, register

PAGE = 10
XSS = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"


@dataclass
class Seeded:
    """What the module's hub holds."""

    agent_names: list[str] = field(default_factory=list)
    channel_id: str = ""
    last_seq: int = 0
    agent_credential: str = ""


async def _seed(target: str) -> Seeded:
    """25 agents (agent-00 … agent-24) plus a writer and a reader who talk in a conversation: 25
    text envelopes, the 13th of them untrusted HTML."""
    seeded = Seeded()
    for i in range(25):
        await register(target, f"agent-{i:02d}", capabilities=["search"])
    writer = await register(target, "writer")
    reader = await register(target, "reader")
    seeded.agent_credential = writer.credential
    await writer.connect()
    await reader.connect()
    try:
        seeded.channel_id = await open_channel(writer, "conversation", [reader])
        texts = [XSS if i == 12 else f"line {i}" for i in range(25)]
        results = await writer.post_batch([make_envelope(seeded.channel_id, EV_TEXT, {"text": t}) for t in texts])
        assert all(r.WhichOneof("result") == "envelope" for r in results)
        seeded.last_seq = results[-1].envelope.seq
    finally:
        await writer.close()
        await reader.close()
    seeded.agent_names = sorted([f"agent-{i:02d}" for i in range(25)] + ["writer", "reader"])
    return seeded


@pytest.fixture(scope="module")
def seeded(hub: Hub) -> Seeded:
    """The module's data."""
    return asyncio.run(_seed(hub.target))


@pytest.fixture
def client(hub: Hub) -> Iterator[TestClient]:
    """The console app in this process (Starlette's TestClient), pages of 10, against the real hub."""
    app = Console(hub.target, options=ConsoleOptions(page_size=PAGE)).app()
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as test_client:
        yield test_client


@pytest.fixture
def logged_in(client: TestClient, hub: Hub) -> TestClient:
    """The client with a session."""
    response = login(client, hub.token)
    assert response.status_code == 303, response.text
    return client


def test_without_a_session_pages_redirect_to_login_and_data_is_refused(client: TestClient, seeded: Seeded) -> None:
    pages = ["/", "/agents", "/agents/writer", "/channels", f"/channels/{seeded.channel_id}", "/tasks", "/audit"]
    for path in [*pages, "/calls?id=x"]:
        response = client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next="), path
    for path in [f"/channels/{seeded.channel_id}/live", "/audit/live"]:
        assert client.get(path).status_code == 401, path
    client.cookies.set(COOKIE, "made-up-session-id")
    assert client.get("/agents").status_code == 303
    assert client.get("/audit/live").status_code == 401
    form = client.get("/login")
    assert form.status_code == 200 and 'name="token"' in form.text and "writer" not in form.text


def test_the_login_checks_the_token_with_the_hub(client: TestClient, hub: Hub, seeded: Seeded) -> None:
    wrong = login(client, "not-the-token")
    assert wrong.status_code == 401 and "does not accept this token" in wrong.text
    agent = login(client, seeded.agent_credential)
    assert agent.status_code == 403 and "agent&#39;s credential" in agent.text
    assert COOKIE not in client.cookies
    assert client.get("/agents").status_code == 303

    ok = login(client, hub.token, next_="/agents")
    assert (ok.status_code, ok.headers["location"]) == (303, "/agents")
    assert client.get("/agents").status_code == 200


def test_the_login_form_needs_its_csrf_token_and_this_origin(client: TestClient, hub: Hub) -> None:
    client.get("/login")
    assert client.post("/login", data={"token": hub.token}).status_code == 403
    assert client.post("/login", data={"token": hub.token, "csrf": "0" * 64}).status_code == 403
    csrf = login_form_csrf(client.get("/login").text)
    other_site = client.post(
        "/login", data={"token": hub.token, "csrf": csrf}, headers={"origin": "http://evil.example"}
    )
    assert other_site.status_code == 403
    assert COOKIE not in client.cookies
    outside = client.post("/login", data={"token": hub.token, "csrf": csrf, "next": "//evil.example/x"})
    assert (outside.status_code, outside.headers["location"]) == (303, "/")  # never to another site


def test_the_session_cookie_is_httponly_strict_and_not_the_token(client: TestClient, hub: Hub) -> None:
    response = login(client, hub.token)
    cookies = [v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith(COOKIE + "=")]
    assert len(cookies) == 1
    assert "HttpOnly" in cookies[0] and "SameSite=strict" in cookies[0] and "Path=/" in cookies[0]
    assert hub.token not in str(response.headers) and hub.token not in response.headers["location"]
    assert client.cookies[COOKIE] != hub.token and len(client.cookies[COOKIE]) >= 40
    page = client.get("/")
    assert page.status_code == 200 and "sqlite" in page.text and hub.token not in page.text
    assert "retention of ended channels</th><td>everything kept" in page.text and "store size" in page.text
    assert "retention of audit records</th><td>everything kept" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_logout_needs_the_session_csrf_and_ends_the_session(logged_in: TestClient) -> None:
    page = logged_in.get("/agents").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    assert logged_in.post("/logout", data={"csrf": "wrong"}).status_code == 403
    assert logged_in.get("/agents").status_code == 200
    out = logged_in.post("/logout", data={"csrf": csrf.group(1)})
    assert (out.status_code, out.headers["location"]) == (303, "/login")
    assert logged_in.get("/agents").status_code == 303
    assert logged_in.get("/audit/live").status_code == 401


def _names(html: str) -> list[str]:
    return re.findall(r'<tr class="agent">\s*<td><a href="[^"]+">([^<]+)</a>', html)


def test_agents_are_listed_a_page_at_a_time(logged_in: TestClient, seeded: Seeded) -> None:
    seen: list[str] = []
    url = "/agents"
    pages = 0
    while url:
        html = logged_in.get(url).text
        names = _names(html)
        assert len(names) == (PAGE if len(seen) + PAGE <= len(seeded.agent_names) else len(seeded.agent_names) % PAGE)
        seen.extend(names)
        pages += 1
        next_link = re.search(r'href="([^"]+)" id="next-page"', html)
        url = next_link.group(1).replace("&amp;", "&") if next_link else ""
    assert seen == seeded.agent_names and pages == 3
    assert "search" in logged_in.get("/agents").text  # skills shown
    bad = logged_in.get("/agents?page_token=not-a-token")
    assert bad.status_code == 400 and "INVALID_ARGUMENT" in bad.text


def test_an_agent_page_shows_its_record_and_skills(logged_in: TestClient, seeded: Seeded) -> None:
    page = logged_in.get("/agents/agent-03")
    assert page.status_code == 200, page.text
    assert "agent-03" in page.text and "search" in page.text  # the resume's claimed skills
    missing = logged_in.get("/agents/nobody-here")
    assert missing.status_code == 404 and "NOT_FOUND" in missing.text


def _seqs(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'<tr class="env [^"]+" data-seq="(\d+)">', html)]


def test_a_channel_shows_one_window_of_its_wal(logged_in: TestClient, seeded: Seeded) -> None:
    page = logged_in.get(f"/channels/{seeded.channel_id}")
    assert page.status_code == 200
    last = seeded.last_seq
    assert _seqs(page.text) == list(range(last - PAGE + 1, last + 1))
    assert "whose turn" in page.text and "data-live-url" in page.text
    older = re.search(r'href="([^"]+)" id="older-page"', page.text)
    assert older
    previous = logged_in.get(older.group(1)).text
    assert _seqs(previous) == list(range(last - 2 * PAGE + 1, last - PAGE + 1))
    assert "data-live-url" not in previous and 'id="newest-page"' in previous
    first = logged_in.get(f"/channels/{seeded.channel_id}?before=3").text
    assert _seqs(first) == [1, 2]
    assert logged_in.get(f"/channels/{seeded.channel_id}?before=x").status_code == 400
    assert logged_in.get("/channels/no-such-channel").status_code == 404


def test_channels_by_state_show_participants_and_turns(logged_in: TestClient, seeded: Seeded) -> None:
    opened = logged_in.get("/channels?state=opened&type=conversation").text
    assert seeded.channel_id in opened and "writer, reader" in opened
    assert seeded.channel_id not in logged_in.get("/channels?state=closed").text
    assert logged_in.get("/channels?state=bogus").status_code == 400


def test_untrusted_text_is_escaped(logged_in: TestClient, seeded: Seeded) -> None:
    html = logged_in.get(f"/channels/{seeded.channel_id}?before={seeded.last_seq - 5}").text
    assert "&lt;script&gt;document.title=&#39;owned&#39;&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script>document.title" not in html and "<img src=x" not in html


def test_the_audit_page_shows_the_newest_records(logged_in: TestClient, seeded: Seeded) -> None:
    html = logged_in.get("/audit?kind=agent_registered").text
    assert '"name": "reader"' in html.replace("&#34;", '"') and "data-live-url" in html
    first = logged_in.get("/audit?after=0&kind=agent_registered").text
    assert '"name": "agent-00"' in first.replace("&#34;", '"') and "data-live-url" not in first
    assert len(re.findall(r'<tr class="audit"', first)) == PAGE


# -- live streams (the real `agentnet console` process) --------------------------------------------


@pytest.fixture(scope="module")
def console(hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    """``agentnet console`` against the module's hub."""
    process = start_console(hub.target, "--list-refresh", "0.2", cwd=tmp_path_factory.mktemp("console"))
    try:
        yield process
    finally:
        assert process.stop() == 0, "".join(process.output)


def test_the_channel_stream_sends_each_envelope_as_it_is_committed(
    console: ConsoleProcess, hub: Hub, loop_thread: LoopThread
) -> None:
    writer = loop_thread.run(register(hub.target, "live-writer"))
    reader = loop_thread.run(register(hub.target, "live-reader"))
    loop_thread.run(writer.connect())
    loop_thread.run(reader.connect())
    try:
        channel_id = loop_thread.run(open_channel(writer, "conversation", [reader]))
        with httpx.Client(base_url=console.url, timeout=30, follow_redirects=False) as http:
            assert login(http, hub.token).status_code == 303
            page = http.get(f"/channels/{channel_id}").text
            live_url = re.search(r'data-live-url="([^"]+)"', page)
            assert live_url
            with http.stream("GET", live_url.group(1).replace("&amp;", "&")) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                loop_thread.run(writer.say(channel_id, "<b>live</b> hello"))  # committed after the page was read
                rows: list[str] = []
                for event, data in server_sent_events(stream):
                    if event == "row":
                        rows.append(data["html"])
                    elif event == "replace" and rows:
                        assert "whose turn" in data["html"] and ">4<" in data["html"]  # last seq
                        break
        assert len(rows) == 1 and "&lt;b&gt;live&lt;/b&gt; hello" in rows[0] and "<b>live" not in rows[0]
    finally:
        loop_thread.run(writer.close())
        loop_thread.run(reader.close())


def test_the_list_pages_follow_the_hub_live(console: ConsoleProcess, hub: Hub, loop_thread: LoopThread) -> None:
    """An open Agents or Tasks page gets its rows again when the hub's list changed: a new identity,
    a task started after the page was read."""
    with httpx.Client(base_url=console.url, timeout=30, follow_redirects=False) as http:
        assert login(http, hub.token).status_code == 303
        for path, change, shows in [
            ("/agents", lambda: register(hub.target, "aaa-live-newcomer"), "aaa-live-newcomer"),
            ("/tasks", lambda: _start_task(hub.target, "a task started while watching"), "a task started while"),
        ]:
            page = http.get(path).text
            live_url = re.search(r'<tbody id="list-rows" data-live-url="([^"]+)"', page)
            assert live_url, path
            assert shows not in page
            with http.stream("GET", live_url.group(1).replace("&amp;", "&")) as stream:
                assert stream.status_code == 200
                events = server_sent_events(stream)  # the page is current: nothing is sent until the list changes
                loop_thread.run(change())
                for event, data in events:
                    assert (event, data["id"]) == ("replace", "list-rows"), (event, data)
                    if shows in data["html"]:
                        break
        assert http.get("/live/nothing").status_code == 400


async def _start_task(target: str, title: str) -> None:
    owner = await register(target, f"owner-{len(title)}")
    await owner.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title=title))


def test_a_live_stream_stops_at_logout(console: ConsoleProcess, hub: Hub, loop_thread: LoopThread) -> None:
    # A record of its own for "the audit log so far" (the module's hub may have none yet: this test
    # can be the first of the file a worker runs).
    registered = loop_thread.run(register(hub.target, "logout-watcher"))
    loop_thread.run(registered.channel.close())
    with httpx.Client(base_url=console.url, timeout=30, follow_redirects=False) as http:
        assert login(http, hub.token).status_code == 303
        csrf = re.search(r'name="csrf" value="([^"]+)"', http.get("/tasks").text)
        assert csrf
        with http.stream("GET", "/audit/live?after=0") as stream:
            events = server_sent_events(stream)
            assert next(events)[0] == "row"  # the audit log so far
            with httpx.Client(base_url=console.url, cookies=http.cookies, timeout=30) as other_tab:
                assert other_tab.post("/logout", data={"csrf": csrf.group(1)}).status_code == 303
            ends = [data for event, data in events if event == "end"]
        assert ends == [{"message": "logged out"}]
        assert http.get("/audit/live").status_code == 401


def test_the_console_refuses_a_non_loopback_address(hub: Hub, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not a loopback address"):
        start_console(hub.target, "--host", "0.0.0.0", cwd=tmp_path, timeout=20)


def test_every_option_the_operations_doc_lists_is_a_console_option() -> None:
    from typer.testing import CliRunner

    from agentsdk.cli.app import app
    from tests.procs import ROOT

    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = doc.split("## The web console", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(--[a-z-]+)` \| `(AGENTNET_CONSOLE_[A-Z_]+)`", section, re.MULTILINE))
    assert len(documented) == 10
    help_text = CliRunner().invoke(app, ["console", "--help"], env={"COLUMNS": "300"}).stdout
    for flag, env in documented:
        assert flag in help_text and env in help_text, flag
