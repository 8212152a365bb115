"""``python -m tests.hubsvc.crashing_hub --exit-between-parts KEY <hub flags>``: the hub (``python -m
hubsvc``) whose store exits the process (status :data:`EXIT_STATUS`) right after the channel part
of the bundle carrying idempotency key KEY committed, before its global part (spread layout).

The fault is injected through the store's fault seam (:mod:`hubsvc.storage.faults`), which the
hub's own command line never sets: only this test entry point does.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from hubsvc.__main__ import main as hub_main
from hubsvc.storage import Writes
from hubsvc.storage.faults import StoreFaults

EXIT_STATUS = 70
"""The status the process exits with at the fault (tells it from any other way of ending)."""

log = logging.getLogger("agentnet.hub.storage")


class ExitBetweenParts(StoreFaults):
    """Exit the process (``os._exit``: no cleanup, like a kill) between the two parts of the bundle
    whose WAL rows carry ``idempotency_key``."""

    def __init__(self, idempotency_key: str) -> None:
        self.idempotency_key = idempotency_key

    def between_parts(self, written: Sequence[Writes]) -> None:
        """Exit if a bundle whose channel part just committed carries the key."""
        if any(w.idempotency_key == self.idempotency_key for writes in written for w in writes.wal):
            log.error("exiting between the parts of a commit (test fault, key %s)", self.idempotency_key)
            os._exit(EXIT_STATUS)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--exit-between-parts KEY`` and run the hub with the rest of the flags."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--exit-between-parts", required=True, metavar="KEY")
    ours, rest = parser.parse_known_args(argv)
    hub_main(rest, faults=ExitBetweenParts(ours.exit_between_parts))


if __name__ == "__main__":
    main()
