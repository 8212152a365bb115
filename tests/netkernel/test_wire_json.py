"""dumps_json writes exactly what the stdlib's compact encoder writes (orjson only where that holds)."""

from __future__ import annotations

import enum
import json
import random
import uuid
from typing import Any

import pytest

from netkernel.wire import dumps_json

STDLIB = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of strings (any code point but surrogates), ints of any size, bools, None, lists, dicts."""
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return "".join(chr(rng.choice((rng.randrange(0x20), rng.randrange(0xD800), 0x10FFFF))) for _ in range(4))
    if roll < 0.45:
        return rng.choice((rng.randrange(-(2**63), 2**64), rng.randrange(2**64, 2**80), -(2**70)))
    if roll < 0.5:
        return rng.choice((True, False, None))
    if roll < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{rng.randrange(99)}\n\u2028": random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_plain_values_are_written_as_the_stdlib_writes_them() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        value = random_value(rng)
        assert dumps_json(value) == STDLIB.encode(value)
    for value in ({"text": "m1"}, {}, [], "", 0, {"a": {"b": [[], {}]}}, {"t": '\x00\x1f"\\/\x7f'}):
        assert dumps_json(value) == STDLIB.encode(value)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    def __str__(self) -> str:
        return "other"


def test_everything_else_behaves_as_with_the_stdlib_encoder() -> None:
    deep: list[Any] = []
    for _ in range(100):
        deep = [deep]
    for value in (
        {"x": 1.5, "y": 1e16, "z": -0.0, "w": 1e-7},
        {1: "int key", False: "bool key", None: "none key", 2.5: "float key"},
        {"level": Level.HIGH, "name": Name("n"), "tuple": (1, "a")},
        {"s": "\ud800"},  # a lone surrogate: orjson refuses it, the stdlib writes it
        deep,
    ):
        assert dumps_json(value) == STDLIB.encode(value)
    for bad, error in (
        ({"n": float("nan")}, ValueError),
        ({"i": float("inf")}, ValueError),
        ({"c": Colour.RED}, TypeError),
        ({"u": uuid.UUID(int=1)}, TypeError),
        ({"b": b"bytes"}, TypeError),
    ):
        with pytest.raises(error):
            dumps_json(bad)
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular"):
        dumps_json(circular)
