"""``python -m knowledgesvc``: run the knowledge service until SIGINT/SIGTERM."""

from __future__ import annotations

import os

from netkernel.grpc_env import GRPC_EXPERIMENTS

os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)  # before grpc is imported (netkernel/grpc_env.py)

import asyncio
import logging
import sys

from knowledgesvc.auth import TokensFileError, load_authority
from knowledgesvc.backend import open_backend
from knowledgesvc.config import KnowledgeConfig, parse_args
from knowledgesvc.server import start_knowledge
from netkernel.files import private_dir
from servicekit.runtime import PortUnavailable, configure_logging, serve_until_signal
from servicekit.tls import TlsConfigError
from servicekit.tracing import tracer_provider_from_env

log = logging.getLogger("agentnet.knowledge")


class StartupError(Exception):
    """The service cannot start with this configuration (the message says why)."""


async def run(config: KnowledgeConfig) -> None:
    """Serve the knowledge service with ``config`` until a stop signal arrives, then close the store."""
    private_dir(config.data_dir)
    try:
        tracer_provider = tracer_provider_from_env("agentnet-knowledge")
    except ValueError as exc:
        raise StartupError(str(exc)) from None
    try:
        authority = load_authority(config.tokens_file, config.data_dir)
    except TokensFileError as exc:
        raise StartupError(str(exc)) from None
    try:
        store = open_backend(config)
    except ImportError as exc:  # the disk backend without its optional dependency
        raise StartupError(str(exc)) from None
    try:
        try:
            await store.open()
        except Exception as exc:
            raise StartupError(f"cannot open the {config.backend} backend: {exc}") from exc
        log.info("knowledge backend: %s", config.backend)
        try:
            server = await start_knowledge(
                store,
                authority,
                host=config.host,
                port=config.port,
                max_write_bytes=config.max_write_bytes,
                read_budget_bytes=config.read_budget_bytes,
                read_many_max_items=config.read_many_max_items,
                read_many_max_bytes=config.read_many_max_bytes,
                tls=config.tls,
                metrics=config.metrics,
                tracer_provider=tracer_provider,
            )
        except TlsConfigError as exc:
            raise StartupError(str(exc)) from None
        await serve_until_signal("agentnet-knowledge", config.host, server)
    finally:
        await store.close()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still buffered


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``agentnet-knowledge``)."""
    config = parse_args(argv)
    configure_logging(config.log_level)
    try:
        asyncio.run(run(config))
    except (StartupError, PortUnavailable) as exc:
        sys.exit(f"agentnet-knowledge: {exc}")


if __name__ == "__main__":
    main()
