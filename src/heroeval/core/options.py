"""Keyword options declared once: a public function's optional keywords as a ``TypedDict``, checked in one place.

A public function whose optional keywords travel together (the EM settings, the column names, a simulated
panel's shape) takes them as ``**options: Unpack[SomeOptions]``: the ``TypedDict`` is the one declaration of
their names and types (the type checker and editors read it, so user code keeps calling
``calibrate(history, tol=1e-6)`` and a misspelt keyword is a type error), and :func:`options_of` checks the
names at run time and fills in the defaults, which live in one mapping beside the ``TypedDict``. A test
(``tests/unit/test_keyword_options.py``) keeps every such pair of declarations in step.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

__all__ = ["option_names", "options_of"]


def option_names(declared: type) -> tuple[str, ...]:
    """The keyword names a ``TypedDict`` declares (its own and its bases', which ``__annotations__`` holds),
    in declaration order."""
    return tuple(declared.__annotations__)


def options_of(function: str, given: Mapping[str, Any], declared: type,
               defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword options ``given`` to ``function``, checked against the ``TypedDict`` ``declared`` and
    completed from ``defaults`` (every declared name has one).

    An unknown name raises :class:`TypeError`, as Python does for a misspelt keyword, naming the function
    and the closest declared name.
    """
    names = option_names(declared)
    for name in given:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}{hint}")
    missing = [n for n in names if n not in defaults]
    if missing:  # a declaration error of the library, not the user's
        raise AssertionError(f"{function}: options without a default: {missing}")
    out = {n: defaults[n] for n in names}
    out.update(given)
    return out
