"""Fault injection for the stores: named points where a test makes a store fail as a real fault would.

A store takes a :class:`StoreFaults` as its ``faults`` argument (tests only; the hub's command
line never sets one). Each method is one fault point, called by the store at that moment with
what it is about to do; the base class does nothing at any point, and a test overrides the point
it needs (to exit the process, raise, or record). A store given no faults (the default) checks
one ``None`` at each point and calls nothing.

Points:

* :meth:`StoreFaults.between_parts` — Redis, spread layout
  (:mod:`hubsvc.storage.redis_store.spread`): the channel parts of these bundles committed and
  their global parts are about to be sent. A writer that dies here leaves the global parts to a
  sweep of another store (``complete_pending``).
"""

from __future__ import annotations

from collections.abc import Sequence

from hubsvc.storage.base import Writes


class StoreFaults:
    """The fault points of the stores; every point does nothing unless a subclass overrides it."""

    def between_parts(self, written: Sequence[Writes]) -> None:
        """(Redis, spread layout) ``written``'s channel parts committed; their global parts come next."""
