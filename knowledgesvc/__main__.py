"""``python -m knowledgesvc``: run the knowledge service until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio

from agentnet.v1 import knowledge_pb2_grpc

from agentsdk.service_runtime import ServiceSpec, configure_logging, serve_forever
from knowledgesvc.config import KnowledgeConfig, parse_args
from knowledgesvc.servicer import KNOWLEDGE_SERVICE, KnowledgeServicer


async def run(config: KnowledgeConfig) -> None:
    """Serve the knowledge service with ``config`` until a stop signal arrives."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    # RPCs not built yet are filled in at runtime by fill_unimplemented (mypy cannot see that).
    servicer = KnowledgeServicer()  # type: ignore[abstract]
    spec = ServiceSpec(
        KNOWLEDGE_SERVICE.full_name,
        lambda server: knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server(servicer, server),
    )
    await serve_forever("agentnet-knowledge", [spec], host=config.host, port=config.port)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``agentnet-knowledge``)."""
    config = parse_args(argv)
    configure_logging(config.log_level)
    asyncio.run(run(config))


if __name__ == "__main__":
    main()
