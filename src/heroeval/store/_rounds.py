"""Rounds in the store: their record, the content hash, writing one round and reading rounds back.

A round is written as three tables: ``items`` (one row per item: the item's
code within the round, its id, its gold label where known, its covariates),
``annotations`` (round, item code, labeler code, label) and a row of
``rounds`` (name, model, date, tags, role, the content hash, the sizes and
the ingest report as JSON). Labeler ids are coded once for the whole store
(``labelers``). Reading rounds back builds the same int-coded
:class:`~heroeval.ingest.annotations.AnnotationSet` that ingest builds,
directly from these arrays.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport

__all__ = ["FIT_REVISION", "ROLES", "RoundInfo", "RoundList", "calibration_key", "content_hash"]

ROLES = ("auto", "history", "current")
"""A round's role: ``auto`` is history when it has gold; ``history`` always; ``current`` never."""

ITEM_SEP = "/"
"""Items of several rounds read together are named ``<round>/<item_id>`` (item ids repeat across rounds)."""


def content_hash(ds: AnnotationSet) -> str:
    """SHA-256 of a round's content: items, labels, gold and covariates, independent of row order and file format."""
    h = hashlib.sha256()
    h.update(b"heroeval-round-v1\0")

    def strings(xs: Sequence[Any]) -> None:
        b = "\0".join(str(x) for x in xs).encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)

    strings(ds.item_ids.tolist())
    strings(ds.labeler_ids.tolist())
    item_of = ds.annotation_item
    order = np.lexsort((ds.label, ds.labeler, item_of))  # canonical order within each item
    for arr in (ds.item_ptr.astype("<i8"), ds.labeler[order].astype("<i4"), ds.label[order].astype("i1"),
                ds.gold.astype("i1")):
        h.update(np.ascontiguousarray(arr).tobytes())
    strings(ds.covariate_names)
    if ds.covariates is not None:
        h.update(np.ascontiguousarray(ds.covariates, dtype="<f8").tobytes())
    return h.hexdigest()


def _report_from_json(text: str) -> IngestReport:
    obj = json.loads(text)
    return IngestReport(tuple(TableReport(t["table"], t["source"], int(t["rows_read"]), int(t["rows_used"]),
                                          t.get("dropped", {}), t.get("notes", {})) for t in obj["tables"]))


@dataclass(frozen=True)
class RoundInfo:
    """One round in the store: its metadata, sizes, content hash and the ingest report of its add."""

    id: int
    name: str
    model: str | None
    date: str | None
    tags: tuple[str, ...]
    role: str
    content_hash: str
    source: str
    added_at: str
    n_items: int
    n_annotations: int
    n_gold: int
    n_labelers: int
    covariate_names: tuple[str, ...]
    ingest: IngestReport = field(repr=False, compare=False)

    @property
    def in_history(self) -> bool:
        """Whether Stage A calibrates on this round: role ``history``, or ``auto`` with gold."""
        return self.role == "history" or (self.role == "auto" and self.n_gold > 0)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> RoundInfo:
        (rid, name, model, date, tags, role, chash, source, added, n_items, n_ann, n_gold, n_lab, cov, ingest) = row
        return cls(int(rid), str(name), model, date, tuple(json.loads(tags)), str(role), str(chash), str(source),
                   str(added), int(n_items), int(n_ann), int(n_gold), int(n_lab), tuple(json.loads(cov)),
                   _report_from_json(ingest))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "date": self.date, "tags": list(self.tags),
                "role": self.role, "in_history": self.in_history, "content_hash": self.content_hash,
                "source": self.source, "added_at": self.added_at, "n_items": self.n_items,
                "n_annotations": self.n_annotations, "n_gold": self.n_gold, "n_labelers": self.n_labelers,
                "covariates": list(self.covariate_names), "ingest": self.ingest.to_dict()}


