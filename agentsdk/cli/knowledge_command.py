"""The ``agentnet knowledge`` commands: ``ls``, ``cat``, ``put``, ``rm`` and ``watch`` on a
knowledge-service namespace."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from agentnet.v1 import knowledge_pb2
from rich.text import Text

from agentsdk.cli import render
from agentsdk.cli.common import (
    JsonOption,
    T,
    _err,
    _out,
    _run,
    _show,
    _show_line,
    knowledge_app,
)
from agentsdk.cli.settings import Settings, SettingsError
from agentsdk.knowledge.rpc import KnowledgeRpc
from agentsdk.tls import open_channel

# -- knowledge ------------------------------------------------------------------------------


async def _with_knowledge(settings: Settings, work: Callable[[KnowledgeRpc], Awaitable[T]]) -> T:
    channel = open_channel(settings.knowledge, settings.tls_setting())
    try:
        return await work(KnowledgeRpc(channel, settings.knowledge_token(), timeout=settings.timeout))
    finally:
        await channel.close()


@knowledge_app.command("ls")
def knowledge_ls(
    ctx: typer.Context, path: Annotated[str, typer.Argument(help="A directory.")] = "", json_: JsonOption = False
) -> None:
    """List a directory."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.ListRequest(namespace=settings.namespace, path=path)
        response = await _with_knowledge(settings, lambda rpc: rpc.list(request))
        _show(json_, list(response.entries), lambda: Text("\n".join(response.entries)))

    _run(ctx, work, "knowledge")


@knowledge_app.command("cat")
def knowledge_cat(ctx: typer.Context, path: Annotated[str, typer.Argument()], json_: JsonOption = False) -> None:
    """Print a file."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.ReadRequest(namespace=settings.namespace, path=path)
        response = await _with_knowledge(settings, lambda rpc: rpc.read(request))
        if json_:
            _show(json_, {"path": path, **render.as_json(response)}, Text)
            return
        sys.stdout.write(response.content)  # the file as it is, not drawn
        sys.stdout.flush()

    _run(ctx, work, "knowledge")


@knowledge_app.command("put")
def knowledge_put(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument()],
    source: Annotated[Path | None, typer.Argument(help="A local file (default: read stdin).")] = None,
    json_: JsonOption = False,
) -> None:
    """Write a file from a local file or stdin."""

    async def work(settings: Settings) -> None:
        try:
            content = source.read_text(encoding="utf-8") if source is not None else sys.stdin.read()
        except (OSError, UnicodeDecodeError) as err:
            raise SettingsError(
                f"cannot read {source or 'stdin'}: {getattr(err, 'strerror', None) or err}. Give a readable UTF-8 "
                "text file, or pipe the content on stdin."
            ) from None
        request = knowledge_pb2.WriteRequest(namespace=settings.namespace, path=path, content=content)
        response = await _with_knowledge(settings, lambda rpc: rpc.write(request))
        wrote = Text(f"wrote {path} ({response.size} bytes, version {response.version})")
        _show(json_, {"path": path, **render.as_json(response)}, lambda: wrote)

    _run(ctx, work, "knowledge")


@knowledge_app.command("rm")
def knowledge_rm(ctx: typer.Context, path: Annotated[str, typer.Argument()], json_: JsonOption = False) -> None:
    """Delete a file."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.DeleteRequest(namespace=settings.namespace, path=path)
        await _with_knowledge(settings, lambda rpc: rpc.delete(request))
        _show(json_, {"path": path, "deleted": True}, lambda: Text(f"deleted {path}"))

    _run(ctx, work, "knowledge")


def _change_line(change: knowledge_pb2.ChangeEvent) -> Text:
    kind = render.enum_name(knowledge_pb2.ChangeKind, change.kind, "CHANGE_KIND_")
    return Text(f"{kind:<8} {change.path}  v{change.version} {change.size} bytes")


@knowledge_app.command("watch")
def knowledge_watch(
    ctx: typer.Context,
    prefix: Annotated[str, typer.Argument(help='A path prefix ("" = the whole namespace).')] = "",
    json_: JsonOption = False,
) -> None:
    """Print each change at or under a path as it happens (Ctrl-C stops)."""

    async def work(settings: Settings) -> None:
        async def watch(rpc: KnowledgeRpc) -> None:
            stream = rpc.watch(knowledge_pb2.WatchRequest(namespace=settings.namespace, prefix=prefix))
            out = _out()
            try:
                while (frame := await stream.read()) is not None:
                    if frame.WhichOneof("frame") == "subscribed":
                        _err().print(f"watching {prefix or '/'} in {settings.namespace}", markup=False)
                        continue
                    _show_line(out, json_, frame.change, partial(_change_line, frame.change))
            finally:
                stream.cancel()

        await _with_knowledge(settings, watch)

    _run(ctx, work, "knowledge")
