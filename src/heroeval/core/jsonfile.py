"""Reading a versioned JSON file (calibrations): one error class, messages that name the file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from heroeval.errors import CalibrationFileError


def read_json(path: str | os.PathLike[str]) -> tuple[Any, Path]:
    """The parsed content of ``path`` and the path; a :class:`CalibrationFileError` naming the file otherwise."""
    p = Path(path)
    if not p.exists():
        raise CalibrationFileError(f"calibration file {str(p)!r} does not exist")
    try:
        return json.loads(p.read_text(encoding="utf-8")), p
    except json.JSONDecodeError as exc:
        raise CalibrationFileError(f"{p}: not valid JSON ({exc})") from exc


#: Lists of at least this many numbers are written on one line by :func:`dumps_json`.
INLINE_MIN = 16


def dumps_json(obj: Any, indent: int | None = 1) -> str:
    """``json.dumps(obj, indent=indent, allow_nan=False)``, with long lists of numbers each on one line.

    With an indent, :mod:`json` falls back to its pure-Python encoder and
    writes one number per line; a calibration with model checks holds
    hundreds of thousands of per-item values (0.14 s to write at 1e7
    annotations; 0.08 s here). Every list of at least :data:`INLINE_MIN`
    numbers is encoded by the C encoder, on one line, in place of a
    placeholder: the same numbers (``float.__repr__`` in both encoders), the
    same parsed value, the rest of the layout unchanged. Data holding a NUL
    character is written the plain way.
    """
    if indent is None:
        return json.dumps(obj, allow_nan=False)
    inline: list[str] = []
    nul = False

    def lift(x: Any) -> Any:
        nonlocal nul
        if isinstance(x, str):
            nul = nul or "\x00" in x
            return x
        if isinstance(x, dict):
            nul = nul or any("\x00" in k for k in x if isinstance(k, str))
            return {k: lift(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            if len(x) >= INLINE_MIN and all(type(v) in (int, float) for v in x):
                inline.append(json.dumps(list(x), allow_nan=False))
                return f"\x00{len(inline) - 1}\x00"
            return [lift(v) for v in x]
        return x

    lifted = lift(obj)
    if nul:  # a NUL in the data could be taken for a placeholder: write it the plain way
        return json.dumps(obj, indent=indent, allow_nan=False)
    text = json.dumps(lifted, indent=indent, allow_nan=False)
    if not inline:
        return text
    parts = text.split('"\\u0000')
    out = [parts[0]]
    for part in parts[1:]:
        k, rest = part.split('\\u0000"', 1)
        out.append(inline[int(k)] + rest)
    return "".join(out)
