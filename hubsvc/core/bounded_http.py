"""An httpx client whose every response body is bounded in bytes: what the hub's outbound A2A calls
(:mod:`hubsvc.core.remote_a2a`) read cards and answers with. Its own module so that httpx (and what
httpx imports) loads on the first outbound call, not at every hub's start."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

__all__ = ["TooLarge", "bounded_client", "too_large"]


class TooLarge(httpx.RequestError):
    """An answer over the byte limit (raised while reading it, so nothing more is read)."""


class _BoundedStream(httpx.AsyncByteStream):
    """A response body that refuses to grow past ``limit`` bytes."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, request: httpx.Request) -> None:
        self._inner = inner
        self._limit = limit
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise TooLarge(too_large(self._limit), request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx.AsyncBaseTransport):
    """httpx's transport with every response body bounded in bytes."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self._limit:
            await response.aclose()
            raise TooLarge(too_large(self._limit), request=request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _BoundedStream(stream, self._limit, request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def too_large(limit: int) -> str:
    return f"the answer is larger than {limit} bytes (the hub's --a2a-outbound-max-bytes)"


def bounded_client(limit: int, read_timeout: float, connect_timeout: float) -> httpx.AsyncClient:
    """A client that follows no redirect and refuses any body over ``limit`` bytes (:class:`TooLarge`)."""
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    return httpx.AsyncClient(transport=_BoundedTransport(limit), timeout=timeout, follow_redirects=False)
