"""A clock tests can move forward, for the hub's injectable ``clock``."""

from __future__ import annotations

import time


class FakeClock:
    """Wall time plus an offset the test moves forward (``frozen``: the start time plus the offset only)."""

    def __init__(self, *, frozen: bool = False) -> None:
        self.offset = 0.0
        self._frozen_at = time.time() if frozen else None

    def __call__(self) -> float:
        base = self._frozen_at if self._frozen_at is not None else time.time()
        return base + self.offset