ROUND_COLUMNS = ("name", "model", "date", "tags", "role", "in_history", "n_items", "n_annotations", "n_gold",
                 "n_labelers", "added_at", "content_hash")


def html_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A small escaped HTML table for notebooks (``_repr_html_``)."""
    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f"<td>{x:.4f}</td>" if np.isfinite(x) else "<td>–</td>"
        return f"<td>{html.escape(str(x), quote=True)}</td>"

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(cell(x) for x in r) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass(frozen=True)
class RoundList(Sequence[RoundInfo]):
    """The rounds of a store, in the order they were added."""

    rounds: tuple[RoundInfo, ...]
    path: str = ""

    def __getitem__(self, k: Any) -> Any:
        return self.rounds[k]

    def __len__(self) -> int:
        return len(self.rounds)

    def __iter__(self) -> Iterator[RoundInfo]:
        return iter(self.rounds)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rounds)

    def _row(self, r: RoundInfo) -> list[Any]:
        return [r.name, r.model, r.date, ", ".join(r.tags), r.role, r.in_history, r.n_items, r.n_annotations,
                r.n_gold, r.n_labelers, r.added_at, r.content_hash[:12]]

    def to_frame(self) -> pd.DataFrame:
        """One row per round (the content hash shortened to 12 characters)."""
        return pd.DataFrame([self._row(r) for r in self.rounds], columns=list(ROUND_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.path, "rounds": [r.to_dict() for r in self.rounds]}

    def _repr_html_(self) -> str:
        return html_table(ROUND_COLUMNS, [self._row(r) for r in self.rounds],
                          f"{len(self.rounds)} rounds in {self.path}")


# ---------------------------------------------------------------------------
# Writing and reading
# ---------------------------------------------------------------------------


def labeler_codes(con: Any, ids: Sequence[str]) -> npt.NDArray[np.int32]:
    """The store's codes of ``ids``, adding new labelers (inside the caller's transaction)."""
    known = dict(con.execute("SELECT labeler_id, id FROM labelers").fetchall())
    new = [x for x in ids if x not in known]
    if new:
        start = max(known.values(), default=-1) + 1
        df = pd.DataFrame({"id": np.arange(start, start + len(new), dtype=np.int32), "labeler_id": new})
        con.register("_new_labelers", df)
        con.execute("INSERT INTO labelers SELECT id, labeler_id FROM _new_labelers")
        con.unregister("_new_labelers")
        known.update(zip(new, df["id"].tolist(), strict=True))
    return np.asarray([known[x] for x in ids], dtype=np.int32)


GROUPS_TABLE = "item_groups"
"""The table of a stored round's item groups (round_id, item, grp): prompts, queries, topics given at ``add``
(``group_col``); created with the first grouped round."""


def _has_groups_table(con: Any) -> bool:
    return con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [GROUPS_TABLE]).fetchone() \
        is not None


def drop_groups(con: Any, rid: int) -> None:
    """Remove a round's item groups (when the round is removed)."""
    if _has_groups_table(con):
        con.execute(f"DELETE FROM {GROUPS_TABLE} WHERE round_id = ?", [rid])


