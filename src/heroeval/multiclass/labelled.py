"""Per-class intervals that know their classes: what every K-class ``intervals()`` returns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import SupportsIndex, overload

from heroeval.errors import HeroEvalError

__all__ = ["ClassIntervals"]


class ClassIntervals(tuple[tuple[float, float], ...]):
    """The ``(low, high)`` interval of each class share, in class order, indexed by position or by class name.

    A tuple of pairs (``for lo, hi in ci``, ``ci[0]``) that is also labelled: ``ci["3"]`` is class ``"3"``'s
    interval, :attr:`classes` the names, :meth:`to_dict` ``{class: {"ci_low", "ci_high"}}``.

    >>> ci = ClassIntervals(["low", "high"], [(0.1, 0.3), (0.7, 0.9)])
    >>> ci["high"], ci[0]
    ((0.7, 0.9), (0.1, 0.3))
    >>> ci
    ClassIntervals({'low': (0.1, 0.3), 'high': (0.7, 0.9)})
    """

    classes: tuple[str, ...]

    def __new__(cls, classes: Sequence[str], pairs: Iterable[tuple[float, float]]) -> ClassIntervals:
        obj = super().__new__(cls, tuple((float(lo), float(hi)) for lo, hi in pairs))
        names = tuple(str(c) for c in classes)
        if len(names) != len(obj):
            raise HeroEvalError(f"{len(obj)} intervals for {len(names)} classes")
        obj.classes = names
        return obj

    @overload
    def __getitem__(self, key: SupportsIndex | str) -> tuple[float, float]: ...

    @overload
    def __getitem__(self, key: slice) -> tuple[tuple[float, float], ...]: ...

    def __getitem__(self, key: SupportsIndex | str | slice) -> tuple[float, float] | tuple[tuple[float, float], ...]:
        if isinstance(key, str):
            if key not in self.classes:
                raise KeyError(f"no class {key!r}; the classes are {list(self.classes)}")
            return tuple.__getitem__(self, self.classes.index(key))
        return tuple.__getitem__(self, key)

    def __getnewargs__(self) -> tuple[tuple[str, ...], tuple[tuple[float, float], ...]]:
        return self.classes, tuple(self)

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {c: {"ci_low": lo, "ci_high": hi} for c, (lo, hi) in zip(self.classes, self, strict=True)}

    def __repr__(self) -> str:
        return f"ClassIntervals({dict(zip(self.classes, tuple(self), strict=True))!r})"
