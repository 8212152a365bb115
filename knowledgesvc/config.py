"""Knowledge service configuration: flags, environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from knowledgesvc.servicer import MAX_RESPONSE_BYTES, READ_BUDGET_BYTES, READ_MANY_MAX_BYTES, READ_MANY_MAX_ITEMS
from servicekit.metrics import MetricsSettings, add_metrics_arguments, metrics_from_args
from servicekit.tls import ServerTls, add_tls_arguments, tls_from_args

BACKENDS = ("memory", "sqlite", "disk", "redis")


@dataclass(frozen=True)
class KnowledgeConfig:
    """Settings of one knowledge-service process."""

    host: str = "127.0.0.1"
    """Interface to listen on (AGENTNET_KNOWLEDGE_HOST)."""
    port: int = 50052
    """TCP port; 0 picks a free one and prints it (AGENTNET_KNOWLEDGE_PORT)."""
    backend: str = "sqlite"
    """Storage backend: memory, sqlite, disk or redis (AGENTNET_KNOWLEDGE_BACKEND)."""
    data_dir: Path = Path("data")
    """Directory for sqlite / disk storage and the generated token (AGENTNET_DATA_DIR)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL for the redis backend (AGENTNET_REDIS_URL)."""
    redis_prefix: str = "agentnet:knowledge:"
    """Key prefix for the redis backend (AGENTNET_KNOWLEDGE_REDIS_PREFIX)."""
    tokens_file: Path | None = None
    """Bearer tokens and the namespaces they grant (AGENTNET_KNOWLEDGE_TOKENS_FILE); None = generated token."""
    max_write_bytes: int = 8 * 1024 * 1024
    """Largest Write content / Append text accepted, in UTF-8 bytes (AGENTNET_KNOWLEDGE_MAX_WRITE_BYTES)."""
    read_budget_bytes: int = READ_BUDGET_BYTES
    """Bytes of files concurrent reads may load at once; more wait (AGENTNET_KNOWLEDGE_READ_BUDGET_BYTES)."""
    read_many_max_items: int = READ_MANY_MAX_ITEMS
    """Most reads in one ReadMany call; more is INVALID_ARGUMENT (AGENTNET_KNOWLEDGE_READ_MANY_MAX_ITEMS)."""
    read_many_max_bytes: int = READ_MANY_MAX_BYTES
    """Most file content in one ReadMany response, at most 16 MiB - 64 KiB; an item past it is refused on its
    own, to be read alone (AGENTNET_KNOWLEDGE_READ_MANY_MAX_BYTES)."""
    log_level: str = "INFO"
    """Logging level (AGENTNET_LOG_LEVEL)."""
    tls: ServerTls | None = None
    """TLS settings (--tls-cert, --tls-key, --tls-client-ca; AGENTNET_KNOWLEDGE_TLS_*); None serves plaintext,
    which only a loopback host or --insecure (AGENTNET_KNOWLEDGE_INSECURE) allows."""
    metrics: MetricsSettings | None = None
    """Where Prometheus metrics are served (--metrics-port, --metrics-host; AGENTNET_KNOWLEDGE_METRICS_PORT /
    _HOST); None = not served."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def parse_args(argv: list[str] | None = None) -> KnowledgeConfig:
    """Build a :class:`KnowledgeConfig` from command-line flags over environment variables."""
    env = os.environ
    d = KnowledgeConfig
    parser = argparse.ArgumentParser(
        prog="python -m knowledgesvc", description="agent-network knowledge service: path-addressed agent memory."
    )
    parser.add_argument(
        "--host", default=env.get("AGENTNET_KNOWLEDGE_HOST", d.host), help="listen address (AGENTNET_KNOWLEDGE_HOST)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(env.get("AGENTNET_KNOWLEDGE_PORT", d.port)),
        help="TCP port, 0 = any free (AGENTNET_KNOWLEDGE_PORT)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=env.get("AGENTNET_KNOWLEDGE_BACKEND", d.backend),
        help="storage backend: sqlite = <data-dir>/knowledge.db, disk = <data-dir>/knowledge/ "
        "(AGENTNET_KNOWLEDGE_BACKEND)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(env.get("AGENTNET_DATA_DIR", str(d.data_dir))),
        help="directory for sqlite/disk storage and the generated knowledge.token (AGENTNET_DATA_DIR)",
    )
    parser.add_argument(
        "--redis-url", default=env.get("AGENTNET_REDIS_URL", d.redis_url), help="redis backend URL (AGENTNET_REDIS_URL)"
    )
    parser.add_argument(
        "--redis-prefix",
        default=env.get("AGENTNET_KNOWLEDGE_REDIS_PREFIX", d.redis_prefix),
        help="redis backend key prefix (AGENTNET_KNOWLEDGE_REDIS_PREFIX)",
    )
    tokens_env = env.get("AGENTNET_KNOWLEDGE_TOKENS_FILE")
    parser.add_argument(
        "--tokens-file",
        type=Path,
        default=Path(tokens_env) if tokens_env else None,
        help="file of lines 'TOKEN NAMESPACE-GLOB[,GLOB...]' granting bearer tokens; without it a random token "
        "granting every namespace is created in <data-dir>/knowledge.token (AGENTNET_KNOWLEDGE_TOKENS_FILE)",
    )
    parser.add_argument(
        "--max-write-bytes",
        type=_positive_int,
        default=int(env.get("AGENTNET_KNOWLEDGE_MAX_WRITE_BYTES", d.max_write_bytes)),
        help="largest write/append accepted, in bytes; default 8 MiB (AGENTNET_KNOWLEDGE_MAX_WRITE_BYTES)",
    )
    parser.add_argument(
        "--read-budget-bytes",
        type=_positive_int,
        default=int(env.get("AGENTNET_KNOWLEDGE_READ_BUDGET_BYTES", d.read_budget_bytes)),
        help="bytes of files all concurrent Read/ReadRange calls may load at once; later reads wait their turn; "
        "default 64 MiB (AGENTNET_KNOWLEDGE_READ_BUDGET_BYTES)",
    )
    parser.add_argument(
        "--read-many-max-items",
        type=_positive_int,
        default=int(env.get("AGENTNET_KNOWLEDGE_READ_MANY_MAX_ITEMS", d.read_many_max_items)),
        help="most reads in one ReadMany call; more is refused with INVALID_ARGUMENT; default 256 "
        "(AGENTNET_KNOWLEDGE_READ_MANY_MAX_ITEMS)",
    )
    parser.add_argument(
        "--read-many-max-bytes",
        type=_positive_int,
        default=int(env.get("AGENTNET_KNOWLEDGE_READ_MANY_MAX_BYTES", d.read_many_max_bytes)),
        help="most file content in one ReadMany response; an item past it is refused alone (the client reads "
        f"it with Read); default 4 MiB, at most {MAX_RESPONSE_BYTES} (AGENTNET_KNOWLEDGE_READ_MANY_MAX_BYTES)",
    )
    parser.add_argument(
        "--log-level", default=env.get("AGENTNET_LOG_LEVEL", d.log_level), help="log level (AGENTNET_LOG_LEVEL)"
    )
    add_tls_arguments(parser, "AGENTNET_KNOWLEDGE_")
    add_metrics_arguments(parser, "AGENTNET_KNOWLEDGE_")
    a = parser.parse_args(argv)
    if a.read_many_max_bytes > MAX_RESPONSE_BYTES:
        parser.error(
            f"--read-many-max-bytes {a.read_many_max_bytes} is over what one response may carry "
            f"({MAX_RESPONSE_BYTES}); choose at most that"
        )
    tls = tls_from_args(parser, a, a.host)
    return KnowledgeConfig(
        host=a.host,
        port=a.port,
        backend=a.backend,
        data_dir=a.data_dir,
        redis_url=a.redis_url,
        redis_prefix=a.redis_prefix,
        tokens_file=a.tokens_file,
        max_write_bytes=a.max_write_bytes,
        read_budget_bytes=a.read_budget_bytes,
        read_many_max_items=a.read_many_max_items,
        read_many_max_bytes=a.read_many_max_bytes,
        log_level=a.log_level,
        tls=tls,
        metrics=metrics_from_args(parser, a),
    )