def write_round(con: Any, rid: int, ds: AnnotationSet, hook: Any = None) -> None:
    """Insert a round's items and annotations (inside the caller's transaction)."""
    import pyarrow as pa

    codes = labeler_codes(con, [str(x) for x in ds.labeler_ids])
    n = ds.n_items
    gold = pa.array(ds.gold.astype(np.int8), mask=ds.gold < 0)
    cov: Any
    if ds.covariates is not None:
        cov = pa.array(list(ds.covariates), type=pa.list_(pa.float64()))
    else:
        cov = pa.nulls(n, type=pa.list_(pa.float64()))
    items = pa.table({"round_id": pa.array(np.full(n, rid, dtype=np.int32)),
                      "item": pa.array(np.arange(n, dtype=np.int32)),
                      "item_id": pa.array([str(x) for x in ds.item_ids], type=pa.string()),
                      "gold": gold, "covariates": cov})
    con.register("_items", items)
    con.execute("INSERT INTO items SELECT * FROM _items")
    con.unregister("_items")
    if hook is not None:
        hook("items")
    ann = pa.table({"round_id": pa.array(np.full(ds.n_annotations, rid, dtype=np.int32)),
                    "item": pa.array(ds.annotation_item.astype(np.int32)),
                    "labeler": pa.array(codes[ds.labeler]),
                    "label": pa.array(ds.label.astype(np.int8))})
    con.register("_ann", ann)
    con.execute("INSERT INTO annotations SELECT * FROM _ann")
    con.unregister("_ann")
    if hook is not None:
        hook("annotations")
    if ds.item_group is not None:
        con.execute(f"CREATE TABLE IF NOT EXISTS {GROUPS_TABLE} (round_id INTEGER NOT NULL, item INTEGER NOT NULL, "
                    "grp VARCHAR NOT NULL)")
        names = np.asarray(ds.group_ids, dtype=object)
        grp = pa.table({"round_id": pa.array(np.full(n, rid, dtype=np.int32)),
                        "item": pa.array(np.arange(n, dtype=np.int32)),
                        "grp": pa.array([str(x) for x in names[ds.item_group]], type=pa.string())})
        con.register("_grp", grp)
        con.execute(f"INSERT INTO {GROUPS_TABLE} SELECT * FROM _grp")
        con.unregister("_grp")


def read_rounds(con: Any, rounds: Sequence[RoundInfo], *, name: str, namespaced: bool) -> AnnotationSet:
    """The rounds as one :class:`AnnotationSet`, each round its own Stage A round (prevalence group).

    ``namespaced`` names items ``<round>/<item_id>`` so that ids repeated
    across rounds stay distinct items; the ingest report lists each round's add.
    When some of the rounds were added with item groups, the set is grouped
    (:meth:`AnnotationSet.with_groups`): a group name shared by two rounds is
    one group (the same prompt answered by two versions), and the items of a
    round added without groups are each their own group.
    """
    lab_all = dict(con.execute("SELECT id, labeler_id FROM labelers").fetchall())
    ids_parts, gold_parts, round_parts, cov_parts, len_parts, lab_parts, label_parts = [], [], [], [], [], [], []
    cov_names = rounds[0].covariate_names if rounds else ()
    same_cov = all(r.covariate_names == cov_names for r in rounds) and bool(cov_names)
    groups_of = _stored_groups(con, rounds)
    group_parts: list[npt.NDArray[Any]] = []
    for g, r in enumerate(rounds):
        it = con.execute("SELECT item, item_id, gold, covariates FROM items WHERE round_id = ? ORDER BY item",
                         [r.id]).fetch_df()
        an = con.execute("SELECT item, labeler, label FROM annotations WHERE round_id = ?", [r.id]).fetchnumpy()
        item = np.asarray(an["item"], dtype=np.int64)
        lab = np.asarray(an["labeler"], dtype=np.int64)
        label = np.asarray(an["label"], dtype=np.int8)
        if item.size > 1 and np.any(item[1:] < item[:-1]):
            order = np.argsort(item, kind="stable")
            item, lab, label = item[order], lab[order], label[order]
        ids = it["item_id"].astype(str).to_numpy(dtype=object)
        ids_parts.append(np.asarray([r.name + ITEM_SEP + x for x in ids], dtype=object) if namespaced else ids)
        if groups_of:
            own = np.asarray([r.name + ITEM_SEP + x for x in ids], dtype=object)  # singletons: no group given
            grp = groups_of.get(r.id)
            group_parts.append(own if grp is None else grp.reindex(it["item"].to_numpy()).to_numpy(dtype=object))
        gold_parts.append(it["gold"].fillna(-1).to_numpy(dtype=np.int8))
        round_parts.append(np.full(len(it), g, dtype=np.int32))
        len_parts.append(np.bincount(item, minlength=len(it)))
        lab_parts.append(lab)
        label_parts.append(label)
        if same_cov:
            cov_parts.append(np.asarray(it["covariates"].tolist(), dtype=np.float64).reshape(len(it), -1))
    item_ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=object)
    lab_global = np.concatenate(lab_parts) if lab_parts else np.zeros(0, dtype=np.int64)
    present = np.unique(lab_global)
    names = np.asarray([lab_all[int(k)] for k in present], dtype=object)
    by_name = np.argsort(names, kind="stable")
    code_of = np.empty(int(present.max()) + 1 if present.size else 0, dtype=np.int32)
    code_of[present[by_name]] = np.arange(present.size, dtype=np.int32)
    lens = np.concatenate(len_parts) if len_parts else np.zeros(0, dtype=np.int64)
    ptr = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    tables = tuple(t for r in rounds for t in r.ingest.tables)
    ds = AnnotationSet(
        item_ids=item_ids, labeler_ids=names[by_name], item_ptr=ptr,
        labeler=code_of[lab_global] if lab_global.size else np.zeros(0, dtype=np.int32),
        label=np.concatenate(label_parts) if label_parts else np.zeros(0, dtype=np.int8),
        gold=np.concatenate(gold_parts) if gold_parts else np.zeros(0, dtype=np.int8),
        item_round=np.concatenate(round_parts) if round_parts else np.zeros(0, dtype=np.int32),
        round_ids=tuple(r.name for r in rounds),
        covariates=np.concatenate(cov_parts) if same_cov else None,
        covariate_names=cov_names if same_cov else (),
        report=IngestReport(tables), name=name,
    )
    if group_parts:
        ds = ds.with_groups((item_ids, np.concatenate(group_parts)))
    order = np.argsort(ds.item_ids, kind="stable")
    if np.any(order != np.arange(order.size)):
        ds = ds.take_items(order)
    return ds


