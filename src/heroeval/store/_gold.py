"""Expert labels added to a stored round (``hero store gold``), and rounds that hold the same annotations.

A round's gold may arrive after the round: a few expert labels drawn from it
(uniformly, or by ``hero select``'s design) once its estimate was found wide
or "unreliable". :func:`with_expert_labels` reads them against the stored
round's own items, exactly as ``hero estimate --current-gold`` reads them
against a file, and refuses labels that name items the round does not have or
that contradict gold it already holds. The store keeps a design's inclusion
probabilities in a table of their own (``gold_design``), created with the
first design, so the estimates with current gold weight the items as drawn.

Two rounds with the same annotations (whatever their gold) are one round
stored twice, typically a round re-added under another name with its expert
labels: calibrating one on the other would calibrate the round on its own
labels. :func:`annotations_hash` tells them apart from rounds that only
share a size.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.read import read_annotations
from heroeval.ingest.tables import TableLike, side_tables
from heroeval.store._db import StoreError
from heroeval.store._rounds import RoundInfo

__all__ = ["DESIGN_TABLE", "GoldAdded", "annotations_hash", "drop_design", "same_annotations",
           "with_expert_labels", "with_stored_design", "write_gold"]

DESIGN_TABLE = "gold_design"
"""The table of a stored round's gold-sampling design: (round_id, item, pi, stratum); created with the first
design (``stratum`` NULL outside a stratified design, and added to tables made before it)."""


@dataclass(frozen=True)
class GoldAdded:
    """What ``Store.add_gold`` did: the round after it, how many gold labels were new, and where it now stands."""

    round: RoundInfo
    new: int  # items that had no gold before
    already: int  # items whose gold was given again, with the same value
    design: bool  # inclusion probabilities were recorded
    joined_history: bool  # role auto: the round is now calibrated on when other rounds are estimated

    def lines(self) -> list[str]:
        r = self.round
        out = [f"round {r.name!r}: {self.new} expert label(s) added ({self.already} already there), "
               f"{r.n_gold} of {r.n_items} items now have gold"
               f"{'; the design (inclusion probabilities) is recorded' if self.design else ''}"]
        if self.joined_history:
            out.append(f"with role auto, round {r.name!r} now has gold and joins the history of the other rounds' "
                       f"calibrations (hero store role {r.name} current keeps it out); it is still left out of "
                       "the calibration that estimates it")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round.to_dict(), "new": self.new, "already": self.already, "design": self.design,
                "joined_history": self.joined_history}


def annotations_hash(ds: AnnotationSet) -> str:
    """SHA-256 of a round's items, labelers and labels, without its gold or covariates (row order ignored)."""
    h = hashlib.sha256()
    h.update(b"heroeval-annotations-v1\0")
    for xs in (ds.item_ids.tolist(), ds.labeler_ids.tolist()):
        b = "\0".join(str(x) for x in xs).encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    order = np.lexsort((ds.label, ds.labeler, ds.annotation_item))
    for arr in (ds.item_ptr.astype("<i8"), ds.labeler[order].astype("<i4"), ds.label[order].astype("i1")):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def with_expert_labels(stored: AnnotationSet, gold: TableLike, *, design: TableLike | None = None,
                       gold_col: str | None = None, gold_item_col: str | None = None,
                       encoding: str | None = None) -> tuple[AnnotationSet, int, int]:
    """The stored round with expert labels from ``gold`` (and its design): (round, new labels, repeated labels).

    The gold table is read as ``hero estimate --current-gold`` reads it
    (columns ``item_id``, ``gold``, optionally ``pi``; ``design`` a separate
    table of ``item_id, pi``). :class:`StoreError` when it names items the
    round does not have, or gives an item a label other than the one the
    round holds.
    """
    gold_t, gcol, _ = side_tables(gold, None, None, gold_item_col, gold_col, None, encoding)
    assert gold_t is not None
    ids = gold_t.df[gold_t.item_col].astype(str).str.strip()
    unknown = sorted(set(ids) - set(stored.item_ids.astype(str)))
    if unknown:
        raise StoreError(f"{gold_t.source}: {len(unknown)} item(s) are not items of round {stored.name!r} "
                         f"(e.g. {', '.join(map(repr, unknown[:5]))}); expert labels go on the round's own items")
    rows = pd.DataFrame({"item_id": stored.item_ids[stored.annotation_item].astype(str),
                         "labeler_id": stored.labeler_ids[stored.labeler].astype(str), "label": stored.label})
    fresh = read_annotations(rows, gold=gold, design=design, gold_col=gcol, gold_item_col=gold_t.item_col,
                             name=stored.name, encoding=encoding)
    pos = pd.Index(stored.item_ids.astype(str)).get_indexer(fresh.item_ids.astype(str))
    if np.any(pos < 0) or pos.size != stored.n_items:  # pragma: no cover - the same annotations, re-read
        raise StoreError(f"round {stored.name!r}: its items could not be matched to the gold table")
    new_gold = np.full(stored.n_items, -1, dtype=np.int8)
    new_gold[pos] = fresh.gold
    old = stored.gold
    clash = np.flatnonzero((old >= 0) & (new_gold >= 0) & (old != new_gold))
    if clash.size:
        shown = ", ".join(f"{stored.item_ids[i]!r} (stored {old[i]}, given {new_gold[i]})" for i in clash[:5])
        raise StoreError(f"{gold_t.source}: {clash.size} item(s) of round {stored.name!r} already have another gold "
                         f"label: {shown}. Nothing was changed")
    merged = np.where(new_gold >= 0, new_gold, old).astype(np.int8)
    n_new = int(((old < 0) & (new_gold >= 0)).sum())
    n_again = int(((old >= 0) & (new_gold >= 0)).sum())
    pi = None
    if fresh.gold_pi is not None:
        pi = np.full(stored.n_items, np.nan)
        pi[pos] = fresh.gold_pi
        lacking = np.flatnonzero((merged >= 0) & ~np.isfinite(pi))
        if lacking.size:
            raise StoreError(f"round {stored.name!r}: the design gives no inclusion probability for {lacking.size} of "
                             f"its gold item(s) (e.g. {stored.item_ids[lacking[0]]!r}, labelled before); a design "
                             "must cover the whole gold sample")
    elif stored.gold_pi is not None:
        raise StoreError(f"round {stored.name!r} holds gold drawn by a design: expert labels added to it need their "
                         "inclusion probabilities too (a pi column, or --design)")
    strata = None
    if fresh.gold_stratum is not None:  # a stratified design: it covers the whole gold sample, as pi does
        strata = np.full(stored.n_items, "", dtype=object)
        strata[pos] = fresh.gold_stratum
    return replace(stored, gold=merged, gold_pi=pi, gold_stratum=strata), n_new, n_again


