"""The console in a real browser (headless Debian chromium, selenium), against a real hub and the
real ``agentnet console`` process: the login is enforced; a message posted through the SDK appears
on the channel page without a reload; untrusted text is shown as text; 1,000 agents and a channel of
10,000 envelopes are shown a page at a time with working navigation. Screenshots of the main views
are saved (to ``$AGENTNET_CONSOLE_SCREENSHOTS`` when set — that is how docs/images/ is made — else
to a temporary directory)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import hub_pb2, task_pb2
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from agentsdk.network import HubClient, Passport, Resume
from agentsdk.network.clients import HumanClient
from tests.agentsdk.console.conftest import ConsoleProcess, Hub, LoopThread
from tests.hubsvc.harness import EV_TEXT, make_envelope, open_channel, register
from tests.hubsvc.test_a2a import a2a_agent, answering, invoke

WAIT = 15.0
"""Seconds the browser may take to show what the test waits for."""
SCRIPT_TEXT = "<script>window.__owned = 1</script><b>not bold</b>"


@dataclass
class Demo:
    """The demo network of the screenshots: people and agents, a conversation, a task, A2A calls."""

    connection: AsyncExitStack
    alice: HumanClient
    bob: HumanClient
    channel_id: str


async def _demo(target: str) -> Demo:
    for name, skills, about in [
        ("planner", ["planning", "delegation"], "Breaks a goal into tasks"),
        ("researcher", ["search", "summarise"], "Finds and condenses sources"),
        ("reviewer", ["review"], "Checks drafts before they ship"),
    ]:
        await register(target, name, capabilities=skills, description=about)
    connection = AsyncExitStack()
    client = await connection.enter_async_context(HubClient.connect(target))
    alice = await client.register_human(
        Passport(name="alice", kind="human", description="Release manager"), resume=Resume(claimed_capabilities=["ops"])
    )
    bob = await client.register_human(Passport(name="bob", kind="human", description="Writes the release notes"))
    channel = await alice.open(type="conversation", target="bob", intent="release notes for 2.4")
    await alice.send(channel.channel_id, "Can you draft the release notes for 2.4?")
    await bob.send(channel.channel_id, "On it: starting from the changelog.")
    await alice.rpc.report_task(
        hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="draft the 2.4 release notes")
    )
    caller = await a2a_agent(target, "coordinator")
    callee = await a2a_agent(target, "summariser")
    async with answering(callee, lambda _dispatch: ("summary ready", None)):
        for question in ("summarise the changelog", "list the breaking changes"):
            await caller.rpc("InvokeAgent", invoke(callee, question, root_session_id="release-2.4"))
    for p in (caller, callee):
        await p.close()
    return Demo(connection, alice, bob, channel.channel_id)


@pytest.fixture(scope="module")
def demo(hub: Hub, loop_thread: LoopThread) -> Iterator[Demo]:
    """The demo network (alice and bob stay connected through the SDK)."""
    made = loop_thread.run(_demo(hub.target))
    try:
        yield made
    finally:
        loop_thread.run(made.connection.aclose())


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go."""
    target = os.environ.get("AGENTNET_CONSOLE_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wait(browser: WebDriver, what: str, condition: Any) -> Any:
    return WebDriverWait(browser, WAIT).until(lambda d: condition(d), message=f"not shown within {WAIT} s: {what}")


def _rows(browser: WebDriver, css: str) -> list[Any]:
    return list(browser.find_elements(By.CSS_SELECTOR, css))


def _screenshot(browser: WebDriver, shots: Path, name: str) -> None:
    path = shots / f"console-{name}.png"
    assert browser.save_screenshot(str(path)), path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _log_in(browser: WebDriver, console: ConsoleProcess, token: str, path: str = "/") -> None:
    browser.get(console.url + path)
    if "/login" in browser.current_url:
        browser.find_element(By.ID, "token").send_keys(token)
        browser.find_element(By.ID, "login").click()
    _wait(browser, "the page after login", lambda d: "/login" not in d.current_url)


def _fetch_status(browser: WebDriver, path: str) -> int:
    """The HTTP status of ``path`` fetched by the page itself (with the browser's cookies)."""
    script = "const done = arguments[arguments.length - 1]; fetch(arguments[0]).then(r => done(r.status));"
    return int(browser.execute_async_script(script, path))


def test_the_login_is_enforced(browser: WebDriver, console: ConsoleProcess, hub: Hub, demo: Demo) -> None:
    browser.delete_all_cookies()
    browser.get(console.url + "/agents")
    assert "/login" in browser.current_url
    assert browser.find_elements(By.ID, "token") and not _rows(browser, "tr.agent")
    assert _fetch_status(browser, f"/channels/{demo.channel_id}/live") == 401
    assert _fetch_status(browser, "/audit/live") == 401
    browser.find_element(By.ID, "token").send_keys("not-the-operator-token")
    browser.find_element(By.ID, "login").click()
    error = _wait(browser, "the login error", lambda d: d.find_elements(By.ID, "login-error"))
    assert "does not accept this token" in error[0].text
    assert "/login" in browser.current_url and not _rows(browser, "tr.agent")

    browser.find_element(By.ID, "token").send_keys(hub.token)
    browser.find_element(By.ID, "login").click()
    _wait(browser, "the agents page", lambda d: d.current_url.endswith("/agents") and _rows(d, "tr.agent"))
    assert not [c for c in browser.get_cookies() if hub.token in c["value"]]
    session = [c for c in browser.get_cookies() if c["name"] == "agentnet_console"]
    assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict"
    assert browser.execute_script("return document.cookie") == ""  # HttpOnly: out of the page's reach


def test_main_views_and_their_screenshots(
    browser: WebDriver, console: ConsoleProcess, hub: Hub, demo: Demo, shots: Path
) -> None:
    _log_in(browser, console, hub.token, "/agents")
    names = [r.find_element(By.CSS_SELECTOR, "td a").text for r in _rows(browser, "tr.agent")]
    assert {"alice", "bob", "planner", "researcher", "coordinator", "summariser"} <= set(names)
    assert "online" in browser.find_element(By.ID, "agents").text  # alice and bob are connected
    _screenshot(browser, shots, "agents")

    browser.get(console.url + "/channels?state=opened")
    row = _wait(browser, "the conversation", lambda d: [r for r in _rows(d, "tr.channel") if demo.channel_id in r.text])
    assert "alice, bob" in row[0].text and "anyone" in row[0].text
    assert not [r for r in _rows(browser, "tr.channel") if "consulting" in r.text]
    browser.get(console.url + "/channels")
    states = [r.find_element(By.CSS_SELECTOR, ".state").text for r in _rows(browser, "tr.channel")]
    assert sorted(states) == ["closed", "closed", "opened"]  # the two A2A calls' consulting channels
    _screenshot(browser, shots, "channels")

    browser.get(console.url + "/tasks")
    assert "draft the 2.4 release notes" in browser.find_element(By.ID, "tasks").text

    browser.get(console.url + "/audit")
    _wait(browser, "the audit stream", lambda d: d.find_element(By.ID, "live-status").text == "live")
    assert "agent_registered" in browser.find_element(By.ID, "audit").text
    _screenshot(browser, shots, "audit")

    browser.get(console.url + "/calls")
    recent = _rows(browser, "tr.recent-call")
    assert len(recent) == 2 and all("coordinator → summariser" in r.text and "completed" in r.text for r in recent)
    recent[0].find_element(By.CSS_SELECTOR, "a").click()
    _wait(browser, "one call's tree", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#call-tree li.call")) == 1)

    browser.get(console.url + "/calls?id=release-2.4")
    tree = browser.find_element(By.ID, "call-tree")
    calls = tree.find_elements(By.CSS_SELECTOR, "li.call")
    assert len(calls) == 2 and all("coordinator → summariser" in c.text and "completed" in c.text for c in calls)
    _screenshot(browser, shots, "calls")


def test_a_message_posted_through_the_sdk_appears_without_a_reload(
    browser: WebDriver, console: ConsoleProcess, hub: Hub, demo: Demo, loop_thread: LoopThread, shots: Path
) -> None:
    _log_in(browser, console, hub.token, f"/channels/{demo.channel_id}")
    _wait(browser, "the live stream", lambda d: d.find_element(By.ID, "live-status").text == "live")
    before = len(_rows(browser, "#envelopes tr"))
    browser.execute_script("window.__sameDocument = true")  # gone if the page reloads

    loop_thread.run(demo.alice.send(demo.channel_id, "Thanks! The changelog is in docs/changes.md."))
    _wait(browser, "the SDK's message", lambda d: "docs/changes.md" in d.find_element(By.ID, "envelopes").text)
    loop_thread.run(demo.bob.send(demo.channel_id, SCRIPT_TEXT))
    cells = _wait(
        browser,
        "the <script> text, as text",
        lambda d: [c for c in _rows(d, "#envelopes td.body") if "__owned" in c.text],
    )
    assert cells[0].text == SCRIPT_TEXT  # shown literally: nothing parsed as markup
    assert browser.execute_script("return window.__owned") is None  # and nothing ran
    assert not browser.find_elements(By.CSS_SELECTOR, "#envelopes b")
    assert browser.execute_script("return window.__sameDocument") is True
    assert len(_rows(browser, "#envelopes tr")) == before + 2
    assert browser.find_element(By.ID, "last-seq").text == str(before + 2)  # the header followed too
    # and so did the envelope counts over the rows (they said "1–{before} of {before}" until a reload)
    _wait(
        browser,
        "the envelope counts",
        lambda d: d.find_element(By.ID, "envelope-range").text == f"1–{before + 2} of {before + 2}",
    )
    _screenshot(browser, shots, "channel")


async def _many_agents(target: str, count: int) -> None:
    gate = asyncio.Semaphore(16)
    async with grpc.aio.insecure_channel(target) as channel:  # one connection for all of them

        async def one(i: int) -> None:
            async with gate:
                participant = await register(target, f"load-{i:04d}", capabilities=["bulk"], via=channel)
                await participant.close()

        await asyncio.gather(*(one(i) for i in range(count)))


def _texts(browser: WebDriver, css: str) -> list[str]:
    """The rendered text of every element matching ``css``, read in one round trip to the browser
    (a page of a hundred rows read element by element costs two hundred WebDriver calls)."""
    texts = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.innerText.trim());", css
    )
    assert isinstance(texts, list)
    return [str(t) for t in texts]