def groups_digest(con: Any, rounds: Sequence[RoundInfo]) -> dict[str, str]:
    """SHA-256 of each grouped round's item groups, by round name (empty when none is grouped): part of a cached
    calibration's key, since groups change its covariance but not the rounds' content hashes."""
    return {r.name: hashlib.sha256("\0".join(s.astype(str).tolist()).encode("utf-8", "surrogatepass")).hexdigest()
            for r in rounds if (s := _stored_groups(con, [r]).get(r.id)) is not None}


def _stored_groups(con: Any, rounds: Sequence[RoundInfo]) -> dict[int, pd.Series]:
    """Each grouped round's item groups (a Series from its item number to its group), by round id."""
    if not rounds or not _has_groups_table(con):
        return {}
    ids = [r.id for r in rounds]
    rows = con.execute(f"SELECT round_id, item, grp FROM {GROUPS_TABLE} WHERE round_id IN "
                       f"({', '.join('?' * len(ids))})", ids).fetch_df()
    return {int(rid): part.sort_values("item").set_index("item")["grp"].astype(str)
            for rid, part in rows.groupby("round_id")}


FIT_REVISION = 1
"""Part of every cached calibration's key: raised when heroeval changes what a calibration of the same rounds
and settings holds, so that a store refits instead of serving the old one (1: the model checks' folds drawn
from a hash of the items' ids, issue #43)."""


def calibration_key(rounds: Sequence[RoundInfo], settings: Mapping[str, Any],
                    groups: Mapping[str, str] | None = None) -> str:
    """A cached calibration's key: its rounds (names, content hashes), settings, :data:`FIT_REVISION` and, when
    some rounds have item groups, their groups' digests."""
    doc: dict[str, Any] = {"rounds": sorted([r.name, r.content_hash] for r in rounds), "settings": dict(settings),
                           "revision": FIT_REVISION}
    if groups:
        doc["groups"] = dict(groups)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
