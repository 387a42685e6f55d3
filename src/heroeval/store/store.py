"""The :class:`Store`: an embedded DuckDB file of evaluation rounds, cached calibrations and pins.

What it guarantees (docs/store.md has the details and the tests behind each):

* adding a round is one transaction: after a crash (even ``kill -9``) the
  store holds exactly what it held before the add;
* the same content (items, labels, gold, covariates, whatever the file format
  or row order) is stored once: adding it again changes nothing and says so;
* every row of an added file is used or counted: the ingest report of every
  add is kept with the round;
* removing a round leaves an audit line in the store's log;
* Stage A fits are cached, keyed by the rounds they used (their names and
  content hashes) and the settings; a pinned calibration is kept verbatim and
  can be refitted from its rounds to check it reproduces;
* a locked, damaged, foreign or newer store file gives a :class:`StoreError`
  naming the file; it is never rebuilt.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Unpack, cast

import numpy as np

from heroeval.checks.drift import check_drift
from heroeval.errors import HeroEvalError, HeroEvalWarning, TransportabilityWarning
from heroeval.estimators.collection import EstimateCollection
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.read import read_annotations, read_item_groups
from heroeval.ingest.tables import TableLike
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.settings import EM_SETTING_KEYS
from heroeval.store._db import StoreError, connect, transaction
from heroeval.store._gold import (
    GoldAdded,
    drop_design,
    same_annotations,
    with_expert_labels,
    with_stored_design,
    write_gold,
)
from heroeval.store._results import (
    AddResult,
    RoundReadOptions,
    StoreCalibration,
    StoreEstimate,
    gold_rates,
    one_round,
)
from heroeval.store._rounds import (
    ITEM_SEP,
    ROLES,
    RoundInfo,
    RoundList,
    calibration_key,
    content_hash,
    drop_groups,
    groups_digest,
    read_rounds,
    write_round,
)
from heroeval.store.trend import (
    METHODS,
    DriftRow,
    Trend,
    TrendSource,
    trend_from_fit,
    trend_from_recommendations,
    trend_pairs,
)
from heroeval.version import __version__
from heroeval.workflows.api import calibrate, estimate
from heroeval.workflows.comparing import compare

__all__ = [
    "DEFAULT_SETTINGS",
    "HISTORY_IN_MEMORY",
    "AddResult",
    "GoldAdded",
    "RoundReadOptions",
    "Store",
    "StoreCalibration",
    "StoreEstimate",
]

DEFAULT_SETTINGS: dict[str, Any] = {"history_weight": 1.0, "checks": True, "seed": 0}
"""Stage A settings of the store's calibrations: the model checks are kept, so ``method="auto"`` works from the cache."""

_SETTING_KEYS = (*EM_SETTING_KEYS, "variance", "history_weight", "checks", "check_folds", "seed")

Fitter = Callable[[Sequence[str], Mapping[str, Any]], Calibration]
"""Stage A on the named rounds with the given settings, outside memory (``Store.calibrate(fitter=...)``)."""

HISTORY_IN_MEMORY = 5_000_000
"""``Store.estimate(history=None)`` loads the history (for ``hero_joint``) when it has at most this many annotations."""

