"""Tools: Python functions the model can call.

``@tool`` turns a sync or async function into a :class:`Tool`. The JSON schema the
model sees is built by pydantic from the signature: type hints (``Literal`` becomes
an ``enum``), defaults, and descriptions from ``Annotated[T, Field(description=...)]``
or the docstring's ``Args:`` section. The docstring's first part is the tool's
description.

Parameters annotated ``Annotated[T, Inject(KEY)]`` are *injected*: they never appear
in the schema and are looked up in the dependencies mapping (keys may be strings or
types) when the tool runs. A missing dependency raises :class:`MissingDependencyError`
(a programming error, not something the model can fix), unless the parameter has a
default.

:meth:`Tool.invoke` validates the model's arguments; bad arguments and exceptions the
tool raises become an error :class:`ToolOutput` the model sees, not a crash.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

__all__ = [
    "Inject",
    "MissingDependencyError",
    "Tool",
    "ToolLike",
    "ToolOutput",
    "as_tool",
    "render_result",
    "tool",
]

ToolFunction = Callable[..., Any]
"""A sync or async function usable as a tool."""


@dataclass(frozen=True, slots=True)
class Inject:
    """Marks a tool parameter as injected: ``Annotated[T, Inject(KEY)]``.

    The value comes from the dependencies mapping under ``key`` at call time; the
    parameter is hidden from the model.
    """

    key: Hashable
    """The dependencies key (a string or a type, e.g. ``KnowledgeStore``)."""


class MissingDependencyError(LookupError):
    """A tool needs an injected dependency that is not in the dependencies mapping."""

    def __init__(self, tool_name: str, parameter: str, key: Hashable) -> None:
        self.tool_name = tool_name
        self.parameter = parameter
        self.key = key
        super().__init__(
            f"tool {tool_name!r} needs dependency {_key_name(key)} for parameter {parameter!r}, "
            "but it is not in the dependencies; pass it via Agent(dependencies=...) or ask(dependencies=...)"
        )


def _key_name(key: Hashable) -> str:
    if isinstance(key, type):
        return f"{key.__module__}.{key.__qualname__}"
    return repr(key)


@dataclass(slots=True)
class ToolOutput:
    """The outcome of one tool call, as the model will see it."""

    content: str
    """The result as text (strings as-is, anything else as JSON)."""
    is_error: bool = False
    """True when the call failed."""
    value: Any = None
    """The raw return value (``None`` on error)."""


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_SECTION_HEADER = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    in_other_section = False
    current: str | None = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, in_other_section, current = True, False, None
            continue
        if _SECTION_HEADER.match(line) and not line.startswith(" "):
            in_args, in_other_section, current = False, True, None
            continue
        if in_args:
            match = _ARG_LINE.match(line)
            if match and (len(line) - len(line.lstrip())) <= 4:
                current = match.group(1)
                params[current] = match.group(3).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
            continue
        if not in_other_section:
            description.append(line)
    return "\n".join(description).strip(), params


def _strip_titles(schema: Any) -> Any:
    """Remove pydantic's auto-generated ``title`` keys (noise for the model)."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _split_annotated(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(hint) is typing.Annotated:
        base, *meta = typing.get_args(hint)
        return base, tuple(meta)
    return hint, ()


