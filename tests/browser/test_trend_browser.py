"""The store's HTML trend report in headless Chromium, with hostile round and labeler names.

Skips (with the reason) when Chromium or Playwright is missing, as the
evaluation report's browser test does; fails instead in CI.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import heroeval as he
from heroeval.report.html import write_report
from heroeval.report.trend import build_trend_report
from tests.browser.test_report_browser import ARTIFACTS, browser  # noqa: F401 - the fixture
from tests.conftest import simulate
from tests.hostile import HOSTILE


def _hostile_trend(tmp_path: Path) -> tuple[he.store.Trend, dict[str, float]]:
    st = he.Store(tmp_path / "hostile.duckdb")
    names = {f"L{j:02d}": HOSTILE[j] for j in range(6)}
    truth = {}
    for k, rname in enumerate(HOSTILE[:4]):
        s = simulate(11 + k, J=6, N=150, n=10, covariates=False, hist_prev=0.3 + 0.1 * k)
        h = s.history
        g = h.gold >= 0
        ds = he.AnnotationSet.from_arrays(
            [HOSTILE[k] + str(i) for i in h.item_ids[h.annotation_item]],
            [names[x] for x in h.labeler_ids[h.labeler]], h.label,
            gold=([HOSTILE[k] + str(i) for i in h.item_ids[g]], h.gold[g]), name=rname)
        st.add(ds, name=rname, model=HOSTILE[(k + 1) % 6], tags=[HOSTILE[k]])
        truth[rname] = 0.3 + 0.1 * k
    return st.trend(), truth


@pytest.mark.parametrize("csp", [True, False], ids=["as-written", "without-csp"])
def test_trend_report_renders_and_names_stay_text(browser: Any, tmp_path: Path, csp: bool) -> None:  # noqa: F811
    tr, truth = _hostile_trend(tmp_path)
    page_html = build_trend_report(tr, truth=truth)
    if not csp:  # the escaping alone must be enough
        page_html, n = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page_html)
        assert n == 1
    out = write_report(tmp_path / "trend.html", page_html)
    page = browser.new_page()
    dialogs: list[str] = []
    requests: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda dlg: (dialogs.append(dlg.message), dlg.dismiss()))
    page.on("request", lambda q: requests.append(q.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(Path(out).as_uri())
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)
    assert dialogs == [] and errors == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # the JSON block only
    assert page.evaluate("document.querySelectorAll('img:not(.figure)').length") == 0
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    imgs = page.eval_on_selector_all("img.figure", "els => els.map(e => [e.id, e.complete, e.naturalWidth])")
    assert [i[0] for i in imgs] == ["fig-trend", "fig-diff", "fig-drift"]
    assert all(c and w > 100 for _, c, w in imgs)
    shown = page.eval_on_selector_all("table.rates td.name", "els => els.map(e => e.textContent)")
    for name in HOSTILE[:4]:
        assert name in shown
    drift_names = set(page.eval_on_selector_all("table.drift td.name", "els => els.map(e => e.textContent)"))
    assert set(HOSTILE) <= drift_names
    est = page.eval_on_selector_all("table.rates td[data-field=estimate]", "els => els.map(e => e.textContent)")
    assert est == [f"{r.estimate:.4f}" for r in tr.rounds]
    data = json.loads(page.eval_on_selector("#hero-data", "e => e.textContent"))
    assert [r["round"] for r in data["rounds"]] == list(HOSTILE[:4])
    np.testing.assert_allclose([r["truth"] for r in data["rounds"]], [truth[n] for n in HOSTILE[:4]])
    if csp:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "trend-report.png"), full_page=True)
    page.close()


def test_trend_tables_fit_a_wide_screen(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """Issue #38: the trend's rates table scrolled sideways at 2,000 px (the page was 1,120 px wide at most); the
    page now grows with the screen, so at 2,000 px every table fits (at 1,280 px a table may still scroll)."""
    st = he.Store(tmp_path / "wide.duckdb")
    truth = {}
    for k in range(6):
        s = simulate(31 + k, J=5, N=120, n=10, covariates=False, hist_prev=0.3 + 0.05 * k)
        name = f"model-version-{k}-long-name"
        h = s.history
        st.add(h, name=name, model=f"model-{k}", date=f"2026-0{k + 1}-01")
        truth[name] = 0.3 + 0.05 * k
    out = write_report(tmp_path / "wide.html", build_trend_report(st.trend(), truth=truth))
    page = browser.new_page()
    page.set_viewport_size({"width": 2000, "height": 1000})
    page.goto(Path(out).as_uri())
    page.wait_for_load_state("load")
    widths = page.eval_on_selector_all("div.scroll", "els => els.map(e => [e.scrollWidth, e.clientWidth])")
    assert widths and all(sw <= cw for sw, cw in widths), widths
    ticks = page.eval_on_selector("#hero-data", "e => e.textContent")
    assert "model-version-0-long-name" in ticks
