"""Real-data benchmark: every method on annotation sets with gold labels, by resampling.

The protocol, in the spirit of the paper's Section 6, for a folder holding
``labels.csv`` (item_id, labeler_id, label), ``gold.csv`` (item_id, gold) and
optionally ``items.csv`` (item_id + text columns):

1. For each of R resamples, draw the current round: ``n`` items among those
   with gold (the target, the current items' gold rate, must be known), at
   most 40 % of the gold items so the history keeps some. Every other
   labelled item is history.
2. Reveal gold on a random share ``rho`` of the history items (only items
   that have gold can be revealed; when fewer exist, all are revealed and the
   effective rho is recorded).
3. Pool shift (``shift="half"``): the current round keeps only the labels of
   a random half of the labelers (items left without labels are dropped), so
   the labeler pool differs between history and current. Rate shift
   (``shift="rate"``): the current round's items are drawn with their gold
   label's odds multiplied by :data:`RATE_SHIFT_ODDS` (divided, when the gold
   rate is above one half; ``rate_odds`` sets another factor, below 1 to move
   the rate away from one half), so that its rate differs from the history's, as
   a new model's defect rate differs from the last one's; the labelers'
   error rates stay the same.
4. Run every method with its 95 % interval; score against the current items'
   gold rate.

HERO-2's covariates, built as a user would: TF-IDF of the item text columns
(scikit-learn ``TfidfVectorizer`` fitted on all items' text, reduced to a few
components by ``TruncatedSVD``), with the ridge option.

Real rounds (``split="groups"``, :func:`run_benchmark`): the data's item
groups (mre_treat's batches, triviaqa's answering models) are rounds; each
resample's current round comes from one group, and the history is every
other group, each kept as a round of its own (as a store of rounds keeps
them), so the model checks can also judge each method on the history's past
rounds.

Many small groups (TREC topics, trivia questions, entity mentions): a data
set with more than ``group_blocks`` (:data:`GROUP_BLOCKS`, 10) groups has its
groups dealt into ``group_blocks`` blocks first (:func:`deal_blocks`: a
shuffle seeded by the run's seed and the data's name, the same in every
resample), and each block acts as one group: the current round is one block
(up to ``n`` of its gold items), the history is the other blocks, one round
each. Leaving out one tiny group would give a current round of a few items;
a block holds about 1/``group_blocks`` of the data. The default 10 keeps every
existing set of real rounds as it was (triviaqa's 9 answering models,
mre_treat's 4 blocks of batches: at most 10 groups, each its own round) and
gives 10 history-or-current rounds, as many as a store of rounds typically
holds; ``group_blocks=None`` never deals.
"""

from __future__ import annotations

import json
import math
import os
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypedDict, Unpack

import numpy as np
import pandas as pd

from heroeval.core.options import options_of
from heroeval.core.parallel import run_chunks
from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError, HeroEvalWarning
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.table import METHODS
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.read import read_annotations
from heroeval.stage_a.settings import check_shrink
from heroeval.workflows.api import calibrate, estimate

__all__ = ["BENCHMARK_DEFAULTS", "GROUP_BLOCKS", "BenchmarkData", "BenchmarkOptions", "deal_blocks", "load_folder",
           "run_benchmark", "summarize_benchmark"]

#: ``shift="rate"``: odds factor of a gold-positive item being drawn into the current round
RATE_SHIFT_ODDS = 3.0
SHIFTS = ("none", "half", "rate")
#: ``split="groups"``: a data set with more item groups than this has them dealt into this many blocks (module docstring)
GROUP_BLOCKS = 10


@dataclass(frozen=True)
class BenchmarkData:
    name: str
    labels: pd.DataFrame  # item_id, labeler_id, label (binary)
    gold: pd.DataFrame  # item_id, gold (only items with labels)
    covariates: pd.DataFrame | None  # item_id + numeric columns (TF-IDF components)
    groups: pd.Series | None = None  # item_id -> group (round, batch, answering model) for split="groups"


