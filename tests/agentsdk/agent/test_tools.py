"""@tool: schemas from type hints and docstrings, Inject, validation, invocation."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from agentsdk.tools import Inject, MissingDependencyError, Tool, ToolOutput, as_tool, tool


class Database:
    """A stand-in dependency keyed by its type."""

    def __init__(self, rows: dict[str, int]) -> None:
        self.rows = rows


class Filters(BaseModel):
    """Nested structured argument."""

    min_score: int = 0


@tool
async def search(
    query: Annotated[str, Field(description="What to look for.")],
    limit: int = 5,
    tags: list[str] | None = None,
    mode: Literal["fast", "deep"] = "fast",
    filters: Filters | None = None,
    *,
    db: Annotated[Database, Inject(Database)],
    user: Annotated[str, Inject("user")] = "anonymous",
) -> dict[str, object]:
    """Search the knowledge base.

    Longer explanation for the model.

    Args:
        query: overridden by the Field description.
        limit: Maximum number of hits.
        mode: How hard to try,
            continued on a second line.

    Returns:
        The hits.
    """
    hits = [k for k in db.rows if query in k][:limit]
    return {"hits": hits, "mode": mode, "tags": tags, "user": user, "min": filters.min_score if filters else None}


def test_schema_from_type_hints_and_docstring() -> None:
    schema = search.schema()
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the knowledge base.\n\nLonger explanation for the model."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert list(props) == ["query", "limit", "tags", "mode", "filters"]  # injected ones hidden
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {"type": "integer", "default": 5, "description": "Maximum number of hits."}
    assert props["tags"]["anyOf"] == [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    assert props["tags"]["default"] is None
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert props["mode"]["description"] == "How hard to try, continued on a second line."
    assert "title" not in params and "title" not in props["query"]
    assert "Filters" in params["$defs"]


def test_injected_parameters_are_hidden_and_resolved() -> None:
    assert search.injected == {"db": Database, "user": "user"}
    assert "db" not in str(search.schema()) and "Inject" not in str(search.schema())


async def test_invoke_validates_coerces_and_injects() -> None:
    db = Database({"apple": 1, "apricot": 2, "banana": 3})
    out = await search.invoke({"query": "ap", "limit": "1", "filters": {"min_score": 3}}, {Database: db, "user": "ann"})
    assert out == ToolOutput(
        content='{"hits":["apple"],"mode":"fast","tags":null,"user":"ann","min":3}',
        value={"hits": ["apple"], "mode": "fast", "tags": None, "user": "ann", "min": 3},
    )
    # An injected parameter with a default falls back to it.
    out = await search.invoke({"query": "an"}, {Database: db})
    assert out.value is not None and out.value["user"] == "anonymous"


async def test_missing_dependency_names_the_key() -> None:
    @tool
    def lookup(key: str, store: Annotated[dict[str, str], Inject("kv_store")]) -> str:
        return store[key]

    with pytest.raises(MissingDependencyError, match=r"'kv_store'.*'store'") as info:
        await lookup.invoke({"key": "a"}, {})
    assert info.value.key == "kv_store" and info.value.tool_name == "lookup"

    with pytest.raises(MissingDependencyError, match=r"test_tools\.Database"):
        await search.invoke({"query": "x"}, {})


async def test_bad_arguments_become_an_error_output() -> None:
    out = await search.invoke({"limit": "many", "mode": "slow", "extra": 1}, {Database: Database({})})
    assert out.is_error and out.value is None
    assert "invalid arguments for tool 'search'" in out.content
    for fragment in ("query: Field required", "limit:", "mode:", "extra: Extra inputs are not permitted"):
        assert fragment in out.content
    assert "expected: query, limit, tags, mode, filters" in out.content


async def test_tool_exception_becomes_an_error_output() -> None:
    @tool
    async def explode(reason: str) -> str:
        raise RuntimeError(reason)

    out = await explode.invoke({"reason": "kaboom"})
    assert out.is_error
    assert out.content == "Error: tool 'explode' raised RuntimeError: kaboom"


async def test_sync_functions_names_descriptions_and_direct_calls() -> None:
    @tool(name="add_numbers", description="Add two integers.")
    def add(a: int, b: int = 1) -> int:
        """Ignored docstring."""
        return a + b

    assert add.name == "add_numbers" and add.description == "Add two integers."
    assert add(2, 3) == 5  # still callable as the plain function
    assert (await add.invoke({"a": 2})).content == "3"

    def no_hints(x, y=2):  # type: ignore[no-untyped-def]
        return [x, y]

    wrapped = as_tool(no_hints)
    assert isinstance(wrapped, Tool) and as_tool(wrapped) is wrapped
    assert wrapped.parameters["required"] == ["x"]
    assert wrapped.description == ""
    assert (await wrapped.invoke({"x": "a"})).content == '["a",2]'


async def test_tools_may_return_a_tool_output_and_none() -> None:
    @tool
    def custom() -> ToolOutput:
        return ToolOutput("handled", is_error=True)

    @tool
    def nothing() -> None:
        return None

    assert await custom.invoke({}) == ToolOutput("handled", is_error=True)
    assert (await nothing.invoke({})).content == "null"
    assert nothing.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_unsupported_signatures_are_rejected() -> None:
    def star(*args: int) -> None:
        return None

    with pytest.raises(TypeError, match=r"\*args"):
        Tool(star)
    with pytest.raises(ValueError, match="tool name"):
        Tool(lambda: None, name="has space")