_TEST_HOOK: Callable[[str], None] | None = None
"""Called with the name of each step of an add inside its transaction (the crash tests use it)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _settings(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    s = dict(DEFAULT_SETTINGS)
    for k, v in (extra or {}).items():
        if k not in _SETTING_KEYS:
            raise StoreError(f"unknown calibration setting {k!r}; known: {', '.join(_SETTING_KEYS)}")
        s[k] = v
    return s


@dataclass(frozen=True)
class _Fit:
    cal: Calibration
    key: str
    status: Literal["cached", "fitted"]
    seconds: float
    history: AnnotationSet | None = field(default=None, repr=False)


class Store:
    """An embedded store of evaluation rounds (a DuckDB file, ``hero.duckdb`` by default).

    Parameters
    ----------
    path : path, default "hero.duckdb"
        The store file; created by the first :meth:`add`.
    wait : float, default 5
        Seconds to wait for another process that has the file open before
        failing with a :class:`StoreError` that says so.

    Examples
    --------
    >>> import heroeval as he, tempfile, os
    >>> from heroeval.simulate import paper_dgp
    >>> d = paper_dgp(1)
    >>> st = he.Store(os.path.join(tempfile.mkdtemp(), "hero.duckdb"))
    >>> [r.name for r in st.add(d.history, name="v1").added]
    ['v1']
    >>> st.add(d.history, name="v1-again").lines()[0][:40]
    "round 'v1-again' not added: the same con"
    """

    def __init__(self, path: str | os.PathLike[str] = "hero.duckdb", *, wait: float = 5.0,
                 fitter: Fitter | None = None) -> None:
        self.path = Path(path)
        self.wait = float(wait)
        self.fitter = fitter  # new fits by fitter(rounds, settings) (Dask, from an export); None: in memory
        if self.path.exists():
            with connect(self.path, write=False, wait=self.wait):
                pass

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def _con(self, write: bool = False) -> Any:
        return connect(self.path, write=write, wait=self.wait)

    # ------------------------------------------------------------------ rounds
    def add(
        self,
        annotations: TableLike | AnnotationSet,
        *,
        name: str | None = None,
        gold: TableLike | None = None,
        model: str | None = None,
        date: str | None = None,
        tags: Sequence[str] = (),
        role: str = "auto",
        split_rounds: bool = False,
        **read_options: Unpack[RoundReadOptions],
    ) -> AddResult:
        """Read a round with :func:`heroeval.read_annotations` and add it in one transaction.

        ``name`` defaults to the file's stem. A file whose ``round`` column
        names several rounds is an error unless ``split_rounds``: then each
        becomes its own store round, named by the column (``name`` is then a
        prefix), each added in its own transaction. Content already in the
        store is reported in :attr:`AddResult.duplicates` and not added.
        ``role``: ``auto`` (history when the round has gold), ``history`` or
        ``current`` (never calibrated on). ``read_options``: the round's ``covariates`` and
        :func:`heroeval.read_annotations`' keyword options (column names, row rules, engine).
        ``group_col``: a column of the annotations file that groups the round's items (prompt, query,
        topic); the groups are stored with the round, so that its estimates, the history's calibration and
        the trend are cluster-robust by group as ``hero estimate --group-col`` is (an AnnotationSet brings
        its own groups, :meth:`AnnotationSet.with_groups`). Groups are not part of the round's content: the
        same annotations added again with other groups are a duplicate.
        """
        if role not in ROLES:
            raise StoreError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        opts: dict[str, Any] = dict(read_options)
        group_col = opts.pop("group_col", None)
        if isinstance(annotations, AnnotationSet):
            ds = annotations
            source = ds.name
        else:
            ds = read_annotations(annotations, gold=gold, name=name, **opts)
            source = str(annotations) if isinstance(annotations, (str, os.PathLike)) else ds.name
            if group_col is not None:
                ic = opts.get("item_col")
                ds = ds.with_groups(read_item_groups(annotations, group_col, item_col=ic if isinstance(ic, str)
                                                     else None))
        if group_col is not None and isinstance(annotations, AnnotationSet):
            raise StoreError("group_col reads a column of an annotations file; an AnnotationSet brings its own "
                             "groups (AnnotationSet.with_groups)")
        base = name if name is not None else ds.name
        if ds.n_rounds > 1 and not split_rounds:
            raise StoreError(f"{source} holds {ds.n_rounds} rounds in its round column "
                             f"({', '.join(ds.round_ids[:5])}{', ...' if ds.n_rounds > 5 else ''}); add them one "
                             "by one, or split them (--split-rounds, split_rounds=True)")
        if ds.n_items == 0:
            raise StoreError(f"{source}: no annotation left to add (see its ingest report)")
        parts: list[tuple[str, AnnotationSet, str | None]] = []
        if split_rounds and ds.n_rounds > 1:
            for g, rname in enumerate(ds.round_ids):
                sub = ds.take_items(np.flatnonzero(ds.item_round == g), name=rname)
                sub = one_round(sub)
                parts.append(((name or "") + rname if name else rname, sub, model or rname))
        else:
            parts.append((base, one_round(ds), model))
        added, dups = [], []
        for pname, pds, pmodel in parts:
            info = self._add_one(pds, pname, pmodel, date, tuple(tags), role, source)
            if isinstance(info, tuple):
                dups.append(info)
            else:
                added.append(info)
        return AddResult(tuple(added), tuple(dups))

    def _add_one(self, ds: AnnotationSet, name: str, model: str | None, date: str | None, tags: tuple[str, ...],
                 role: str, source: str) -> RoundInfo | tuple[str, RoundInfo]:
        if not name or not name.strip():
            raise StoreError("a round needs a non-empty name")
        chash = content_hash(ds)
        ingest = json.dumps(ds.report.to_dict())
        twins = (self._twins(ds, [r.name for r in self.rounds() if r.content_hash != chash])
                 if self.path.exists() else [])
        if twins:
            warnings.warn(f"round {name!r} holds the same annotations as round(s) {', '.join(map(repr, twins))} "
                          "(other gold or covariates): it is one round stored twice. Estimating one against a "
                          "history holding the other would calibrate it on its own labels, so the store leaves such "
                          "twins out of each other's calibrations; to add expert labels to a stored round, use "
                          "hero store gold NAME FILE (Store.add_gold)", HeroEvalWarning, stacklevel=3)
        with self._con(write=True) as con:
            def body() -> RoundInfo | tuple[str, RoundInfo]:
                same = con.execute(f"SELECT {_COLS} FROM rounds WHERE content_hash = ?", [chash]).fetchone()
                if same is not None:
                    stored = RoundInfo.from_row(same)
                    _log(con, "add-duplicate", name, chash, {"stored_as": stored.name, "source": source})
                    return (name, stored)
                if con.execute("SELECT 1 FROM rounds WHERE name = ?", [name]).fetchone():
                    raise StoreError(f"a round named {name!r} is already in {self.path} with other content; "
                                     "choose another name, or remove it first (hero store rm)")
                rid = int(con.execute("SELECT coalesce(max(id), 0) + 1 FROM rounds").fetchone()[0])
                write_round(con, rid, ds, _TEST_HOOK)
                con.execute("INSERT INTO rounds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [rid, name, model, date, json.dumps(list(tags)), role, chash, source, _now(), ds.n_items,
                             ds.n_annotations, ds.n_gold, ds.n_labelers, json.dumps(list(ds.covariate_names)), ingest])
                _log(con, "add", name, chash, {"source": source, "items": ds.n_items, "annotations": ds.n_annotations,
                                               "gold": ds.n_gold, "role": role})
                if _TEST_HOOK is not None:
                    _TEST_HOOK("before-commit")
                return _round(con, name)
            out: RoundInfo | tuple[str, RoundInfo] = transaction(con, self.path, body)
            return out

    def rounds(self) -> RoundList:
        """Every round, in the order added."""
        if not self.path.exists():
            return RoundList((), str(self.path))
        with self._con() as con:
            rows = con.execute(f"SELECT {_COLS} FROM rounds ORDER BY id").fetchall()
        return RoundList(tuple(RoundInfo.from_row(r) for r in rows), str(self.path))

    def round(self, name: str) -> RoundInfo:
        """One round's record (with its ingest report)."""
        with self._con() as con:
            return _round(con, name)

    def remove(self, name: str, *, force: bool = False) -> RoundInfo:
        """Remove a round (one transaction); the store's log keeps an audit line.

        A round used by a pinned calibration is kept unless ``force``: the pin
        could not be reproduced without it.
        """
        with self._con(write=True) as con:
            def body() -> RoundInfo:
                r = _round(con, name)
                pins = [p for p, rounds in con.execute("SELECT name, rounds FROM pins").fetchall()
                        if any(h == r.content_hash for _, h in json.loads(rounds))]
                if pins and not force:
                    raise StoreError(f"round {name!r} is used by the pinned calibration(s) {pins}: removing it "
                                     "would keep them from being reproduced. Unpin them, or force the removal.")
                con.execute("DELETE FROM annotations WHERE round_id = ?", [r.id])
                con.execute("DELETE FROM items WHERE round_id = ?", [r.id])
                drop_design(con, r.id)
                drop_groups(con, r.id)
                con.execute("DELETE FROM rounds WHERE id = ?", [r.id])
                _log(con, "remove", name, r.content_hash, {"items": r.n_items, "annotations": r.n_annotations,
                                                           "gold": r.n_gold, "pins_affected": pins})
                return r
            out: RoundInfo = transaction(con, self.path, body)
            return out

    def set_role(self, name: str, role: str) -> RoundInfo:
        """Mark a round as ``history`` (calibrate on it), ``current`` (never) or ``auto`` (history if it has gold)."""
        if role not in ROLES:
            raise StoreError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        with self._con(write=True) as con:
            def body() -> RoundInfo:
                r = _round(con, name)
                con.execute("UPDATE rounds SET role = ? WHERE id = ?", [role, r.id])
                _log(con, "role", name, r.content_hash, {"from": r.role, "to": role})
                return _round(con, name)
            out: RoundInfo = transaction(con, self.path, body)
            return out

    def log(self) -> list[dict[str, Any]]:
        """The store's audit log: every add, duplicate add, removal, role change and pin, oldest first."""
        with self._con() as con:
            rows = con.execute("SELECT seq, logged_at, action, round, content_hash, detail FROM log ORDER BY seq").fetchall()
        return [{"seq": s, "at": at, "action": a, "round": r, "content_hash": h, "detail": json.loads(d)}
                for s, at, a, r, h, d in rows]

    def load(self, names: str | Sequence[str], *, name: str | None = None) -> AnnotationSet:
        """Rounds as one :class:`AnnotationSet` (several rounds: items named ``<round>/<item_id>``)."""
        wanted = [names] if isinstance(names, str) else list(names)
        with self._con() as con:
            infos = [_round(con, n) for n in wanted]
            ds = read_rounds(con, infos, name=name or ",".join(wanted), namespaced=len(infos) > 1)
            return with_stored_design(con, infos[0].id, ds) if len(infos) == 1 else ds

    def add_gold(self, name: str, gold: TableLike, *, design: TableLike | None = None, gold_col: str | None = None,
                 gold_item_col: str | None = None, encoding: str | None = None) -> GoldAdded:
        """Add expert labels to a stored round's items (one transaction): ``hero store gold NAME FILE``.

        ``gold`` is read as ``hero estimate --current-gold`` reads it (``item_id``,
        ``gold``, optionally ``pi``, the inclusion probabilities of ``hero select``'s
        design; or ``design``, a separate table of them). Items the round does not
        have, or a label contradicting gold the round already holds, are a
        :class:`StoreError` and nothing changes. The round's content hash changes
        with its gold, so cached calibrations that used it are refitted. A round of
        role ``auto`` that had no gold joins the history of the other rounds'
        calibrations (:attr:`GoldAdded.joined_history`); it is always left out of
        the calibration that estimates it.
        """
        stored = self.load(name)
        before = self.round(name)
        ds, n_new, n_again = with_expert_labels(stored, gold, design=design, gold_col=gold_col,
                                                gold_item_col=gold_item_col, encoding=encoding)
        chash = content_hash(ds)
        with self._con(write=True) as con:
            def body() -> RoundInfo:
                r = _round(con, name)
                if r.content_hash != before.content_hash:
                    raise StoreError(f"round {name!r} changed while its gold was read; retry")
                other = con.execute("SELECT name FROM rounds WHERE content_hash = ? AND id <> ?", [chash, r.id]).fetchone()
                if other is not None:
                    raise StoreError(f"with these expert labels round {name!r} would hold the same content as round "
                                     f"{other[0]!r}; nothing was changed")
                write_gold(con, r.id, ds)
                con.execute("UPDATE rounds SET content_hash = ?, n_gold = ? WHERE id = ?", [chash, ds.n_gold, r.id])
                _log(con, "gold", name, chash, {"new": n_new, "already": n_again, "gold": ds.n_gold,
                                                "design": ds.gold_pi is not None, "previous_hash": r.content_hash})
                return _round(con, name)
            after: RoundInfo = transaction(con, self.path, body)
        return GoldAdded(after, n_new, n_again, ds.gold_pi is not None, after.in_history and not before.in_history)

    def _twins(self, data: AnnotationSet, names: Sequence[str]) -> list[str]:
        """History rounds among ``names`` that hold ``data``'s annotations (a round stored twice)."""
        by = {r.name: r for r in self.rounds()}
        cand = [by[n] for n in names if n in by and by[n].n_items == data.n_items
                and by[n].n_annotations == data.n_annotations and by[n].n_labelers == data.n_labelers]
        return same_annotations(data, [(r, self.load(r.name)) for r in cand])

    def history(self, *, exclude: Sequence[str] = ()) -> tuple[str, ...]:
        """The names of the history rounds (role ``history``, or ``auto`` with gold), minus ``exclude``."""
        return tuple(r.name for r in self.rounds() if r.in_history and r.name not in exclude)

    # ------------------------------------------------------------ calibrations
    def _fit(self, rounds: Sequence[str], settings: Mapping[str, Any], *, keep_history: bool = False,
             refit: bool = False) -> _Fit:
        fitter = self.fitter
        if not rounds:
            raise StoreError(f"{self.path} has no history round to calibrate on: add a round with gold "
                             "(--gold), or mark rounds as history (hero store role NAME history)")
        with self._con() as con:
            infos = [_round(con, n) for n in rounds]
            key = calibration_key(infos, settings, groups_digest(con, infos))
            row = None if refit else con.execute("SELECT calibration FROM calibrations WHERE key = ?",
                                                 [key]).fetchone()
            hist = None
            if (row is None and fitter is None) or keep_history:
                hist = read_rounds(con, infos, name="store history", namespaced=True)
        if row is not None:
            cal = Calibration.from_dict(json.loads(row[0]), source=f"{self.path} (calibration {key[:12]})")
            return _Fit(cal, key, "cached", 0.0, hist)
        t0 = time.perf_counter()
        cal = fitter(rounds, settings) if fitter is not None else calibrate(cast(AnnotationSet, hist), **settings)
        secs = time.perf_counter() - t0
        with self._con(write=True) as con:
            def body() -> None:
                con.execute("DELETE FROM calibrations WHERE key = ?", [key])
                con.execute("INSERT INTO calibrations VALUES (?, ?, ?, ?, ?, ?)",
                            [key, json.dumps([[r.name, r.content_hash] for r in infos]), json.dumps(dict(settings)),
                             cal.to_json(indent=None), _now(), secs])
            transaction(con, self.path, body)
        return _Fit(cal, key, "fitted", secs, hist)

    def calibrate(self, *, rounds: Sequence[str] | None = None, refit: bool = False,
                  **settings: Any) -> StoreCalibration:
        """Stage A on the history (or on ``rounds``): the cached fit when the rounds and settings match, else a new one
        (by :attr:`fitter` when the store has one; else in memory)."""
        names = tuple(rounds) if rounds is not None else self.history()
        s = _settings(settings)
        f = self._fit(names, s, refit=refit)
        return StoreCalibration(f.cal, f.key, names, s, f.status, f.seconds)

    def pin(self, name: str, *, note: str = "", rounds: Sequence[str] | None = None,
            **settings: Any) -> StoreCalibration:
        """Pin the calibration of the history (or ``rounds``) under ``name``: kept verbatim, reproducible."""
        sc = self.calibrate(rounds=rounds, **settings)
        with self._con(write=True) as con:
            def body() -> None:
                if con.execute("SELECT 1 FROM pins WHERE name = ?", [name]).fetchone():
                    raise StoreError(f"a pin named {name!r} exists in {self.path}; pins are not overwritten "
                                     "(unpin it first)")
                infos = [_round(con, n) for n in sc.rounds]
                con.execute("INSERT INTO pins VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [name, sc.key, note, json.dumps([[r.name, r.content_hash] for r in infos]),
                             json.dumps(dict(sc.settings)), sc.calibration.to_json(indent=None), _now()])
                _log(con, "pin", None, None, {"pin": name, "key": sc.key, "rounds": list(sc.rounds), "note": note})
            transaction(con, self.path, body)
        return sc

    def unpin(self, name: str) -> None:
        with self._con(write=True) as con:
            def body() -> None:
                if not con.execute("SELECT 1 FROM pins WHERE name = ?", [name]).fetchone():
                    raise StoreError(f"no pin named {name!r} in {self.path}")
                con.execute("DELETE FROM pins WHERE name = ?", [name])
                _log(con, "unpin", None, None, {"pin": name})
            transaction(con, self.path, body)

    def pins(self) -> list[dict[str, Any]]:
        """The pinned calibrations: name, key, note, rounds, settings, when."""
        with self._con() as con:
            rows = con.execute("SELECT name, key, note, rounds, settings, created_at FROM pins ORDER BY created_at, "
                               "name").fetchall()
        return [{"name": n, "key": k, "note": note, "rounds": [r for r, _ in json.loads(rs)],
                 "settings": json.loads(s), "created_at": at} for n, k, note, rs, s, at in rows]

    def pinned(self, name: str) -> Calibration:
        """The pinned calibration, exactly as it was saved."""
        with self._con() as con:
            row = con.execute("SELECT calibration FROM pins WHERE name = ?", [name]).fetchone()
        if row is None:
            raise StoreError(f"no pin named {name!r} in {self.path}")
        return Calibration.from_dict(json.loads(row[0]), source=f"{self.path} (pin {name!r})")

    def reproduce(self, name: str) -> dict[str, Any]:
        """Refit a pinned calibration from its rounds and compare: the largest difference of any parameter."""
        with self._con() as con:
            row = con.execute("SELECT rounds, settings FROM pins WHERE name = ?", [name]).fetchone()
            if row is None:
                raise StoreError(f"no pin named {name!r} in {self.path}")
            pairs = json.loads(row[0])
            for rname, h in pairs:
                got = con.execute("SELECT name FROM rounds WHERE content_hash = ?", [h]).fetchone()
                if got is None or got[0] != rname:
                    raise StoreError(f"pin {name!r} used round {rname!r} (content {h[:12]}), which is no longer in "
                                     f"{self.path}: it cannot be refitted")
        old = self.pinned(name)
        new = self._fit([r for r, _ in pairs], json.loads(row[1]), refit=True).cal
        diffs = [np.max(np.abs(a - b), initial=0.0) for a, b in
                 ((old.alpha, new.alpha), (old.beta, new.beta), (old.round_prevalence, new.round_prevalence))]
        d = float(max(diffs))
        return {"pin": name, "max_abs_difference": d, "reproduced": d < 1e-6, "rounds": [r for r, _ in pairs]}

    # -------------------------------------------------------------- estimates
    def estimate(
        self,
        target: str | TableLike | AnnotationSet,
        *,
        method: str | Sequence[str] = "all",
        history: bool | None = None,
        covariates: TableLike | None = None,
        refit: bool = False,
        settings: Mapping[str, Any] | None = None,
        current_gold: TableLike | None = None,
        design: TableLike | None = None,
        **kwargs: Any,
    ) -> StoreEstimate:
        """Estimate a round (a stored round's name, a file or an AnnotationSet) against the store's history.

        The calibration is the cached fit of the history rounds (minus the
        round itself when it is one of them), refitted when the history or
        the settings changed; :attr:`StoreEstimate.calibration` says which.
        ``method="all"`` gives every method the inputs allow and the
        recommended estimate, as ``hero estimate`` does. ``hero_joint`` needs
        the history itself: ``history=None`` loads it from the store when it
        has at most :data:`HISTORY_IN_MEMORY` annotations (``True`` always,
        ``False`` never: then the recommended estimate comes from the
        calibration's saved model checks).

        ``current_gold`` (and ``design``): expert labels on some of the round's
        items for this estimate, read as :meth:`add_gold` reads them but not
        stored; a stored round's own gold is used as current gold in any case.
        A history round that holds the same annotations as the round (the round
        stored twice, e.g. re-added under another name with its gold) is left
        out of the calibration, with a note: it would calibrate the round on its
        own labels.
        """
        notes: list[str] = []
        stored = isinstance(target, str) and self._has_round(target)
        if stored:
            assert isinstance(target, str)
            data = self.load(target)
            rname = target
        elif isinstance(target, AnnotationSet):
            data, rname = target, target.name
        else:
            data = read_annotations(target, covariates=covariates, round_col=False, name="current")
            rname = str(target)
        if current_gold is not None:
            data, n_new, _ = with_expert_labels(data, current_gold, design=design)
            notes.append(f"{n_new} expert label(s) given for this estimate ({data.n_gold} gold items in all; not stored)")
        elif design is not None:
            raise StoreError("design goes with current_gold (the expert labels of the selected items)")
        hist_names = self.history(exclude=(rname,) if stored else ())
        if stored and rname not in hist_names and self.round(rname).in_history:
            notes.append(f"round {rname!r} is in the history: it was left out of the calibration that estimates it")
        twins = self._twins(data, hist_names)
        if twins:
            hist_names = tuple(n for n in hist_names if n not in twins)
            notes.append(f"history round(s) {', '.join(map(repr, twins))} hold the same annotations as {rname!r} (the "
                         "round stored twice): left out of its calibration, which would otherwise calibrate the "
                         "round on its own labels. Add expert labels to the round itself: hero store gold")
        s = _settings(settings)
        if history is None:
            n_hist = sum(r.n_annotations for r in self.rounds() if r.name in hist_names)
            history = n_hist <= HISTORY_IN_MEMORY
            if not history:
                notes.append(f"the history has {n_hist} annotations (over {HISTORY_IN_MEMORY}): not loaded, so "
                             "hero_joint is skipped and the recommended estimate uses the saved model checks")
        f = self._fit(hist_names, s, keep_history=history, refit=refit)
        hist = f.history if history else None
        cal = f.cal if history else replace(f.cal, history=None)  # a fit made now carries its history: not asked for
        if data.covariate_names and hist is not None and hist.covariate_names != data.covariate_names:
            notes.append("the history rounds do not all carry this round's covariates: HERO-2 is skipped")
        res = estimate(data, cal, method=method, history=hist, recommend=True, **kwargs)
        sc = StoreCalibration(cal, f.key, tuple(hist_names), s, f.status, f.seconds)
        return StoreEstimate(rname, data, res, sc, hist is not None, tuple(notes))

    def _has_round(self, name: str) -> bool:
        if not self.path.exists():
            return False
        with self._con() as con:
            return con.execute("SELECT 1 FROM rounds WHERE name = ?", [name]).fetchone() is not None

    # ------------------------------------------------------------------ trend
    def trend(
        self,
        rounds: Sequence[str] | None = None,
        *,
        baseline: str | None = None,
        confidence_level: float = 0.95,
        adjust: str = "sidak",
        drift: bool = True,
        settings: Mapping[str, Any] | None = None,
        method: str = "auto",
    ) -> Trend:
        """Each round's rate with simultaneous intervals, the differences, and the labelers round by round.

        ``method="auto"`` (the default): each round's rate is its recommended
        estimate, exactly what :meth:`estimate` (``hero store estimate``)
        gives it (method, estimate, interval, ``"unreliable"`` status and
        reason): its marginal interval is the recommended interval, its
        simultaneous one the recommended interval at the adjusted level (see
        :func:`heroeval.store.trend.trend_from_recommendations`). Each
        difference is :func:`heroeval.compare`'s recommended difference of the
        two rounds on the cached calibration of the history without either,
        its p-value adjusted by Holm's method.

        ``method="joint"``: all rounds are estimated in one Stage A fit (cached like any
        calibration): the trend's rounds and the history rounds, each round its
        own prevalence, gold items entering with their gold label, labelers
        sharing one sensitivity and specificity. A round's rate is its
        prevalence in that fit (for a round without gold it is HERO joint's
        estimate), so every rate and every difference comes from one parameter
        covariance, the history's uncertainty included once. ``baseline``:
        differences from the previous round (default) or from the named round.
        ``adjust``: ``"sidak"`` (default), ``"bonferroni"``, ``"maxz"`` or
        ``"none"`` (see :func:`heroeval.store.trend.critical_value`). ``drift``
        runs :func:`heroeval.check_drift` on each round against the history
        without that round.
        """
        allr = self.rounds()
        names = list(rounds) if rounds is not None else list(allr.names)
        if not names:
            raise StoreError(f"{self.path} holds no round")
        by = {r.name: r for r in allr}
        for n in names:
            if n not in by:
                raise StoreError(f"no round named {n!r} in {self.path}")
        if method not in METHODS:
            raise StoreError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if method == "auto":
            return self._auto_trend(names, by, baseline=baseline, confidence_level=confidence_level, adjust=adjust,
                                    drift=drift, settings=settings)
        fit_names = names + [r.name for r in allr if r.in_history and r.name not in names]
        s = _settings({"checks": False, **(settings or {})})
        f = self._fit(fit_names, s)
        rows: list[DriftRow] = []
        notes: list[str] = []
        if drift:
            rows, notes = self._drift(names, by, s)
        with self._con() as con:
            gm = dict(con.execute("SELECT r.name, avg(i.gold) FROM items i JOIN rounds r ON r.id = i.round_id "
                                  "WHERE i.gold IS NOT NULL GROUP BY r.name").fetchall())
        return trend_from_fit(
            f.cal, [by[n] for n in names], baseline=baseline, confidence_level=confidence_level, adjust=adjust,
            source=TrendSource(str(self.path), f.key, f.status), drift=rows, notes=notes,
            gold_means={k: float(v) for k, v in gm.items()})

    def _auto_trend(self, names: list[str], by: Mapping[str, RoundInfo], *, baseline: str | None,
                    confidence_level: float, adjust: str, drift: bool,
                    settings: Mapping[str, Any] | None) -> Trend:
        pairs = trend_pairs(names, baseline)  # the baseline checked before any fit
        recs: dict[str, Any] = {}
        keys: list[str] = []
        statuses: list[str] = []
        for n in names:  # exactly what hero store estimate n gives
            try:
                with warnings.catch_warnings():  # the drift rows below report the labelers' drift
                    warnings.simplefilter("ignore", TransportabilityWarning)
                    se = self.estimate(n, settings=settings)
            except HeroEvalError as exc:
                recs[n] = str(exc)
                continue
            keys.append(se.calibration.key)
            statuses.append(se.calibration.status)
            res = se.estimates
            rec = res.recommended if isinstance(res, EstimateCollection) else None
            recs[n] = rec if rec is not None else (
                res.skipped.get("auto", "no recommendation") if isinstance(res, EstimateCollection) else "none")
        s = _settings(settings)
        diffs: dict[tuple[str, str], Any] = {}
        for a, b in pairs:
            hist_names = self.history(exclude=(a, b))
            try:
                f = self._fit(hist_names, s, keep_history=True)
                statuses.append(f.status)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TransportabilityWarning)
                    diffs[(a, b)] = compare(self.load(a), self.load(b), f.cal, method="auto", history=f.history)
            except HeroEvalError as exc:
                diffs[(a, b)] = str(exc)
        rows: list[DriftRow] = []
        notes: list[str] = []
        if drift:
            rows, notes = self._drift(names, by, s)  # the history without each round: the estimates' cached fits
        with self._con() as con:
            gm = dict(con.execute("SELECT r.name, avg(i.gold) FROM items i JOIN rounds r ON r.id = i.round_id "
                                  "WHERE i.gold IS NOT NULL GROUP BY r.name").fetchall())
        key = keys[0] if len(set(keys)) == 1 else "per-round"  # each round: the history without it
        status = "fitted" if "fitted" in statuses else "cached"
        return trend_from_recommendations(
            [by[n] for n in names], recs, diffs, baseline=baseline, confidence_level=confidence_level,
            adjust=adjust, source=TrendSource(str(self.path), key, status), drift=rows, notes=notes,
            gold_means={k: float(v) for k, v in gm.items()})

    def _drift(self, names: Sequence[str], by: Mapping[str, RoundInfo],
               settings: Mapping[str, Any]) -> tuple[list[DriftRow], list[str]]:
        import warnings

        rows: list[DriftRow] = []
        notes: list[str] = []
        for n in names:
            hist = self.history(exclude=(n,))
            if not hist:
                notes.append(f"drift of {n!r}: no other history round to compare with")
                continue
            f = self._fit(hist, settings)
            data = self.load(n)
            known = set(f.cal.labeler_ids)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    dc = check_drift(data, f.cal, warn=False)
                except Exception as exc:  # a round the check cannot test (one labeler, none known)
                    notes.append(f"drift of {n!r} not tested: {exc}")
                    continue
            rates = gold_rates(data)
            for k, lab in enumerate(dc.labeler_ids):
                sens, spec, ng = rates.get(lab, (math.nan, math.nan, 0))
                rows.append(DriftRow(n, lab, int(dc.n_annotations[k]), float(dc.observed[k]), float(dc.expected[k]),
                                     float(dc.z[k]), float(dc.p_adjusted[k]), lab in dc.flagged, sens, spec, ng,
                                     float(dc.overall_p)))
            for lab in data.labeler_ids:
                if str(lab) not in known:
                    notes.append(f"labeler {lab!r} in round {n!r} is unknown to the rest of the history: not tested")
        return rows, notes

    # ----------------------------------------------------------------- export
    def export(self, directory: str | os.PathLike[str], rounds: Sequence[str] | None = None) -> dict[str, Any]:
        """Write the rounds as a Parquet dataset partitioned by round, which the DuckDB and Dask readers take.

        Layout: ``annotations/round_id=<k>/part-0.parquet`` (``item_id,
        labeler_id, label, round``; items named ``<round>/<item_id>``),
        ``gold.parquet`` (``item_id, gold``), ``covariates.parquet`` when every
        round has the same covariates, and ``rounds.json`` (the rounds'
        records). Read it back with
        ``he.read_annotations(f"{dir}/annotations/*/*.parquet", gold=f"{dir}/gold.parquet", engine="duckdb")``.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        out = Path(directory)
        ann_dir = out / "annotations"
        if ann_dir.exists() and any(ann_dir.iterdir()):
            raise StoreError(f"{ann_dir} is not empty: export into a new directory")
        ann_dir.mkdir(parents=True, exist_ok=True)
        infos = [r for r in self.rounds() if rounds is None or r.name in rounds]
        gold_ids: list[str] = []
        gold_vals: list[int] = []
        cov_names = infos[0].covariate_names if infos else ()
        same_cov = bool(cov_names) and all(r.covariate_names == cov_names for r in infos)
        cov_frames = []
        n_ann = 0
        with self._con() as con:
            for r in infos:
                ds = read_rounds(con, [r], name=r.name, namespaced=True)
                item = ds.item_ids[ds.annotation_item]
                t = pa.table({"item_id": pa.array(item.tolist(), type=pa.string()),
                              "labeler_id": pa.array(ds.labeler_ids[ds.labeler].tolist(), type=pa.string()),
                              "label": pa.array(ds.label.astype(np.int8)),
                              "round": pa.array([r.name] * ds.n_annotations, type=pa.string())})
                part = ann_dir / f"round_id={r.id}"
                part.mkdir()
                pq.write_table(t, part / "part-0.parquet")
                n_ann += ds.n_annotations
                g = ds.gold >= 0
                gold_ids += ds.item_ids[g].tolist()
                gold_vals += ds.gold[g].tolist()
                if same_cov and ds.covariates is not None:
                    cov_frames.append(pa.table({"item_id": pa.array(ds.item_ids.tolist(), type=pa.string()),
                                                **{c: pa.array(ds.covariates[:, k])
                                                   for k, c in enumerate(ds.covariate_names)}}))
        pq.write_table(pa.table({"item_id": pa.array(gold_ids, type=pa.string()),
                                 "gold": pa.array(np.asarray(gold_vals, dtype=np.int8))}), out / "gold.parquet")
        if cov_frames:
            pq.write_table(pa.concat_tables(cov_frames), out / "covariates.parquet")
        manifest = {"format": "heroeval-store-export", "heroeval_version": __version__, "store": str(self.path),
                    "exported_at": _now(), "item_id": f"<round>{ITEM_SEP}<item_id>",
                    "rounds": [{**r.to_dict(), "partition": f"round_id={r.id}"} for r in infos]}
        (out / "rounds.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return {"directory": str(out), "rounds": len(infos), "annotations": n_ann, "gold_items": len(gold_ids),
                "covariates": bool(cov_frames),
                "read_with": f"he.read_annotations('{out}/annotations/*/*.parquet', gold='{out}/gold.parquet', "
                             "engine='duckdb')"}


_COLS = ("id, name, model, date, tags, role, content_hash, source, added_at, n_items, n_annotations, n_gold, "
         "n_labelers, covariate_names, ingest")


def _round(con: Any, name: str) -> RoundInfo:
    row = con.execute(f"SELECT {_COLS} FROM rounds WHERE name = ?", [name]).fetchone()
    if row is None:
        names = [r[0] for r in con.execute("SELECT name FROM rounds ORDER BY id").fetchall()]
        raise StoreError(f"no round named {name!r} in the store (rounds: {', '.join(map(repr, names[:10]))}"
                         f"{', ...' if len(names) > 10 else ''})")
    return RoundInfo.from_row(row)


def _log(con: Any, action: str, rnd: str | None, chash: str | None, detail: Mapping[str, Any]) -> None:
    seq = int(con.execute("SELECT coalesce(max(seq), 0) + 1 FROM log").fetchone()[0])
    con.execute("INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)", [seq, _now(), action, rnd, chash, json.dumps(detail)])