def load_folder(
    path: str | os.PathLike[str], *, text_components: int = 10, binary_suffix: str = "", group_col: str | None = None
) -> BenchmarkData:
    """Read and check a benchmark folder (labels.csv, gold.csv, optional items.csv).

    ``binary_suffix="_binary"`` reads ``labels_binary.csv`` and ``gold_binary.csv``
    (adultcontent2's binary view). ``group_col`` names a column of
    ``items.csv`` that groups items into real rounds (``split="groups"``).
    Labels and gold must be binary; a folder
    without the files, with other columns, or with fewer than 20 gold items
    that have labels is an error naming what is wrong.
    """
    p = Path(path)
    if not p.is_dir():
        raise DataError(f"benchmark folder {str(p)!r} does not exist or is not a folder")
    lab_f, gold_f = p / f"labels{binary_suffix}.csv", p / f"gold{binary_suffix}.csv"
    for f in (lab_f, gold_f):
        if not f.exists():
            raise DataError(f"benchmark folder {str(p)!r} has no {f.name} (expected labels.csv and gold.csv)")
    ann = read_annotations(lab_f, gold=gold_f, round_col=False)  # validates: binary labels, columns, rows
    idx = ann.annotation_item
    labels = pd.DataFrame({"item_id": ann.item_ids[idx].astype(str), "labeler_id": ann.labeler_ids[ann.labeler].astype(str),
                           "label": ann.label.astype(int)})
    g = ann.gold >= 0
    gold = pd.DataFrame({"item_id": ann.item_ids[g].astype(str), "gold": ann.gold[g].astype(int)})
    if len(gold) < 20:
        raise DataError(f"{str(gold_f)!r}: only {len(gold)} gold items have silver labels; the benchmark needs at least 20")
    cov = None
    items_f = p / "items.csv"
    if items_f.exists() and text_components > 0:
        cov = _text_covariates(items_f, ann.item_ids.astype(str), text_components, exclude=(group_col,))
    groups = None
    if group_col is not None:
        if not items_f.exists():
            raise DataError(f"benchmark folder {str(p)!r}: group_col={group_col!r} needs items.csv")
        items = pd.read_csv(items_f, dtype=str, keep_default_na=False)
        if group_col not in items.columns:
            raise DataError(f"{str(items_f)!r}: no column {group_col!r}; columns are {list(items.columns)}")
        groups = items.drop_duplicates("item_id").set_index("item_id")[group_col]
    return BenchmarkData(p.name + binary_suffix, labels, gold, cov, groups)


def _text_covariates(
    items_f: Path, item_ids: np.ndarray, k: int, exclude: Sequence[str | None] = ()
) -> pd.DataFrame | None:
    try:
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError:  # an optional dependency: run without the text covariates, and say so
        warnings.warn(f"{items_f}: text covariates need scikit-learn (pip install 'heroeval[benchmark]'); "
                      "the benchmark runs without them (no HERO-2)", HeroEvalWarning, stacklevel=3)
        return None
    items = pd.read_csv(items_f, dtype=str, keep_default_na=False)
    if "item_id" not in items.columns:
        raise DataError(f"{str(items_f)!r}: no item_id column")
    text_cols = [c for c in items.columns
                 if c != "item_id" and c not in exclude and not c.endswith("_id") and not c.startswith("raw")]
    if not text_cols:
        return None
    text = items[text_cols].astype(str).agg(" ".join, axis=1)
    text.index = items["item_id"]
    text = text[~text.index.duplicated()].reindex(item_ids).fillna("")
    tf = TfidfVectorizer(max_features=5000, min_df=2, sublinear_tf=True).fit_transform(text.to_numpy())
    k = min(k, tf.shape[1] - 1)
    if k < 1:
        return None
    comp = TruncatedSVD(n_components=k, random_state=0).fit_transform(tf)
    out = pd.DataFrame(comp, columns=[f"tfidf{j}" for j in range(k)])
    out.insert(0, "item_id", item_ids)
    return out


def _check_group_blocks(group_blocks: object) -> None:
    if group_blocks is not None and (isinstance(group_blocks, bool) or not isinstance(group_blocks, (int, np.integer))
                                     or group_blocks < 2):
        raise HeroEvalError(f"group_blocks must be an integer >= 2, or None to keep every group a round of its own; "
                            f"got {group_blocks!r}")


