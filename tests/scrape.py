"""Scraping a service's ``/metrics`` over real HTTP, as Prometheus does."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""(sample name, its labels) → value."""


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read().decode()


async def scrape(url: str) -> Samples:
    """Every sample served at ``url`` (read in a thread: the service answers on this event loop)."""
    status, content_type, text = await asyncio.to_thread(_get, url)
    assert status == 200 and content_type.startswith("text/plain"), (status, content_type)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when it is not there yet: a labelled counter appears on first use)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