def write_gold(con: Any, rid: int, ds: AnnotationSet) -> None:
    """Set a stored round's gold (and its design) to ``ds``'s, inside the caller's transaction (matched by item id)."""
    on = np.flatnonzero(ds.gold >= 0)
    g = pd.DataFrame({"item_id": ds.item_ids[on].astype(str), "gold": ds.gold[on].astype(np.int8)})
    con.execute("UPDATE items SET gold = NULL WHERE round_id = ?", [rid])
    con.register("_gold", g)
    con.execute("UPDATE items SET gold = _gold.gold FROM _gold WHERE items.round_id = ? "
                "AND items.item_id = _gold.item_id", [rid])
    con.unregister("_gold")
    if ds.gold_pi is not None:
        con.execute(f"CREATE TABLE IF NOT EXISTS {DESIGN_TABLE} (round_id INTEGER NOT NULL, item_id VARCHAR NOT NULL, "
                    "pi DOUBLE NOT NULL)")
        con.execute(f"ALTER TABLE {DESIGN_TABLE} ADD COLUMN IF NOT EXISTS stratum VARCHAR")  # stores made before strata
        con.execute(f"DELETE FROM {DESIGN_TABLE} WHERE round_id = ?", [rid])
        st = None if ds.gold_stratum is None else ds.gold_stratum[on].astype(str)
        d = pd.DataFrame({"round_id": np.full(on.size, rid, dtype=np.int32), "item_id": ds.item_ids[on].astype(str),
                          "pi": ds.gold_pi[on], "stratum": pd.Series(st, dtype="string") if st is not None
                          else pd.Series([None] * on.size, dtype="string")})
        con.register("_design", d)
        con.execute(f"INSERT INTO {DESIGN_TABLE} (round_id, item_id, pi, stratum) "
                    "SELECT round_id, item_id, pi, stratum FROM _design")
        con.unregister("_design")


def drop_design(con: Any, rid: int) -> None:
    """Remove a round's design rows (when the round is removed)."""
    if _has_design_table(con):
        con.execute(f"DELETE FROM {DESIGN_TABLE} WHERE round_id = ?", [rid])


def _has_design_table(con: Any) -> bool:
    return con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [DESIGN_TABLE]).fetchone() \
        is not None


def with_stored_design(con: Any, rid: int, ds: AnnotationSet) -> AnnotationSet:
    """The loaded round with its recorded design, when it has one."""
    if not _has_design_table(con):
        return ds
    cols = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                                      [DESIGN_TABLE]).fetchall()}
    rows = con.execute(f"SELECT item_id, pi{', stratum' if 'stratum' in cols else ''} FROM {DESIGN_TABLE} "
                       "WHERE round_id = ?", [rid]).df()
    if len(rows) == 0:
        return ds
    st = rows["stratum"] if "stratum" in rows.columns else None
    strata = None if st is None or st.isna().any() else st.astype(str).to_numpy(dtype=object)
    return ds.with_design(rows["item_id"].astype(str).to_numpy(dtype=object), rows["pi"].to_numpy(dtype=float), strata)


def same_annotations(ds: AnnotationSet, others: list[tuple[RoundInfo, AnnotationSet]]) -> list[str]:
    """The names of the rounds among ``others`` whose annotations are ``ds``'s (gold aside)."""
    mine = annotations_hash(ds)
    return [r.name for r, o in others if o.n_annotations == ds.n_annotations and annotations_hash(o) == mine]
