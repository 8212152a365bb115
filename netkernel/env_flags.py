"""How every agentnet process reads an on/off environment variable (``AGENTNET_*_INSECURE``, ``…_HUB_TLS`` …)."""


def env_flag(value: str | None) -> bool:
    """Whether an environment variable's value turns a flag on (1, true, yes, on)."""
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}
