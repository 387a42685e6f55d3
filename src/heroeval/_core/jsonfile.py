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
