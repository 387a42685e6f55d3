"""The HTML report in a real browser: Debian's Chromium, headless, driven by Playwright.

Locally the tests skip (with the reason) when Chromium or Playwright is
missing; in CI (``CI=true``) they fail instead. Install Chromium with
``apt-get install -y chromium`` (``.ci/run`` does). The screenshot of the
demo report is saved to ``tests/browser/artifacts/demo-report.png``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.report.html import build_report
from heroeval.workflows.demo import run_demo
from tests.hostile import HOSTILE, hostile

CHROMIUM = os.environ.get("HEROEVAL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
IN_CI = os.environ.get("CI", "").lower() == "true"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _unavailable() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} not found (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = _unavailable()
    if why is not None:
        if IN_CI:
            pytest.fail(f"the browser test must run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="hero-chromium-")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                   viewport={"width": 1280, "height": 900})
        try:
            yield ctx
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    w = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
    h = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
    return max(w, 0.0) * max(h, 0.0)


def _fmt(v: Any, field: str) -> str:
    if v is None:
        return "–"
    if field in ("n_items", "n_annotations", "n_labelers", "index", "n_history_labels", "gold_overlap"):
        return str(int(v))
    if field == "error":
        return f"{v:+.4f}"
    if field in ("sensitivity", "specificity"):
        return f"{v:.3f}"
    return f"{v:.4f}"


def test_demo_report_renders_and_shows_the_numbers(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "demo-report.html"
    r = CliRunner().invoke(app, ["demo", "--report", str(out)])
    assert r.exit_code == 0, r.output
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda q: requests.append(q.url))
    page.goto(out.as_uri())
    page.wait_for_load_state("load")

    # every figure decoded, with a size, inside the page width, none overlapping another figure or a table
    figs = page.eval_on_selector_all(
        "img.figure",
        "els => els.map(e => ({id: e.id, complete: e.complete, nw: e.naturalWidth, nh: e.naturalHeight,"
        " box: e.getBoundingClientRect().toJSON()}))")
    assert [f["id"] for f in figs] == ["fig-forest-current", "fig-labelers", "fig-pool"]
    width = page.evaluate("document.documentElement.clientWidth")
    for f in figs:
        assert f["complete"] and f["nw"] > 200 and f["nh"] > 150, f
        assert f["box"]["width"] > 200 and f["box"]["height"] > 150 and f["box"]["right"] <= width + 0.5, f
    blocks = figs + [{"id": f"table{k}", "box": b} for k, b in enumerate(page.eval_on_selector_all(
        "table, section > h2, figcaption", "els => els.map(e => e.getBoundingClientRect().toJSON())"))]
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            assert _overlap(a["box"], b["box"]) < 1.0, (a["id"], b["id"])
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1  # no horizontal overflow

    # the numbers in the tables are the embedded JSON's, and those are the API's
    data = json.loads(page.eval_on_selector("#hero-data", "e => e.textContent"))
    cells = page.eval_on_selector_all(
        "tr[data-method] td[data-field]",
        "els => els.map(e => [e.closest('tr').dataset.round, e.closest('tr').dataset.method, e.dataset.field,"
        " e.textContent])")
    assert len(cells) >= 6 * 8
    for rnd, method, field, text in cells:
        if field == "error":
            v = data["rounds"][rnd]["estimates"][method]["estimate"] - data["truth"]
        else:
            v = data["rounds"][rnd]["estimates"][method][field]
        assert text == _fmt(v, field), (method, field)
    lab_cells = page.eval_on_selector_all(
        "tr[data-labeler-index] td[data-field]",
        "els => els.map(e => [Number(e.closest('tr').dataset.labelerIndex), e.dataset.field, e.textContent])")
    labs = {lab["index"]: lab for lab in data["labelers"]}
    assert len(lab_cells) >= len(labs) * 4
    for idx, field, text in lab_cells:
        if field in labs[idx]:
            assert text == _fmt(labs[idx][field], field), (idx, field)
    d = run_demo()
    for m, res in d.estimates.items():
        assert data["rounds"]["current"]["estimates"][m]["estimate"] == pytest.approx(res.estimate, abs=1e-12)
    headline = page.inner_text(".card.primary .big")
    rec = d.estimates.recommended  # the headline is the recommended estimate (method="auto")
    assert rec is not None
    assert headline == f"{rec.result.estimate:.4f}"

    assert errors == []
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "demo-report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")
    page.close()


@pytest.mark.parametrize("csp", [True, False], ids=["as-written", "without-csp"])
def test_script_named_labelers_stay_text(browser: Any, tmp_path: Path, csp: bool) -> None:
    b = hostile()
    html_text = build_report(b.current, b.calibration, b.estimates, history=b.history)
    if not csp:  # prove the escaping alone is enough: drop the Content-Security-Policy that would also block scripts
        html_text, n = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html_text)
        assert n == 1
    out = tmp_path / "hostile.html"
    out.write_text(html_text, encoding="utf-8")
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dlg: (dialogs.append(dlg.message), dlg.dismiss()))
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)
    assert dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # the JSON block only
    assert page.evaluate("document.querySelectorAll('img:not(.figure)').length") == 0
    shown = page.eval_on_selector_all("td.labeler-name", "els => els.map(e => e.textContent)")
    for name in HOSTILE:
        assert name in shown
    data = json.loads(page.eval_on_selector("#hero-data", "e => e.textContent"))
    assert sorted(lab["id"] for lab in data["labelers"]) == sorted(HOSTILE)
    if csp:
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator("#labelers").screenshot(path=str(ARTIFACTS / "hostile-names.png"))
    page.close()
