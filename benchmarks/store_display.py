"""`hero store estimate` against `hero estimate --calibration` on the same round, timed side by side (issue #38).

A user who keeps rounds in a store asks for a round's estimate with ``hero store estimate NAME``; one who keeps a
calibration file runs ``hero estimate FILE --calibration calib.json``. Both print the same recommended estimate
(the store reuses its cached Stage A fit); the store may also load the history to add HERO joint. This script
builds, for each case, a store in a temporary folder (the history's rounds with their gold, the current round
without), writes the store's calibration with ``hero store calibrate -o calib.json`` (which also caches it), and
then times, as a user would see them (each command a fresh process, wall seconds, median of ``--repeats``):

* ``hero estimate FILE --calibration calib.json`` (the reference);
* ``hero store estimate NAME`` (the default: the history loaded when small, so HERO joint is shown too);
* ``hero store estimate NAME --no-history`` (what the calibration file alone allows);
* ``hero --help``: the floor of any command here (Python start-up and the CLI's imports).

It also checks that the recommended estimate and interval agree between the store and the calibration file
(``-f json``). Cases: the bundled TriviaQA example (8 history rounds, 11 LLM judges) and the shared ``mre_treat``
crowd (466 workers; a random 200 gold items are the current round, half of the rest's gold revealed).

    .venv/bin/python -m benchmarks.store_display            # about 2 minutes here
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.workflows.demo import example_paths

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
HERO = [sys.executable, "-c", "from heroeval.cli import app; app()"]


def hero(args: list[str], cwd: Path) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run([*HERO, *args], cwd=cwd, capture_output=True, text=True, check=False)
    secs = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"hero {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return secs, r.stdout


def triviaqa(folder: Path) -> tuple[list[tuple[Path, Path]], Path]:
    ex = example_paths()
    hist = pd.read_csv(ex["history"])
    rounds = []
    for model, part in hist.groupby("round"):
        f = folder / f"{model}.csv"
        part.drop(columns="round").to_csv(f, index=False)
        rounds.append((f, Path(ex["gold"])))
    cur = folder / "current.csv"
    pd.read_csv(ex["current"]).to_csv(cur, index=False)
    return rounds, cur


def mre_treat(folder: Path) -> tuple[list[tuple[Path, Path]], Path]:
    lab = pd.read_csv(SHARED / "mre_treat" / "labels.csv", dtype=str)
    gold = pd.read_csv(SHARED / "mre_treat" / "gold.csv", dtype=str)
    rng = np.random.default_rng(2026)
    gi = gold["item_id"][gold["item_id"].isin(set(lab["item_id"]))].to_numpy()
    cur_items = set(rng.choice(gi, 200, replace=False).tolist())
    hist, cur = folder / "history.csv", folder / "current.csv"
    lab[~lab["item_id"].isin(cur_items)].to_csv(hist, index=False)
    lab[lab["item_id"].isin(cur_items)].to_csv(cur, index=False)
    g = gold[~gold["item_id"].isin(cur_items)].sample(frac=0.5, random_state=2026)
    g.to_csv(folder / "history_gold.csv", index=False)
    return [(hist, folder / "history_gold.csv")], cur


def run_case(name: str, build, repeats: int) -> dict[str, object]:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        rounds, cur = build(d)
        for f, g in rounds:
            hero(["store", "add", str(f), "--gold", str(g)], d)
        hero(["store", "add", str(cur), "--name", "current", "--role", "current"], d)
        hero(["store", "calibrate", "-o", "calib.json"], d)
        new_lab = ["--new-labelers", "estimate"]
        cmds = {
            "estimate --calibration": ["estimate", str(cur), "--calibration", "calib.json", *new_lab],
            "store estimate": ["store", "estimate", "current"],
            "store estimate --no-history": ["store", "estimate", "current", "--no-history"],
            "hero --help": ["--help"],
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(repeats):
            for k, args in cmds.items():
                times[k].append(hero(args, d)[0])
        _, a = hero(["estimate", str(cur), "--calibration", "calib.json", *new_lab, "-f", "json"], d)
        _, b = hero(["store", "estimate", "current", "--no-history", "--json"], d)
        ra, rb = json.loads(a)["recommended"], json.loads(b)["recommended"]
        same = all(abs(ra[k] - rb[k]) < 1e-9 for k in ("estimate", "ci_low", "ci_high")) and ra["method"] == rb["method"]
    med = {k: statistics.median(v) for k, v in times.items()}
    ref = med["estimate --calibration"]
    return {"case": name, "median_s": med, "all_s": times,
            "ratio_store_to_calibration": med["store estimate"] / ref,
            "ratio_store_no_history_to_calibration": med["store estimate --no-history"] / ref,
            "same_recommended": same, "recommended": {k: ra[k] for k in ("method", "estimate", "ci_low", "ci_high")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/store/display.json"))
    a = ap.parse_args()
    cases = [("triviaqa (bundled)", triviaqa)]
    if (SHARED / "mre_treat").is_dir():
        cases.append(("mre_treat (shared)", mre_treat))
    rows = [run_case(n, b, a.repeats) for n, b in cases]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rows, indent=1) + "\n")
    print("| case | estimate --calibration (s) | store estimate (s) | ratio | store estimate --no-history (s) | ratio "
          "| hero --help (s) | same recommended |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["median_s"]
        assert isinstance(m, dict)
        print(f"| {r['case']} | {m['estimate --calibration']:.2f} | {m['store estimate']:.2f} | "
              f"{r['ratio_store_to_calibration']:.2f} | {m['store estimate --no-history']:.2f} | "
              f"{r['ratio_store_no_history_to_calibration']:.2f} | {m['hero --help']:.2f} | {r['same_recommended']} |")


if __name__ == "__main__":
    main()
