"""The ``agentnet`` commands for data over time: ``backup`` (a consistent copy of the hub's store) and
``export`` (one channel's envelopes as committed, in the archive format of :mod:`netkernel.archive`).
docs/operations.md "Data over time" shows both."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentsdk.cli import render
from agentsdk.cli.common import JsonOption, _err, _run, _show, app
from agentsdk.cli.settings import Settings
from agentsdk.operator import OperatorClient, OperatorOnly, write_backup
from netkernel.archive import ArchiveWriter, archive_name


def _operator(settings: Settings) -> OperatorClient:
    """The operator's client (these commands need the operator token)."""
    secret, as_agent = settings.secret()
    if as_agent:
        raise OperatorOnly("backup and export read the whole hub: use the operator token (--token-file)")
    return OperatorClient(settings.hub, secret, tls=settings.tls_setting(), timeout=settings.timeout)


def _refuse(message: str) -> typer.Exit:
    _err().print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(2)


@app.command()
def backup(
    ctx: typer.Context,
    out: Annotated[Path, typer.Argument(help="The new file to write the copy to (never overwritten).")],
    json_: JsonOption = False,
) -> None:
    """Write a consistent copy of the hub's SQLite store to OUT while the hub serves; serve it with
    `python -m hubsvc --db OUT`."""
    if out.exists():
        raise _refuse(f"{out} exists: name a new file (a backup never overwrites one)")

    async def work(settings: Settings) -> None:
        async with _operator(settings) as client:
            summary = await write_backup(client, out)
        rows = [
            ["file", str(out)],
            ["bytes", str(summary.size_bytes)],
            ["sha256", summary.sha256],
            ["taken at", f"{render.when(summary.taken_at)} UTC"],
            ["copy took", f"{summary.copy_seconds:.3f} s on the hub"],
        ]
        _show(json_, {**render.as_json(summary), "file": str(out)}, lambda: render.table("backup", ["", ""], rows))

    _run(ctx, work)


@app.command()
def export(
    ctx: typer.Context,
    channel: Annotated[str, typer.Argument(help="The channel id.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="The file to write (default: CHANNEL_ID.jsonl.gz here).")
    ] = None,
    json_: JsonOption = False,
) -> None:
    """Write a channel's envelopes as committed to a gzip-compressed JSON-lines archive (the format
    retention's --archive-dir writes; `python -m hubsvc.archive_import` reads it into a hub database)."""
    target = out if out is not None else Path(archive_name(channel))
    if target.exists():
        raise _refuse(f"{target} exists: name a new file with --out")

    async def work(settings: Settings) -> None:
        async with _operator(settings) as client:
            described = await client.describe_channel(channel)
            until = described.channel.last_seq  # what is committed now: a live channel's later posts are not
            with ArchiveWriter(target, described.channel) as writer:
                if until:
                    async for env in client.read_wal(channel, until_seq=until):
                        writer.add([env])
        rows = [["file", str(target)], ["envelopes", str(writer.count)], ["last seq", str(until)]]
        value = {"file": str(target), "channel_id": channel, "envelopes": writer.count, "last_seq": until}
        _show(json_, value, lambda: render.table("export", ["", ""], rows))

    _run(ctx, work)
