"""split="groups" with many small groups: the groups are dealt into ``group_blocks`` blocks, one round each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.workflows.benchmark import (
    BENCHMARK_DEFAULTS,
    GROUP_BLOCKS,
    BenchmarkData,
    Split,
    deal_blocks,
    make_split,
    run_benchmark,
)


def _data(n_groups: int, *, per_group: int = 12, gold_groups: int | None = None, seed: int = 0) -> BenchmarkData:
    """``n_groups`` groups of ``per_group`` items, 5 labelers of 80 % accuracy, 3 labels an item; gold on every item
    of the first ``gold_groups`` groups (all when None)."""
    rng = np.random.default_rng(seed)
    n = n_groups * per_group
    items = np.array([f"i{i:04d}" for i in range(n)])
    group = np.array([f"g{i // per_group:02d}" for i in range(n)])
    y = (rng.random(n) < 0.4).astype(int)
    rows = []
    for i in range(n):
        for j in rng.choice(5, 3, replace=False):
            rows.append((items[i], f"L{j}", int(y[i]) if rng.random() < 0.8 else 1 - int(y[i])))
    labels = pd.DataFrame(rows, columns=["item_id", "labeler_id", "label"])
    has_gold = np.ones(n, bool) if gold_groups is None else np.arange(n) < gold_groups * per_group
    gold = pd.DataFrame({"item_id": items[has_gold], "gold": y[has_gold]})
    return BenchmarkData("synthetic", labels, gold, None, pd.Series(group, index=items))


def _groups(data: BenchmarkData) -> pd.Series:
    assert data.groups is not None
    return data.groups


def _round_of(sp: Split) -> dict[str, str]:
    h = sp.history
    return {str(i): h.round_ids[k] for i, k in zip(h.item_ids, h.item_round, strict=True)}


def _same(a: Split, b: Split) -> bool:
    return (list(a.history.item_ids) == list(b.history.item_ids) and list(a.current.item_ids) == list(b.current.item_ids)
            and _round_of(a) == _round_of(b) and np.array_equal(a.history.gold, b.history.gold)
            and np.array_equal(a.history.label, b.history.label) and a.truth == b.truth and a.group == b.group)


def test_blocks_partition_the_groups_the_same_in_every_call() -> None:
    data = _data(37, gold_groups=29)
    blocks = deal_blocks(data, 6, seed=2026)
    assert blocks is not None
    assert sorted(blocks.index) == sorted(_groups(data).unique())  # every group in exactly one block
    assert not blocks.index.duplicated().any()
    assert set(blocks) == {f"block{k}of6" for k in range(1, 7)}
    sizes = blocks.value_counts()
    assert sizes.max() - sizes.min() <= 1  # dealt as cards: 37 groups -> 6 or 7 a block
    gold_groups = {f"g{k:02d}" for k in range(29)}
    assert all(any(g in gold_groups for g in blocks[blocks == b].index) for b in set(blocks))  # gold in every block
    again, other = deal_blocks(data, 6, seed=2026), deal_blocks(data, 6, seed=7)
    assert again is not None and other is not None
    pd.testing.assert_series_equal(blocks, again)  # fixed: no resample in it
    assert not other.equals(blocks)  # another seed deals anew
    assert deal_blocks(data, 37) is None and deal_blocks(data, None) is None  # at most group_blocks groups: no blocks


def test_current_round_is_one_block_and_the_history_the_other_blocks() -> None:
    data = _data(37, gold_groups=29)
    blocks = deal_blocks(data, 6, seed=2026)
    assert blocks is not None
    block_of = _groups(data).map(blocks)
    seen = []
    for r in range(12):
        sp = make_split(data, r, 0.2, 40, "none", 2026, "groups", group_blocks=6)
        seen.append(sp.group)
        cur_blocks = set(block_of[list(sp.current.item_ids)])
        assert cur_blocks == {sp.group}  # every current item from the one block the row names
        assert sp.current.n_items == min(40, int((data.gold["item_id"].map(block_of) == sp.group).sum()))
        assert not set(sp.current.item_ids) & set(sp.history.item_ids)  # none of them in the history
        rounds = _round_of(sp)
        assert set(sp.history.round_ids) == set(blocks) - {sp.group}  # one history round per other block
        assert all(block_of[i] == b for i, b in rounds.items())
        assert set(rounds) == set(block_of.index[block_of != sp.group])  # the other blocks' items, all of them
    assert seen == [f"block{k % 6 + 1}of6" for k in range(12)]  # resample r: block r mod 6
    assert not _same(make_split(data, 0, 0.2, 40, "none", 2026, "groups", group_blocks=6),
                     make_split(data, 6, 0.2, 40, "none", 2026, "groups", group_blocks=6))  # same block, new draw


def test_blocks_without_gold_stay_in_the_history() -> None:
    data = _data(14, gold_groups=4)  # 14 groups in 6 blocks, gold in 4 groups: 2 blocks without gold
    groups = [make_split(data, r, 0.2, 30, "none", 2026, "groups", group_blocks=6).group for r in range(8)]
    assert len(set(groups)) == 4 and groups[:4] == groups[4:]
    sp = make_split(data, 0, 0.2, 30, "none", 2026, "groups", group_blocks=6)
    assert len(sp.history.round_ids) == 5


def test_with_at_most_group_blocks_groups_nothing_changes() -> None:
    few = _data(4, per_group=30)
    for r in range(5):
        for shift in ("none", "half"):
            ref = make_split(few, r, 0.1, 20, shift, 2026, "groups", group_blocks=None)
            assert ref.group == f"g{r % 4:02d}"
            for k in (4, 6, GROUP_BLOCKS, 100):
                assert _same(make_split(few, r, 0.1, 20, shift, 2026, "groups", group_blocks=k), ref)
            assert _same(make_split(few, r, 0.1, 20, shift, 2026, "groups"), ref)  # the default, 10
    many = _data(37)
    for r in (0, 5):  # more groups than group_blocks=None or 100 keeps each group a round of its own
        a, b = (make_split(many, r, 0.1, 20, "none", 2026, "groups", group_blocks=x) for x in (None, 100))
        assert _same(a, b) and a.group == f"g{r:02d}" and len(a.history.round_ids) == 36


def test_group_blocks_is_checked_and_reaches_the_rows(tmp_path: Path) -> None:
    data = _data(12, per_group=15)
    assert BENCHMARK_DEFAULTS["group_blocks"] == GROUP_BLOCKS == 10
    for bad in (1, 0, -3, 2.5, True, "4"):
        with pytest.raises(HeroEvalError, match="group_blocks must be an integer >= 2"):
            run_benchmark(data, resamples=2, split="groups", shifts=["none"], group_blocks=bad)  # type: ignore[arg-type]
    df = run_benchmark(data, resamples=2, rhos=(0.2,), n=30, split="groups", shifts=["none"], workers=1, auto=False,
                       group_blocks=3)
    assert set(df["group"]) == {"block1of3", "block2of3"}
    # the CLI: --group-blocks, 0 for none, a bad value named as the option
    d = tmp_path / "folder"
    d.mkdir()
    data.labels.to_csv(d / "labels.csv", index=False)
    data.gold.to_csv(d / "gold.csv", index=False)
    pd.DataFrame({"item_id": _groups(data).index, "topic": _groups(data).to_numpy()}).to_csv(d / "items.csv", index=False)
    args = ["benchmark", str(d), "--split", "groups", "--group-col", "topic", "--reps", "2", "--rho", "0.2",
            "--shift", "none", "--n", "30", "--workers", "1"]
    r = CliRunner().invoke(app, [*args, "--group-blocks", "1"])
    assert r.exit_code == 2 and "--group-blocks must be an integer >= 2, or 0" in r.stderr
    r = CliRunner().invoke(app, ["benchmark", "--help"], env={"COLUMNS": "200"})
    assert "--group-blocks" in r.stdout and "[default: 10]" in " ".join(r.stdout.split("--group-blocks")[1].split()[:60])
