"""Use agentsdk tools with LangChain: convert them to ``StructuredTool`` objects.

Needs ``langchain-core`` (``pip install 'agent-network[langchain]'``). The converted
tools are async (``await tool.ainvoke({...})``, LangGraph's ``ToolNode``); injected
parameters need ``dependencies``, given once at conversion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agentsdk.tools import Tool, ToolLike, as_tool

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool


def to_langchain_tools(
    tools: Iterable[ToolLike], *, dependencies: Mapping[Any, Any] | None = None
) -> list[StructuredTool]:
    """LangChain ``StructuredTool`` versions of ``tools`` (same names, descriptions and JSON schemas).

    Raises ``ImportError`` with the install hint when langchain-core is missing.
    """
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("to_langchain_tools needs langchain-core: pip install 'agent-network[langchain]'") from exc
    return [_convert(StructuredTool, as_tool(t), dependencies or {}) for t in tools]


def _convert(structured: Any, tool: Tool, dependencies: Mapping[Any, Any]) -> StructuredTool:
    async def run(**arguments: Any) -> str:
        return (await tool.invoke(arguments, dependencies)).content

    converted: StructuredTool = structured.from_function(
        coroutine=run, name=tool.name, description=tool.description or tool.name, args_schema=tool.parameters
    )
    return converted
