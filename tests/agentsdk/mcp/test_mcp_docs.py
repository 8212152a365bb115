"""docs/mcp.md's configuration example builds what the doc says (its first example runs in
tests/system/test_docs.py)."""

from __future__ import annotations

from typing import Any

from tests.system.test_docs import python_blocks


def test_the_streamable_http_configuration_example_builds_the_server_it_describes() -> None:
    namespace: dict[str, Any] = {}
    exec(python_blocks("mcp.md")[1], namespace)
    search = namespace["search"]
    assert (search.name, search.url, search.timeout) == ("search", "http://127.0.0.1:8000/mcp", 20)
    assert search.headers == {"Authorization": "Bearer example-token"}
    assert search.allow == {"web_search", "fetch_page"}
    assert not search.running
