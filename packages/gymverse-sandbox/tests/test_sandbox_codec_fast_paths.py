"""The fast paths of the host's codec and the message depth check give exactly what the plain definitions give."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from gymverse.sandbox._codec import OBJECT, SCALAR, TUPLE, decode, encode
from gymverse.sandbox._protocol import MAX_DEPTH, depth, frame, parse


def reference_depth(value: Any) -> int:
    """The definition: a value is one level, a container one more than its deepest child."""
    children = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else None
    return 1 if children is None else 1 + max((reference_depth(c) for c in children), default=0)


def nested(rng: random.Random, budget: int) -> Any:
    if budget == 0 or rng.random() < 0.3:
        return rng.choice([1, 2.5, "x", None, True, [], {}])
    n = rng.randint(0, 3)
    if rng.random() < 0.5:
        return [nested(rng, budget - 1) for _ in range(n)]
    return {f"k{i}": nested(rng, budget - 1) for i in range(n)}


def test_depth_is_the_nesting_depth_of_any_value() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        value = nested(rng, rng.randint(0, 8))
        assert depth(value) == reference_depth(value)


def test_parse_rejects_exactly_the_messages_past_the_cap() -> None:
    def message(levels: int) -> dict[str, Any]:
        inner: Any = 0
        for _ in range(levels - 2):
            inner = [inner]
        return {"v": inner}

    assert parse(frame(message(MAX_DEPTH))[4:]) == message(MAX_DEPTH)
    assert parse(frame(message(MAX_DEPTH + 1))[4:]) is None
    assert depth([[]] * 3 + [[[[[]]]]]) == 5  # the deepest branch counts, wherever it is


def test_encode_keeps_plain_values_and_tags_the_rest() -> None:
    class Str(str):
        pass

    value = {"a": [1, 2.5, "s", None, True, (3, np.float64(0.5))], "b": np.int64(4), "c": Str("t"), "d": 2**70}
    got = encode(value)
    assert got["a"][:5] == [1, 2.5, "s", None, True]
    assert got["a"][5] == {TUPLE: [3, {SCALAR: ["<f8", 0.5]}]}
    assert got["b"] == {SCALAR: [np.dtype(np.int64).str, 4]} and got["c"] == "t" and got["d"] == 2**70
    assert decode(got) == {**value, "c": "t"}
    assert encode(object())[OBJECT][0] == "object"
