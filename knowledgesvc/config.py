"""Knowledge service configuration: each option declared once, its flag, variable and check derived from it.

Every option is a field of :class:`KnowledgeConfig` made with :func:`netkernel.options.option`;
:func:`parse_args` builds the flags, reads their environment variables and checks their values from those
declarations (netkernel/options.py), as the hub does.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from knowledgesvc.servicer import MAX_RESPONSE_BYTES, READ_BUDGET_BYTES, READ_MANY_MAX_BYTES, READ_MANY_MAX_ITEMS
from netkernel.options import POSITIVE, OptionSpec, Range, add_options, check_args, named_specs, option
from servicekit.metrics import MetricsSettings, add_metrics_arguments, metrics_from_args
from servicekit.tls import ServerTls, add_tls_arguments, tls_from_args

BACKENDS = ("memory", "sqlite", "disk", "redis")


@dataclass(frozen=True)
class KnowledgeConfig:
    """Settings of one knowledge-service process."""

    host: str = option("127.0.0.1", "--host", "AGENTNET_KNOWLEDGE_HOST", "listen address")
    """Interface to listen on."""
    port: int = option(50052, "--port", "AGENTNET_KNOWLEDGE_PORT", "TCP port, 0 = any free")
    """TCP port; 0 picks a free one and prints it."""
    backend: str = option(
        "sqlite",
        "--backend",
        "AGENTNET_KNOWLEDGE_BACKEND",
        "storage backend: sqlite = <data-dir>/knowledge.db, disk = <data-dir>/knowledge/",
        choices=BACKENDS,
    )
    """Storage backend: memory, sqlite, disk or redis."""
    data_dir: Path = option(
        Path("data"),
        "--data-dir",
        "AGENTNET_DATA_DIR",
        "directory for sqlite/disk storage and the generated knowledge.token",
    )
    """Directory for sqlite / disk storage and the generated token."""
    redis_url: str = option("redis://127.0.0.1:6379/0", "--redis-url", "AGENTNET_REDIS_URL", "redis backend URL")
    """Redis URL for the redis backend."""
    redis_prefix: str = option(
        "agentnet:knowledge:", "--redis-prefix", "AGENTNET_KNOWLEDGE_REDIS_PREFIX", "redis backend key prefix"
    )
    """Key prefix for the redis backend."""
    tokens_file: Path | None = option(
        None,
        "--tokens-file",
        "AGENTNET_KNOWLEDGE_TOKENS_FILE",
        "file of lines 'TOKEN NAMESPACE-GLOB[,GLOB...]' granting bearer tokens; without it a random token "
        "granting every namespace is created in <data-dir>/knowledge.token",
        parse=Path,
    )
    """Bearer tokens and the namespaces they grant; None = generated token."""
    max_write_bytes: int = option(
        8 * 1024 * 1024,
        "--max-write-bytes",
        "AGENTNET_KNOWLEDGE_MAX_WRITE_BYTES",
        "largest write/append accepted, in bytes; default 8 MiB",
        check=POSITIVE,
    )
    """Largest Write content / Append text accepted, in UTF-8 bytes."""
    read_budget_bytes: int = option(
        READ_BUDGET_BYTES,
        "--read-budget-bytes",
        "AGENTNET_KNOWLEDGE_READ_BUDGET_BYTES",
        "bytes of files all concurrent Read/ReadRange calls may load at once; later reads wait their turn; "
        "default 64 MiB",
        check=POSITIVE,
    )
    """Bytes of files concurrent reads may load at once; more wait."""
    read_many_max_items: int = option(
        READ_MANY_MAX_ITEMS,
        "--read-many-max-items",
        "AGENTNET_KNOWLEDGE_READ_MANY_MAX_ITEMS",
        "most reads in one ReadMany call; more is refused with INVALID_ARGUMENT; default 256",
        check=POSITIVE,
    )
    """Most reads in one ReadMany call; more is INVALID_ARGUMENT."""
    read_many_max_bytes: int = option(
        READ_MANY_MAX_BYTES,
        "--read-many-max-bytes",
        "AGENTNET_KNOWLEDGE_READ_MANY_MAX_BYTES",
        "most file content in one ReadMany response; an item past it is refused alone (the client reads "
        f"it with Read); default 4 MiB, at most {MAX_RESPONSE_BYTES}",
        check=Range(0, MAX_RESPONSE_BYTES, why=": one response carries at most that much"),
    )
    """Most file content in one ReadMany response, at most 16 MiB - 64 KiB; an item past it is refused on its
    own, to be read alone."""
    log_level: str = option("INFO", "--log-level", "AGENTNET_LOG_LEVEL", "log level")
    """Logging level."""
    tls: ServerTls | None = None
    """TLS settings (--tls-cert, --tls-key, --tls-client-ca; AGENTNET_KNOWLEDGE_TLS_*); None serves plaintext,
    which only a loopback host or --insecure (AGENTNET_KNOWLEDGE_INSECURE) allows."""
    metrics: MetricsSettings | None = None
    """Where Prometheus metrics are served (--metrics-port, --metrics-host; AGENTNET_KNOWLEDGE_METRICS_PORT /
    _HOST); None = not served."""


def knowledge_option_specs() -> list[tuple[str, OptionSpec]]:
    """Every declared option of ``python -m knowledgesvc`` as (field name, spec), beside the TLS and metrics
    flags servicekit adds."""
    return named_specs(KnowledgeConfig)


def parse_args(argv: list[str] | None = None) -> KnowledgeConfig:
    """Build a :class:`KnowledgeConfig` from command-line flags over environment variables over defaults."""
    parser = argparse.ArgumentParser(
        prog="python -m knowledgesvc", description="agent-network knowledge service: path-addressed agent memory."
    )
    specs = knowledge_option_specs()
    add_options(parser, specs, KnowledgeConfig())
    add_tls_arguments(parser, "AGENTNET_KNOWLEDGE_")
    add_metrics_arguments(parser, "AGENTNET_KNOWLEDGE_")
    args = parser.parse_args(argv)
    values = check_args(parser, args, specs)
    tls = tls_from_args(parser, args, args.host)
    return KnowledgeConfig(tls=tls, metrics=metrics_from_args(parser, args, "AGENTNET_KNOWLEDGE_"), **values)