def deal_blocks(data: BenchmarkData, group_blocks: int | None = GROUP_BLOCKS, seed: int = 2026) -> pd.Series | None:
    """``split="groups"`` with many groups: each group's block, a Series group -> ``"block<k>of<B>"``.

    None when the labelled items fall in at most ``group_blocks`` groups (or
    ``group_blocks`` is None): each group is then a round of its own, as
    before. Otherwise the groups of labelled items are shuffled by a generator
    seeded by ``seed`` and the data's name (not by the resample: every
    resample sees the same blocks), those holding gold items first, and dealt
    in turn into ``group_blocks`` blocks, as cards are: the blocks partition
    the groups, hold as many groups each within one, and each holds a group
    with gold items while there are at least as many of those as blocks.
    """
    _check_group_blocks(group_blocks)
    if data.groups is None:
        raise HeroEvalError(f"{data.name}: dealing groups into blocks needs item groups (load_folder(group_col=...))")
    if group_blocks is None:
        return None
    groups = data.groups.reindex(pd.unique(data.labels["item_id"])).dropna().astype(str).unique()
    if groups.size <= group_blocks:
        return None
    with_gold = set(data.groups.reindex(data.gold["item_id"]).dropna().astype(str))
    rng = np.random.default_rng([seed, zlib.crc32(data.name.encode())])
    order = [*rng.permutation(sorted(g for g in groups if g in with_gold)),
             *rng.permutation(sorted(g for g in groups if g not in with_gold))]
    blocks = [f"block{i % group_blocks + 1}of{group_blocks}" for i in range(len(order))]
    return pd.Series(blocks, index=pd.Index([str(g) for g in order], name="group"), name="block")


def _units(data: BenchmarkData, seed: int, group_blocks: int | None) -> tuple[pd.Series, list[str]]:
    """``split="groups"``: item_id -> its round (its group, or its group's block), and the rounds that take turns as
    the current round (those with gold items; sorted groups, or the blocks in order)."""
    assert data.groups is not None
    blocks = deal_blocks(data, group_blocks, seed)
    if blocks is None:
        units, names = data.groups, [str(g) for g in np.sort(data.groups.unique())]
    else:
        assert group_blocks is not None
        units = data.groups.astype(str).map(blocks)
        names = [f"block{k + 1}of{group_blocks}" for k in range(group_blocks)]
    with_gold = set(units.reindex(data.gold["item_id"]).dropna().astype(str))
    names = [g for g in names if g in with_gold]
    if not names:
        raise DataError(f"{data.name}: no item group holds gold items with labels; split='groups' needs some")
    return units, names


@dataclass(frozen=True)
class Split:
    """One resample of the protocol: the history (gold revealed on a share), the current round, its true rate."""

    history: AnnotationSet
    current: AnnotationSet
    truth: float
    group: str


