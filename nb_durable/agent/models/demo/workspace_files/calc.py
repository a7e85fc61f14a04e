"""Small statistics helpers: the code under test in the nb_durable demo project."""

from __future__ import annotations

from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean() needs at least one value")
    return sum(values) / len(values)


def median(values: Sequence[float]) -> float:
    """The middle value; for an even count, the mean of the two middle values."""
    if not values:
        raise ValueError("median() needs at least one value")
    ordered = list(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def value_range(values: Sequence[float]) -> float:
    """The spread between the largest and the smallest value."""
    if not values:
        raise ValueError("value_range() needs at least one value")
    return max(values) - min(values)
