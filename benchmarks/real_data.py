"""Every method on every binary data set in ../shared/data (see heroeval.workflows.benchmark for the protocol).

    .venv/bin/python -m benchmarks.real_data --resamples 20 --shifts none,half --out benchmarks/results/benchmark

(``--shifts`` defaults to none,half,rate, as ``run_benchmark`` does; the
tables in docs/benchmark.md were made with none,half.)

Writes per-resample rows (``resamples.csv.gz``), the summary (``summary.csv``)
and ``table.md`` (RMSE, |bias| and coverage per data set, rho, shift, method).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from heroeval.workflows.benchmark import BenchmarkData, load_folder, run_benchmark, summarize_benchmark

BINARY = [
    ("adultcontent2", "_binary"), ("bluebirds", ""), ("duchenne", ""), ("mre_treat", ""), ("possent_zheng", ""),
    ("product_er", ""), ("sentiment_polarity", ""), ("snow_rte", ""), ("snow_temp", ""), ("trec2011_crowd", ""),
    ("triviaqa_llm_judges", ""), ("zencrowd", ""),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", default="benchmarks/results/benchmark")
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--shifts", default="none,half,rate",
                    help="comma-separated: none, half (pool shift), rate (rate shift); docs/benchmark.md's tables: none,half")
    ap.add_argument("--rounds", action="store_true",
                    help="instead: real rounds as history vs current (triviaqa answering models, mre_treat batches)")
    a = ap.parse_args()
    if a.rounds:
        rounds(a)
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    t0 = time.perf_counter()
    for name, suffix in BINARY:
        if a.only and name not in a.only.split(","):
            continue
        t = time.perf_counter()
        data = load_folder(Path(a.data) / name, binary_suffix=suffix)
        frames.append(run_benchmark(data, resamples=a.resamples, n=a.n, shifts=a.shifts.split(",")))
        print(f"{data.name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    summ = summarize_benchmark(df)
    summ.to_csv(out / "summary.csv", index=False)
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def mre_batch_groups(folder: Path) -> pd.Series:
    """mre_treat: each item's first batch, in four consecutive blocks of batches (time order)."""
    full = pd.read_csv(folder / "labels_full.csv", dtype={"item_id": str})
    first = full.groupby("item_id")["batch"].min()
    return pd.cut(first, bins=[0, 10, 15, 22, 46], labels=["b01-10", "b11-15", "b16-22", "b23-46"]).astype(str)


def round_sets(data_dir: Path, n: int, only: Sequence[str] = ()) -> list[tuple[BenchmarkData, int]]:
    """The data sets with real rounds, their item groups set, each with its current-round size.

    triviaqa_llm_judges: the 9 answering models (``items.csv``'s ``exam_taker``),
    n = 400; mre_treat: four consecutive blocks of batches
    (:func:`mre_batch_groups`), n as given. trec2011_crowd's ``round`` numbers
    the labels within an item (the k-th label collected), not groups of items,
    so it has none. ``only`` keeps the named sets (all when empty).
    """
    out = []
    if not only or "triviaqa_llm_judges" in only:
        out.append((load_folder(data_dir / "triviaqa_llm_judges", group_col="exam_taker"), 400))
    if not only or "mre_treat" in only:
        mre = load_folder(data_dir / "mre_treat")
        out.append((replace(mre, groups=mre_batch_groups(data_dir / "mre_treat")), n))
    return out


def trec_topic_groups(data: BenchmarkData) -> pd.Series:
    """trec2011_crowd: each item's TREC topic (query), the item_id's part before the first ``_``."""
    ids = pd.Index(pd.unique(pd.concat([data.labels["item_id"], data.gold["item_id"]])), name="item_id")
    return pd.Series(ids.str.split("_", n=1).str[0], index=ids, name="topic")


def _named(data: BenchmarkData, grouping: str) -> BenchmarkData:
    return replace(data, name=f"{data.name}:{grouping}")