class Tool:
    """A function the model can call, with its JSON schema."""

    name: str
    """Name the model calls it by."""
    description: str
    """What it does (shown to the model)."""
    func: ToolFunction
    """The wrapped function."""
    injected: dict[str, Hashable]
    """Injected parameters: parameter name → dependencies key."""

    def __init__(self, func: ToolFunction, *, name: str | None = None, description: str | None = None) -> None:
        if not callable(func):
            raise TypeError(f"a tool must be callable, got {func!r}")
        tool_name = name or getattr(func, "__name__", None)
        if not tool_name or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool_name):
            raise ValueError(f"tool name {tool_name!r} must be 1-64 characters of letters, digits, '_' or '-'")
        doc_description, doc_params = _parse_docstring(inspect.getdoc(func))
        self.func = func
        self.name = tool_name
        self.description = description if description is not None else doc_description
        self.injected = {}
        self._positional: list[str] = []
        self._defaults: dict[str, Any] = {}
        self._fields: dict[str, str] = {}  # model field name → parameter name

        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception:  # unresolvable forward references: fall back to the raw annotations
            hints = dict(getattr(func, "__annotations__", {}))
        fields: dict[str, Any] = {}
        for index, (pname, param) in enumerate(inspect.signature(func).parameters.items()):
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name!r}: *args/**kwargs parameters are not supported ({pname!r})")
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                self._positional.append(pname)
            hint = hints.get(pname, Any)
            _, meta = _split_annotated(hint)
            inject = next((m for m in meta if isinstance(m, Inject)), None)
            if inject is not None:
                self.injected[pname] = inject.key
                if param.default is not inspect.Parameter.empty:
                    self._defaults[pname] = param.default
                continue
            has_description = any(isinstance(m, FieldInfo) and m.description for m in meta)
            field_kwargs: dict[str, Any] = {"alias": pname}
            if not has_description and pname in doc_params:
                field_kwargs["description"] = doc_params[pname]
            default = ... if param.default is inspect.Parameter.empty else param.default
            field_name = f"p{index}"
            self._fields[field_name] = pname
            fields[field_name] = (hint, Field(default, **field_kwargs))
        self.args_model: type[BaseModel] = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=True),
            **fields,
        )
        """Pydantic model validating the model-supplied arguments."""
        self.parameters: dict[str, Any] = _strip_titles(self.args_model.model_json_schema(by_alias=True))
        """JSON schema of the arguments (injected parameters excluded)."""
        self.parameters.setdefault("properties", {})

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (no validation, no injection)."""
        return self.func(*args, **kwargs)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool definition ``{"type": "function", "function": {...}}``."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}

    async def invoke(self, arguments: Mapping[str, Any], dependencies: Mapping[Any, Any] | None = None) -> ToolOutput:
        """Validate ``arguments``, resolve injected parameters and run the tool.

        Returns an error :class:`ToolOutput` for invalid arguments or when the tool
        raises; raises :class:`MissingDependencyError` when an injected dependency
        without a default is missing.
        """
        deps: Mapping[Any, Any] = dependencies or {}
        values: dict[str, Any] = {}
        for pname, key in self.injected.items():
            if key in deps:
                values[pname] = deps[key]
            elif pname in self._defaults:
                values[pname] = self._defaults[pname]
            else:
                raise MissingDependencyError(self.name, pname, key)
        try:
            model = self.args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            return ToolOutput(content=self._describe_validation_error(exc), is_error=True)
        for field_name, pname in self._fields.items():
            values[pname] = getattr(model, field_name)
        args = [values.pop(p) for p in self._positional]
        try:
            result = self.func(*args, **values)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            text = str(exc)
            return ToolOutput(
                content=f"Error: tool {self.name!r} raised {type(exc).__name__}" + (f": {text}" if text else ""),
                is_error=True,
            )
        if isinstance(result, ToolOutput):
            return result
        return ToolOutput(content=render_result(result), value=result)

    def _describe_validation_error(self, exc: ValidationError) -> str:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
            problems.append(f"{where}: {error['msg']}")
        expected = ", ".join(self.parameters.get("properties", {})) or "no arguments"
        return f"Error: invalid arguments for tool {self.name!r}: " + "; ".join(problems) + f" (expected: {expected})"


def render_result(value: Any) -> str:
    """Render a tool's return value as text: strings as-is, everything else as JSON."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()


ToolLike = Tool | ToolFunction
"""A :class:`Tool` or a plain callable (wrapped with ``Tool(func)``)."""


def as_tool(obj: ToolLike) -> Tool:
    """Return ``obj`` if it is a :class:`Tool`, else wrap the callable."""
    if isinstance(obj, Tool):
        return obj
    return Tool(obj)


@overload
def tool(func: ToolFunction, /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[ToolFunction], Tool]: ...


def tool(
    func: ToolFunction | None = None, /, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a function into a :class:`Tool`; use bare (``@tool``) or with options (``@tool(name=...)``)."""
    if func is not None:
        return Tool(func, name=name, description=description)

    def decorate(f: ToolFunction) -> Tool:
        return Tool(f, name=name, description=description)

    return decorate