def _attributes(browser: WebDriver, css: str, name: str) -> list[str]:
    """Attribute ``name`` of every element matching ``css``, read in one round trip to the browser."""
    values = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.getAttribute(arguments[1]));", css, name
    )
    assert isinstance(values, list)
    return [str(v) for v in values]


def test_a_thousand_agents_are_shown_a_page_at_a_time(
    browser: WebDriver, console: ConsoleProcess, hub: Hub, demo: Demo, loop_thread: LoopThread
) -> None:
    loop_thread.run(_many_agents(hub.target, 1000))
    _log_in(browser, console, hub.token, "/agents")
    seen: list[str] = []
    pages = 0
    while True:
        names = _texts(browser, "tr.agent td a")
        assert 0 < len(names) <= 100 and len(names) == len(_rows(browser, "tr.agent"))
        seen.extend(names)
        pages += 1
        following = browser.find_elements(By.ID, "next-page")
        if not following:
            break
        assert len(names) == 100
        first = names[0]
        following[0].click()
        _wait(browser, "the next page", lambda d, first=first: _texts(d, "tr.agent td a")[:1] not in ([], [first]))
    assert pages == 11 and len(seen) == len(set(seen)) and len([s for s in seen if s.startswith("load-")]) == 1000
    assert seen == sorted(seen)
    browser.find_element(By.ID, "first-page").click()
    _wait(browser, "the first page again", lambda d: _rows(d, "tr.agent")[0].text.startswith("alice"))

    browser.get(console.url + "/audit?kind=agent_registered")  # the newest records: the last registrations
    _wait(browser, "the audit stream", lambda d: d.find_element(By.ID, "live-status").text == "live")
    audit = _rows(browser, "tr.audit")
    assert len(audit) == 100 and int(audit[-1].get_attribute("data-id")) > 1000
    assert all("load-" in text for text in _texts(browser, "tr.audit"))