def grouped_sets(data_dir: Path, n: int, only: Sequence[str] = ()) -> list[tuple[BenchmarkData, int]]:
    """Every shared binary set with a natural grouping of its items, its groups set, with its current-round size.

    Each set is named ``<folder>:<grouping>``; ``only`` keeps those whose full
    name or folder is listed (all when empty). With ``split="groups"`` a set of
    more than ``group_blocks`` (10) groups has them dealt into blocks
    (``heroeval.workflows.benchmark.deal_blocks``), one round each.

    * ``triviaqa_llm_judges:exam_taker``: the 9 answering models (as
      :func:`round_sets`), n = 400;
    * ``triviaqa_llm_judges:question``: ``items.csv``'s ``question_id``, 400
      questions each answered by the 9 models;
    * ``mre_treat:batch``: four consecutive blocks of batches
      (:func:`mre_batch_groups`, as :func:`round_sets`);
    * ``mre_treat:relation``: ``items.csv``'s ``UMLS_seed_relation``, the term
      pair's distant-supervision seed (12 relations; gold on 6 of them, and on
      all but ``may treat`` every gold label is 0);
    * ``trec2011_crowd:topic``: the TREC topic, the item_id's part before the
      first ``_`` (:func:`trec_topic_groups`; 46 topics, 30 of them with gold);
    * ``zencrowd:mention``: the entity mention (its candidate URIs are the items);
    * ``product_er:left_id``: the left product of the pair;
    * ``snow_rte:task``: the RTE-1 task subset (CD, IE, IR, MT, PP, QA, RC).

    Every set in its binary view, loaded as :func:`main` does (labels.csv and
    gold.csv; trec2011_crowd needs no binary suffix, its gold is binarized).
    Left out, having no item grouping: the worker files of zencrowd
    (``labels_full.csv``'s India / US flags), trec2011_crowd's ``source`` (the
    labeler's team) and ``round`` (the k-th label of an item), possent_zheng's
    qualification test and the two weather_sentiment crowds group LABELERS or
    labels, not items (and weather_sentiment is 5-class); adultcontent2's
    ``items.csv`` holds one URL per item, sentiment_polarity's only the text,
    and bluebirds, duchenne and snow_temp have no ``items.csv``.
    """
    def want(folder: str, grouping: str) -> bool:
        return not only or folder in only or f"{folder}:{grouping}" in only

    out: list[tuple[BenchmarkData, int]] = []
    if want("triviaqa_llm_judges", "exam_taker"):
        out.append((_named(load_folder(data_dir / "triviaqa_llm_judges", group_col="exam_taker"), "exam_taker"), 400))
    if want("triviaqa_llm_judges", "question"):
        out.append((_named(load_folder(data_dir / "triviaqa_llm_judges", group_col="question_id"), "question"), n))
    if want("mre_treat", "batch"):
        mre = load_folder(data_dir / "mre_treat")
        out.append((_named(replace(mre, groups=mre_batch_groups(data_dir / "mre_treat")), "batch"), n))
    if want("mre_treat", "relation"):
        out.append((_named(load_folder(data_dir / "mre_treat", group_col="UMLS_seed_relation"), "relation"), n))
    if want("trec2011_crowd", "topic"):
        trec = load_folder(data_dir / "trec2011_crowd")
        out.append((_named(replace(trec, groups=trec_topic_groups(trec)), "topic"), n))
    for folder, col, grouping in (("zencrowd", "mention", "mention"), ("product_er", "left_id", "left_id"),
                                  ("snow_rte", "task", "task")):
        if want(folder, grouping):
            out.append((_named(load_folder(data_dir / folder, group_col=col), grouping), n))
    return out


def rounds(a: argparse.Namespace) -> None:
    """Leave one real round out: triviaqa's 9 answering models, mre_treat's 4 blocks of batches; 3 resamples a round."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    t0 = time.perf_counter()
    for data, n in round_sets(Path(a.data), a.n):
        assert data.groups is not None
        frames.append(run_benchmark(data, resamples=3 * data.groups.nunique(), n=n, shifts=["none"], split="groups"))
        print(f"{data.name} rounds: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(out / "rounds_resamples.csv.gz", index=False)
    summarize_benchmark(df).to_csv(out / "rounds_summary.csv", index=False)

if __name__ == "__main__":
    main()
