"""The store's DuckDB file: opening it safely, its schema and its version.

Every operation opens the file, does its work and closes it again, so no
process holds the file longer than one operation. DuckDB lets one process
write a file at a time (and no other process read it meanwhile); a second
process that finds the file locked waits up to ``wait`` seconds, then fails
with a :class:`StoreError` that says what to do. A file that is not a
DuckDB database, is damaged, is not a heroeval store, or was written by a
newer heroeval is never rebuilt: the error names the file and stops.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from heroeval.errors import HeroEvalError
from heroeval.version import __version__

__all__ = ["SCHEMA_VERSION", "StoreError", "connect"]

SCHEMA_VERSION = 1
"""The version of the store's tables this heroeval writes and reads (the ``meta`` table records it)."""

_SCHEMA = [
    "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    """CREATE TABLE rounds (
        id INTEGER PRIMARY KEY, name VARCHAR NOT NULL UNIQUE, model VARCHAR, date VARCHAR, tags VARCHAR NOT NULL,
        role VARCHAR NOT NULL, content_hash VARCHAR NOT NULL UNIQUE, source VARCHAR NOT NULL,
        added_at VARCHAR NOT NULL, n_items BIGINT NOT NULL, n_annotations BIGINT NOT NULL, n_gold BIGINT NOT NULL,
        n_labelers INTEGER NOT NULL, covariate_names VARCHAR NOT NULL, ingest VARCHAR NOT NULL)""",
    "CREATE TABLE labelers (id INTEGER PRIMARY KEY, labeler_id VARCHAR NOT NULL UNIQUE)",
    """CREATE TABLE items (round_id INTEGER NOT NULL, item INTEGER NOT NULL, item_id VARCHAR NOT NULL,
        gold TINYINT, covariates DOUBLE[])""",
    "CREATE TABLE annotations (round_id INTEGER NOT NULL, item INTEGER NOT NULL, labeler INTEGER NOT NULL, "
    "label TINYINT NOT NULL)",
    """CREATE TABLE calibrations (key VARCHAR PRIMARY KEY, rounds VARCHAR NOT NULL, settings VARCHAR NOT NULL,
        calibration VARCHAR NOT NULL, created_at VARCHAR NOT NULL, seconds DOUBLE NOT NULL)""",
    """CREATE TABLE pins (name VARCHAR PRIMARY KEY, key VARCHAR NOT NULL, note VARCHAR NOT NULL,
        rounds VARCHAR NOT NULL, settings VARCHAR NOT NULL, calibration VARCHAR NOT NULL, created_at VARCHAR NOT NULL)""",
    """CREATE TABLE log (seq INTEGER PRIMARY KEY, logged_at VARCHAR NOT NULL, action VARCHAR NOT NULL, round VARCHAR,
        content_hash VARCHAR, detail VARCHAR NOT NULL)""",
]
_TABLES = {"meta", "rounds", "labelers", "items", "annotations", "calibrations", "pins", "log"}


class StoreError(HeroEvalError):
    """The store cannot do what was asked: locked, damaged, newer, or a round that is missing or clashes."""


def _locked_message(path: Path, msg: str, wait: float) -> str:
    m = re.search(r"PID (\d+)", msg)
    who = f"process {m.group(1)}" if m else "another process"
    return (f"the store {path} is in use by {who} (DuckDB lets one process at a time write it); waited {wait:g} s. "
            "Wait for that command to finish and retry, or give a longer wait (--wait SECONDS, Store(path, wait=...)). "
            "Nothing was changed.")


@contextmanager
def translate(path: Path) -> Iterator[None]:
    """Turn DuckDB's errors on the store file into a :class:`StoreError` naming it."""
    import duckdb

    try:
        yield
    except StoreError:
        raise
    except duckdb.Error as exc:
        raise StoreError(f"the store {path} cannot be read ({type(exc).__name__}: {exc}). The file may be damaged; "
                         "heroeval leaves it as it is (restore a copy or rebuild it from an export).") from exc


def _open(path: Path, read_only: bool, wait: float) -> Any:
    import duckdb

    deadline = time.monotonic() + max(wait, 0.0)
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise StoreError(_locked_message(path, msg, wait)) from exc
            raise StoreError(f"the store {path} is not a readable DuckDB database ({msg}). heroeval does not rebuild "
                             "it: restore a copy, or move it away and start a new store.") from exc
        except duckdb.Error as exc:
            raise StoreError(f"the store {path} cannot be opened ({type(exc).__name__}: {exc}). heroeval does not "
                             "rebuild it: restore a copy, or move it away and start a new store.") from exc


def _check_schema(con: Any, path: Path, writable: bool) -> None:
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if not tables:
        if not writable:
            raise StoreError(f"{path} is an empty DuckDB file, not a heroeval store yet: `hero store add` fills it")
        con.begin()
        for stmt in _SCHEMA:
            con.execute(stmt)
        con.execute("INSERT INTO meta VALUES ('schema_version', ?), ('created_by', ?)",
                    [str(SCHEMA_VERSION), f"heroeval {__version__}"])
        con.commit()
        return
    if "meta" not in tables:
        raise StoreError(f"{path} is a DuckDB database but not a heroeval store (no 'meta' table); "
                         "it was left as it is. Pass another --store path.")
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    try:
        version = int(row[0]) if row else -1
    except ValueError:
        version = -1
    if version < 1:
        raise StoreError(f"{path}: its schema version is missing or unreadable; it was left as it is")
    if version > SCHEMA_VERSION:
        by = con.execute("SELECT value FROM meta WHERE key = 'created_by'").fetchone()
        raise StoreError(f"{path} was written by a newer heroeval ({by[0] if by else '?'}, store schema {version}); "
                         f"this heroeval ({__version__}) reads schema {SCHEMA_VERSION}. Upgrade heroeval; "
                         "the store was left as it is.")
    missing = _TABLES - tables
    if missing:
        raise StoreError(f"{path}: the heroeval store lacks the tables {sorted(missing)}; it may be damaged "
                         "and was left as it is")


@contextmanager
def connect(path: Path, *, write: bool, wait: float) -> Iterator[Any]:
    """A checked connection to the store; ``write=False`` opens it read-only (the file must exist)."""
    if not write and not path.exists():
        raise StoreError(f"no store at {path}: `hero store add` (or Store.add) creates one")
    if path.exists() and path.is_dir():
        raise StoreError(f"{path} is a directory, not a store file")
    con = _open(path, read_only=not write, wait=wait)
    try:
        with translate(path):
            _check_schema(con, path, write)
            yield con
    finally:
        con.close()


def transaction(con: Any, path: Path, body: Callable[[], Any]) -> Any:
    """Run ``body`` in one transaction: all of it is committed, or none of it."""
    with translate(path):
        con.begin()
        try:
            out = body()
        except BaseException:
            con.rollback()
            raise
        con.commit()
        return out
