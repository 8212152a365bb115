"""The store's Lua scripts, kept as ``.lua`` files beside this module (package data, ``lua/``).

* ``commit.lua`` — the one commit script: a group's (or one part's) checks, then its writes
  (:mod:`hubsvc.storage.redis_store.plan` builds its arguments; the file's head describes them);
* ``scan_texts.lua`` — one chunk of a channel's EV_TEXT rows, newest first (SearchContext,
  QuoteContext);
* ``rebuild_holdings.lua`` — fills the holder sets of a store written before them (at open);
* ``leases.lua`` — the partition leases: acquire, renew, release, read the map
  (:mod:`hubsvc.storage.redis_store.partitions`);
* ``replicas.lua`` — the live replicas and their addresses (:mod:`hubsvc.storage.redis_store.liveness`).
* ``purge_channel.lua`` — retention's purge of one ended channel, once across replicas
  (:mod:`hubsvc.storage.redis_store.history`).
* ``rate.lua`` — an identity's rate bucket shared by the replicas: take or give back tokens
  (:mod:`hubsvc.storage.redis_store.rate`).
"""

from __future__ import annotations

from importlib import resources


def _load(name: str) -> str:
    """The source of ``lua/<name>``, read from the installed package."""
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


COMMIT = _load("commit.lua")
SCAN_TEXTS = _load("scan_texts.lua")
REBUILD_HOLDINGS = _load("rebuild_holdings.lua")
LEASES = _load("leases.lua")
REPLICAS = _load("replicas.lua")
PURGE_CHANNEL = _load("purge_channel.lua")
RATE = _load("rate.lua")
