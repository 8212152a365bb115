"""``python -m hubsvc``: run the hub service until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging

from agentnet.v1 import hub_pb2_grpc

from agentsdk.service_auth import ensure_secret_file
from agentsdk.service_runtime import ServiceSpec, configure_logging, serve_forever
from hubsvc.config import HubConfig, parse_args
from hubsvc.core.hub import HubCore
from hubsvc.servicer import HUB_SERVICE, HubServicer
from hubsvc.storage import SqliteHubStore

log = logging.getLogger("agentnet.hub")


async def run(config: HubConfig) -> None:
    """Serve the hub with ``config`` until a stop signal arrives."""
    core = HubCore(SqliteHubStore(config.database, synchronous=config.synchronous), options=config.options())
    operator_token = ensure_secret_file(config.operator_token_path)
    log.info("operator calls (ListAudit) authenticate with the token in %s", config.operator_token_path)
    servicer = HubServicer(core, operator_token=operator_token)
    spec = ServiceSpec(
        HUB_SERVICE.full_name, lambda server: hub_pb2_grpc.add_HubServiceServicer_to_server(servicer, server)
    )
    await serve_forever(
        "agentnet-hub",
        [spec],
        host=config.host,
        port=config.port,
        on_start=core.start,
        on_stopping=core.close_sessions,
        on_stop=core.stop,
    )


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``agentnet-hub``)."""
    config = parse_args(argv)
    configure_logging(config.log_level)
    asyncio.run(run(config))


if __name__ == "__main__":
    main()
