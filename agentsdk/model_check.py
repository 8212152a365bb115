"""Checking an agent's model configuration before it takes turns, and describing a failed model call.

``hc.register(agent, check_model=True)`` calls :func:`check_model` first: one cheap request to the
model endpoint (``GET /models``, no tokens spent) that fails fast with a :class:`ModelCheckFailed`
naming what is wrong — no API key, a key the endpoint refuses, an endpoint that cannot be reached or
does not answer in time, a model the endpoint does not serve — instead of the first turn failing
in front of the person who asked. :func:`attempts_of` tells a turn-failure report how many times
the failed call was tried (the ``openai`` client retries connection errors, timeouts, 429 and 5xx
``max_retries`` times with exponential backoff before raising).
"""

from __future__ import annotations

from typing import Any

from netkernel.errors import FailedPrecondition
from netkernel.turn_failure import redact

__all__ = ["ModelCheckFailed", "attempts_of", "check_model"]


class ModelCheckFailed(FailedPrecondition):
    """The agent's model configuration does not work; the message says what is wrong and what to do."""


def _retryable(exc: BaseException) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency of the SDK
        return False
    return isinstance(exc, openai.APIConnectionError | openai.RateLimitError | openai.InternalServerError)


def attempts_of(exc: BaseException, config: Any) -> int:
    """How many times the model call that raised ``exc`` was tried: ``max_retries + 1`` for an error the
    ``openai`` client retries (connection, timeout, 429, 5xx), else 1."""
    retries = getattr(config, "max_retries", 0)
    if _retryable(exc) and isinstance(retries, int):
        return retries + 1
    return 1


async def check_model(config: Any) -> None:
    """One cheap call to ``config``'s endpoint (an :class:`~agentsdk.config.OpenAIConfig`); raises
    :class:`ModelCheckFailed` saying what is wrong. A config without an endpoint (a scripted model)
    passes."""
    from agentsdk.config import OpenAIConfig

    if not isinstance(config, OpenAIConfig):
        return
    import openai

    where = config.base_url or "the default OpenAI endpoint (OPENAI_BASE_URL)"
    try:
        client = config.client
    except openai.OpenAIError as err:
        raise ModelCheckFailed(
            f"model {config.model!r}: no API key: {redact(str(err))} Set OPENAI_API_KEY or pass "
            "OpenAIConfig(api_key=...).",
            metadata={"model": config.model, "problem": "no_api_key"},
        ) from None
    try:
        page = await client.models.list()
    except openai.AuthenticationError as err:
        raise ModelCheckFailed(
            f"model {config.model!r}: {where} refused the API key (HTTP {err.status_code}): "
            f"{redact(err.message)}. Check OPENAI_API_KEY / OpenAIConfig(api_key=...).",
            metadata={"model": config.model, "problem": "bad_api_key"},
        ) from None
    except openai.APITimeoutError:
        raise ModelCheckFailed(
            f"model {config.model!r}: {where} did not answer within {config.timeout:g}s. Check base_url, or raise "
            "OpenAIConfig(timeout=...).",
            metadata={"model": config.model, "problem": "timeout"},
        ) from None
    except openai.APIConnectionError as err:
        cause = err.__cause__ or err.__context__
        raise ModelCheckFailed(
            f"model {config.model!r}: cannot reach {where}: {redact(str(cause or err))}. Check base_url "
            "(e.g. http://127.0.0.1:8000/v1) and that the server runs.",
            metadata={"model": config.model, "problem": "unreachable"},
        ) from None
    except openai.APIStatusError as err:
        raise ModelCheckFailed(
            f"model {config.model!r}: {where} answered GET /models with HTTP {err.status_code}: "
            f"{redact(err.message)}. Check base_url.",
            metadata={"model": config.model, "problem": "endpoint_error"},
        ) from None
    served = [m.id for m in page.data]
    if served and config.model not in served:
        listed = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
        raise ModelCheckFailed(
            f"model {config.model!r} is not served by {where}; it serves: {listed}. Fix OpenAIConfig(model=...).",
            metadata={"model": config.model, "problem": "unknown_model"},
        )