def make_split(
    data: BenchmarkData, r: int, rho: float, n: int, shift: str, seed: int, split: str = "random",
    rate_odds: float = RATE_SHIFT_ODDS, group_blocks: int | None = GROUP_BLOCKS,
) -> Split:
    """Resample r of the protocol (module docstring), the same for every method and every caller.

    ``split="groups"``: the rounds are the data's groups, or their blocks
    (:func:`deal_blocks`) when there are more than ``group_blocks`` groups;
    resample r's current round is the (r mod G)-th of those with gold items.
    """
    rng = np.random.default_rng([seed, r, int(rho * 1000)])
    gold_items = data.gold["item_id"].to_numpy()
    lab = data.labels
    group = ""
    units = None
    if split == "groups":
        units, names = _units(data, seed, group_blocks)
        group = names[r % len(names)]
        in_group = units.reindex(lab["item_id"]).to_numpy() == group
        g_gold = data.gold[units.reindex(data.gold["item_id"]).to_numpy() == group]["item_id"].to_numpy()
        cur_items = set(rng.choice(g_gold, min(n, g_gold.size), replace=False).tolist())
        is_cur = lab["item_id"].isin(cur_items).to_numpy()
        hist_lab, cur_lab = lab[~in_group], lab[is_cur]
    else:
        n_cur = min(n, int(0.4 * gold_items.size))
        p = None
        if shift == "rate":
            y = data.gold["gold"].to_numpy()
            up = rate_odds if y.mean() <= 0.5 else 1.0 / rate_odds
            w = np.where(y == 1, up, 1.0)
            p = w / w.sum()
        cur_items = set(rng.choice(gold_items, n_cur, replace=False, p=p).tolist())
        is_cur = lab["item_id"].isin(cur_items).to_numpy()
        hist_lab, cur_lab = lab[~is_cur], lab[is_cur]
    hist_item_ids = hist_lab["item_id"].unique()
    want = round(rho * hist_item_ids.size)
    hist_gold_pool = data.gold[data.gold["item_id"].isin(set(hist_item_ids))]
    reveal = hist_gold_pool.sample(n=min(max(want, 1), len(hist_gold_pool)), random_state=int(rng.integers(2**31)))
    if shift == "half":
        labelers = np.sort(lab["labeler_id"].unique())
        keep = set(rng.choice(labelers, max(1, labelers.size // 2), replace=False).tolist())
        cur_lab = cur_lab[cur_lab["labeler_id"].isin(keep)]
    cov = data.covariates
    hcov = ccov = None
    if cov is not None:
        hcov = cov[cov["item_id"].isin(set(hist_item_ids))]
        ccov = cov[cov["item_id"].isin(set(cur_lab["item_id"]))]
    round_col: str | Literal[False] = False
    if units is not None:  # split="groups": the history keeps its real rounds
        hist_lab = hist_lab.assign(round=units.reindex(hist_lab["item_id"]).astype(str).to_numpy())
        round_col = "round"
    hist = read_annotations(hist_lab, gold=reveal, covariates=hcov, round_col=round_col, name="history")
    cur = read_annotations(cur_lab, covariates=ccov, round_col=False, name="current")
    truth = float(data.gold.set_index("item_id").loc[cur.item_ids.astype(str), "gold"].mean())
    return Split(hist, cur, truth, group)


@dataclass(frozen=True)
class _Cell:
    """One (rho, shift) cell of :func:`run_benchmark`: what its resamples share, :func:`make_split`'s arguments but
    the resample's number ``r``, with ``auto`` (the model checks and the recommended estimate) and Stage A's
    ``shrink``."""

    data: BenchmarkData
    rho: float
    n: int
    shift: str
    seed: int
    split: str = "random"
    auto: bool = True
    rate_odds: float = RATE_SHIFT_ODDS
    shrink: Literal["none", "eb"] = "none"
    group_blocks: int | None = GROUP_BLOCKS


def _one_resample(cell: _Cell, r: int) -> list[dict[str, Any]]:
    data, rho, shift, split, auto = cell.data, cell.rho, cell.shift, cell.split, cell.auto
    warnings.simplefilter("ignore", ConvergenceWarning)
    sp = make_split(data, r, rho, cell.n, shift, cell.seed, split, cell.rate_odds, cell.group_blocks)
    hist, cur, truth, group = sp.history, sp.current, sp.truth, sp.group
    cal = calibrate(hist, checks=auto, shrink=cell.shrink)
    res = estimate(cur, cal, method="all", ridge=1.0, exclude_new_labelers=True, recommend=auto,
                   drift_check=False)
    assert isinstance(res, EstimateCollection)
    rows = []
    items = list(res.items())
    if res.recommended is not None:
        items.append(("auto", res.recommended.result))
    for m, x in items:
        ci = x.confidence_interval(0.95)
        rows.append({"dataset": data.name, "split": split, "group": group, "rho": rho, "shift": shift,
                     "resample": r, "method": m,
                     "estimate": x.estimate, "se": x.standard_error, "ci_low": ci.low, "ci_high": ci.high,
                     "truth": truth, "n_current": cur.n_items, "n_history": hist.n_items,
                     "rho_effective": hist.n_gold / hist.n_items, "status": x.status,
                     "score_r2": x.details.get("score_r2", math.nan),
                     "picked": "" if m != "auto" else _picked(res.recommended),
                     "candidates": "" if m != "auto" or res.recommended is None else json.dumps(
                         res.recommended.to_dict()["candidates"]),
                     "dependence_p": math.nan if cal.checks is None else cal.checks.dependence.p_value})
    return rows


def _picked(rec: Any) -> str:
    return rec.method if rec.history_weight is None else f"{rec.method}@{rec.history_weight:g}"


def _task(args: tuple[_Cell, Sequence[int]]) -> list[dict[str, Any]]:
    cell, rs = args
    out: list[dict[str, Any]] = []
    for r in rs:
        out.extend(_one_resample(cell, r))
    return out


class BenchmarkOptions(TypedDict, total=False):
    """:func:`run_benchmark`'s keyword options (documented there); defaults in :data:`BENCHMARK_DEFAULTS`."""

    resamples: int
    rhos: Sequence[float]
    n: int
    shifts: Sequence[str]
    seed: int
    workers: int | None
    progress: Callable[[int, int], None] | None
    split: str
    auto: bool
    first_resample: int
    rate_odds: float
    shrink: Literal["none", "eb"]
    group_blocks: int | None


BENCHMARK_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "resamples": 20, "rhos": (0.05, 0.10), "n": 200, "shifts": SHIFTS, "seed": 2026, "workers": None,
    "progress": None, "split": "random", "auto": True, "first_resample": 0, "rate_odds": RATE_SHIFT_ODDS,
    "shrink": "none", "group_blocks": GROUP_BLOCKS,
})
""":class:`BenchmarkOptions`' defaults."""


def run_benchmark(data: BenchmarkData, **options: Unpack[BenchmarkOptions]) -> pd.DataFrame:
    """Every method on ``resamples`` splits per (rho, shift); one row per resample and method.

    The keyword options (:class:`BenchmarkOptions`, defaults in :data:`BENCHMARK_DEFAULTS`): ``resamples``
    (20) splits for each history gold share in ``rhos`` ((0.05, 0.10)) and each shift in ``shifts``, current
    rounds of up to ``n`` (200) items, splits seeded by ``seed`` (2026), run on ``workers`` processes (default:
    all cores) with ``progress(done, total)`` called as chunks finish; the others below.

    ``shifts`` defaults to all three: ``"none"`` (random splits), ``"half"``
    (pool shift) and ``"rate"`` (rate shift); see the module docstring.

    The splits are resamples ``first_resample, ..., first_resample +
    resamples - 1``; resample r is the same split in every call (seeded by
    ``seed``, r and rho), so runs with different ``first_resample`` can be
    concatenated into one larger run.

    With ``auto`` (default) Stage A also runs the model checks and the
    recommended estimate is scored as method ``"auto"`` (column ``picked``
    says which method it chose).

    ``split="random"``: random history/current splits. ``split="groups"``: the
    data's real rounds (``BenchmarkData.groups``), leave one group out: resample
    r takes group r mod G as the current round (up to ``n`` of its gold items)
    and every other group as history, so the current round differs from the
    history as a real next round would (prevalence, labeler pool, content).
    With more than ``group_blocks`` (10) groups, the groups are first dealt
    into ``group_blocks`` blocks (:func:`deal_blocks`, the same blocks in
    every resample), and each block is a round: the current round one block,
    the history the others; column ``group`` names the block
    (``"block3of10"``). ``None``: every group is a round, however many.
    Groups (or blocks) without gold items stay in the history. Ignored by
    ``split="random"``.

    ``rate_odds`` (``shift="rate"``): the factor on a gold-positive item's odds
    of being drawn into the current round (inverted when the gold rate is
    above one half). The default 3 moves the rate across or towards one half;
    a factor below 1 moves it away (a rare class rarer, as a better model's
    defect rate).

    ``shrink``: Stage A's prior (:func:`heroeval.calibrate`'s ``shrink``), for
    every method that uses the calibration.
    """
    o = options_of("run_benchmark", options, BenchmarkOptions, BENCHMARK_DEFAULTS)
    resamples, rhos, n, shifts, seed = o["resamples"], o["rhos"], o["n"], o["shifts"], o["seed"]
    workers, progress, split, auto = o["workers"], o["progress"], o["split"], o["auto"]
    first_resample, rate_odds, shrink, group_blocks = o["first_resample"], o["rate_odds"], o["shrink"], o["group_blocks"]
    if split not in ("random", "groups"):
        raise HeroEvalError(f"split must be 'random' or 'groups', got {split!r}")
    if split == "groups" and data.groups is None:
        raise HeroEvalError(f"{data.name}: split='groups' needs item groups (load_folder(group_col=...))")
    _check_group_blocks(group_blocks)
    if split == "groups":
        _units(data, seed, group_blocks)  # a data set without gold in any group fails here, not in every worker
    if not (isinstance(resamples, int) and resamples >= 2):
        raise HeroEvalError(f"resamples must be an integer >= 2, got {resamples!r}")
    if not (isinstance(first_resample, int) and first_resample >= 0):
        raise HeroEvalError(f"first_resample must be an integer >= 0, got {first_resample!r}")
    for s in shifts:
        if s not in SHIFTS:
            raise HeroEvalError(f"shift must be one of {', '.join(SHIFTS)}, got {s!r}")
    if split == "groups" and "rate" in shifts:  # the current round is a real group: its rate is what it is
        shifts = [s for s in shifts if s != "rate"]
        if not shifts:
            raise HeroEvalError("shift='rate' does not apply to split='groups' (each current round is a real group "
                                "with its own rate); use shift 'none' or 'half'")
        warnings.warn("shift 'rate' left out: with split='groups' each current round is a real group with its own "
                      "rate, so a rate-shifted draw would repeat shift 'none'", HeroEvalWarning, stacklevel=2)
    for rho in rhos:
        if not 0 < rho < 1:
            raise HeroEvalError(f"rho must be in (0, 1), got {rho!r}")
    if isinstance(rate_odds, bool) or not (isinstance(rate_odds, (int, float)) and math.isfinite(rate_odds)
                                           and rate_odds > 0):
        raise HeroEvalError(f"rate_odds must be a positive number, got {rate_odds!r}")
    per = max(1, resamples // (2 * (workers or os.cpu_count() or 1)))
    end = first_resample + resamples
    check_shrink(shrink)
    jobs = [(_Cell(data, rho, n, s, seed, split, auto, float(rate_odds), shrink, group_blocks),
             list(range(i, min(i + per, end))))
            for rho in rhos for s in shifts for i in range(first_resample, end, per)]
    rows = run_chunks(_task, jobs, [len(j[1]) for j in jobs], workers, progress)
    return pd.DataFrame(rows).sort_values(["rho", "shift", "resample", "method"], kind="stable").reset_index(drop=True)


def summarize_benchmark(df: pd.DataFrame) -> pd.DataFrame:
    """|bias|, SD, RMSE, 95 % coverage and mean interval width, per dataset, rho, shift and method.

    The target is the current round's gold rate. ``width`` is the mean of
    ``ci_high - ci_low`` over the resamples whose interval is finite (NaN when
    none is).
    """
    d = df.copy()
    d["err"] = d["estimate"] - d["truth"]
    d["cover"] = (d["ci_low"] <= d["truth"]) & (d["truth"] <= d["ci_high"])
    lo, hi = d["ci_low"].to_numpy(float), d["ci_high"].to_numpy(float)
    d["width"] = np.where(np.isfinite(lo) & np.isfinite(hi), hi - lo, np.nan)
    if "split" not in d.columns:
        d["split"] = "random"
    keys = ["dataset", "split", "rho", "shift", "method"]
    out = d.groupby(keys, sort=False).agg(
        resamples=("err", "size"), bias=("err", "mean"), sd=("err", "std"),
        rmse=("err", lambda e: float(np.sqrt(np.nanmean(np.square(e))))), coverage=("cover", "mean"),
        width=("width", "mean"), n_current=("n_current", "mean"), rho_effective=("rho_effective", "mean"),
        score_r2=("score_r2", "mean"),
    ).reset_index()
    out["abs_bias"] = out["bias"].abs()
    out.loc[out["method"] == "majority_vote", "coverage"] = math.nan
    order = {m: i for i, m in enumerate((*METHODS, "auto"))}
    out["_o"] = out["method"].map(order)
    return out.sort_values(["dataset", "split", "rho", "shift", "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
