"""A clock tests can move forward, for the hub's injectable ``clock``."""

from __future__ import annotations

import time


class FakeClock:
    """Wall time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset
