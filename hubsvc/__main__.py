"""``python -m hubsvc``: run the hub service until SIGINT/SIGTERM."""

from __future__ import annotations

import os

from netkernel.grpc_env import GRPC_EXPERIMENTS

os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)  # before grpc is imported (netkernel/grpc_env.py)

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from hubsvc.config import HubConfig, parse_args
from hubsvc.governance.arbiter import Arbiter, load_arbiter
from hubsvc.governance.source import PolicySource
from hubsvc.server import HubServer, start_hub
from hubsvc.storage import HubStore, SqliteHubStore
from hubsvc.storage.faults import StoreFaults
from hubsvc.storage.redis_settings import StoreUnreachable
from netkernel.errors import InvalidArgument
from netkernel.extras import require
from netkernel.transition_targets import load_targets
from servicekit.auth import ensure_secret_file
from servicekit.runtime import PortUnavailable, configure_logging, serve_until_signal
from servicekit.tls import TlsConfigError
from servicekit.tracing import tracer_provider_from_env

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("agentnet.hub")


def make_store(config: HubConfig, *, faults: StoreFaults | None = None) -> HubStore:
    """The store ``--store`` names: the SQLite file (--db), or Redis at the URL (told of its fault
    points by ``faults``: tests only, :mod:`hubsvc.storage.faults`)."""
    if config.store == "sqlite":
        return SqliteHubStore(
            config.database, synchronous=config.synchronous, inline_write_rows=config.sqlite_inline_rows
        )
    require("redis", "redis")  # the Redis store loads on --store redis://… only (a clear error without the extra)
    from hubsvc.storage.redis_store import RedisHubStore

    # --partitions 0 (the default): every replica holds every channel. The spread layout cannot
    # check a partition's lease in the same atomic step as a channel's write (RedisHubStore refuses it).
    return RedisHubStore(
        config.store,
        timeout=config.redis_timeout,
        wait_replicas=config.redis_wait_replicas,
        wait_timeout=config.redis_wait_timeout,
        partitions=config.partitions or None,
        faults=faults,
    )


async def start_from_config(
    config: HubConfig,
    *,
    arbiter: Arbiter | None = None,
    tracer_provider: TracerProvider | None = None,
    faults: StoreFaults | None = None,
) -> HubServer:
    """Open the store and start the hub ``config`` describes, serving until stopped (``python -m hubsvc``,
    and ``python -m ag2embedded``, which hosts the AG2 gateway in the same process). The arguments as
    :func:`run`'s."""
    operator_token = ensure_secret_file(config.operator_token_path)
    log.info("operator calls (OperatorService, ListAudit) use the token in %s", config.operator_token_path)
    store = make_store(config, faults=faults)
    log.info("hub state: %s", config.database if config.store == "sqlite" else f"Redis {getattr(store, 'address', '')}")
    return await start_hub(
        store,
        host=config.host,
        port=config.port,
        operator_token=operator_token,
        options=config.options(),
        tls=config.tls,
        tls_bind_identity=config.tls_bind_identity,
        policy=config.policy,
        arbiter=arbiter,
        metrics=config.metrics,
        tracer_provider=tracer_provider,
        advertise=config.advertise,
        replica_tls_ca=config.replica_tls_ca,
        replica_tls_server_name=config.replica_tls_server_name,
    )


async def run(
    config: HubConfig,
    *,
    arbiter: Arbiter | None = None,
    tracer_provider: TracerProvider | None = None,
    faults: StoreFaults | None = None,
) -> None:
    """Serve the hub with ``config`` until a stop signal arrives (``arbiter``: the one ``--arbiter`` names;
    ``tracer_provider``: the one the ``OTEL_*`` environment configures, servicekit/tracing.py; ``faults``:
    the store's fault points, tests only)."""
    hub = await start_from_config(config, arbiter=arbiter, tracer_provider=tracer_provider, faults=faults)
    try:
        await serve_until_signal("agentnet-hub", config.host, hub)
    finally:
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still buffered


def checked_extras(config: HubConfig, program: str = "agentnet-hub") -> tuple[Arbiter | None, TracerProvider | None]:
    """Load what ``config`` names beside the store (the arbiter, the transition targets, tracing) and check
    the policy file, so a setting that cannot be used stops the process before it serves anything: it
    exits with ``<program>: <what is wrong>``. Returns the arbiter and the tracer provider."""
    try:
        if config.policy is not None:
            PolicySource(config.policy)  # checked here for a clear exit; start_hub loads and watches it
        arbiter = load_arbiter(config.arbiter) if config.arbiter else None
        if config.transition_targets:
            load_targets(config.transition_targets)
        return arbiter, tracer_provider_from_env("agentnet-hub")
    except (ValueError, InvalidArgument) as err:
        sys.exit(f"{program}: {err}")


@contextlib.contextmanager
def exit_on_start_failure(program: str = "agentnet-hub") -> Iterator[None]:
    """Turn the start-up failures a user can fix (TLS files, an unreachable store, a port in use) into an
    exit with ``<program>: <what is wrong>``."""
    try:
        yield
    except TlsConfigError as exc:
        sys.exit(f"{program}: {exc}")
    except StoreUnreachable as exc:
        sys.exit(f"{program}: --store: {exc}")
    except PortUnavailable as exc:
        sys.exit(f"{program}: {exc}")


def main(argv: list[str] | None = None, *, faults: StoreFaults | None = None) -> None:
    """Console entry point (``agentnet-hub``). ``faults`` makes the store fail at named points: a test's
    own entry point passes it (tests/hubsvc/crashing_hub.py); the command line never does."""
    config = parse_args(argv)
    configure_logging(config.log_level)
    arbiter, tracer_provider = checked_extras(config)
    with exit_on_start_failure():
        asyncio.run(run(config, arbiter=arbiter, tracer_provider=tracer_provider, faults=faults))


if __name__ == "__main__":
    main()