async def _long_channel(target: str, count: int) -> tuple[str, Any, Any]:
    writer = await register(target, "bulk-writer")
    reader = await register(target, "bulk-reader")
    await writer.connect()
    await reader.connect()
    channel_id = await open_channel(writer, "conversation", [reader])
    for start in range(0, count, 250):
        batch = [make_envelope(channel_id, EV_TEXT, {"text": f"bulk {i}"}) for i in range(start, start + 250)]
        results = await writer.post_batch(batch)
        assert all(r.WhichOneof("result") == "envelope" for r in results)
    return channel_id, writer, reader


def test_a_channel_of_ten_thousand_envelopes_is_shown_a_page_at_a_time(
    browser: WebDriver, console: ConsoleProcess, hub: Hub, loop_thread: LoopThread
) -> None:
    channel_id, writer, reader = loop_thread.run(_long_channel(hub.target, 10_000))
    try:
        _log_in(browser, console, hub.token, f"/channels/{channel_id}")
        _wait(browser, "the live stream", lambda d: d.find_element(By.ID, "live-status").text == "live")
        rows = _rows(browser, "#envelopes tr")
        last = int(browser.find_element(By.ID, "last-seq").text)
        assert last >= 10_000
        assert [int(seq) for seq in _attributes(browser, "#envelopes tr", "data-seq")] == list(
            range(last - 99, last + 1)
        )
        assert rows[-1].text.endswith("bulk 9999")

        browser.find_element(By.ID, "older-page").click()
        _wait(browser, "the older page", lambda d: "?before=" in d.current_url)
        older = [int(seq) for seq in _attributes(browser, "#envelopes tr", "data-seq")]
        assert older == list(range(last - 199, last - 99))
        assert not browser.find_elements(By.ID, "live-status")  # an older page is not live

        browser.find_element(By.ID, "newest-page").click()
        _wait(browser, "the live stream again", lambda d: d.find_element(By.ID, "live-status").text == "live")
        loop_thread.run(writer.say(channel_id, "after ten thousand"))
        _wait(browser, "the new envelope", lambda d: "after ten thousand" in d.find_element(By.ID, "envelopes").text)
        assert len(_rows(browser, "#envelopes tr")) == 101
    finally:
        loop_thread.run(writer.close())
        loop_thread.run(reader.close())
