"""Drivers of generators that ask for an evaluation at each point they yield: one at a time, or several in
lockstep so that one call evaluates the points of all (Stage A's Newton steps,
:func:`heroeval.stage_a.two_coin.newton_steps`, whose model-check refits share one pass over the annotations)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TypeVar

__all__ = ["drive", "drive_many"]

X = TypeVar("X")
S = TypeVar("S")
R = TypeVar("R")


def drive(gen: Generator[X, S, R], evaluate: Callable[[X], S]) -> R:
    """Run ``gen`` to its end, sending it ``evaluate(x)`` for each point ``x`` it yields; its return value."""
    try:
        x = next(gen)
        while True:
            x = gen.send(evaluate(x))
    except StopIteration as done:
        out: R = done.value
        return out


def drive_many(gens: Sequence[Generator[X, S, R]], evaluate_many: Callable[[list[int], list[X]], list[S]]) -> list[R]:
    """Run several generators in lockstep: ``evaluate_many(which, points)`` gives the evaluations at the points the
    unfinished ones (``which``, their positions in ``gens``) ask for, in one call; their return values in order."""
    pending = {i: next(g) for i, g in enumerate(gens)}
    out: dict[int, R] = {}
    while pending:
        which = list(pending)
        for i, sums in zip(which, evaluate_many(which, [pending[i] for i in which]), strict=True):
            try:
                pending[i] = gens[i].send(sums)
            except StopIteration as done:
                out[i] = done.value
                del pending[i]
    return [out[i] for i in range(len(gens))]
