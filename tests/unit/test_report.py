"""The HTML report: escaping of untrusted names, self-containment, and that it shows the API's numbers."""

from __future__ import annotations

import base64
import html
import json
import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.report.html import build_comparison_report, build_report, render_html, write_report
from heroeval.report.page_data import collect_warnings, comparison_report_data, report_data
from tests.conftest import Sim
from tests.hostile import CLOSER, HOSTILE, Hostile, hostile


@pytest.fixture(scope="module")
def bad() -> Hostile:
    return hostile()


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each element by tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    p.close()
    return p


def _embedded(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="hero-data">(.*?)</script>', page, re.S)
    assert m is not None
    out: dict[str, Any] = json.loads(m.group(1))
    return out


def _svgs(page: str) -> list[str]:
    return [base64.b64decode(b).decode("utf-8") for b in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', page)]


# ---------------------------------------------------------------- escaping


def test_hostile_names_are_text_not_markup(bad: Hostile) -> None:
    page = build_report(bad.current, bad.calibration, bad.estimates, history=bad.history,
                        sources={"current": f"/tmp/{HOSTILE[1]}.csv"})
    for name in HOSTILE:
        assert name not in page  # never verbatim: every < > " & is escaped
        assert html.escape(name, quote=True) in page
    p = _parse(page)
    # the only script is the JSON block; no element carries an event handler; images are data: only
    assert [t for t, _ in p.tags if t == "script"] == ["script"]
    assert [a.get("type") for t, a in p.tags if t == "script"] == ["application/json"]
    assert not [(t, k) for t, a in p.tags for k in a if k.startswith("on")]
    imgs = [a for t, a in p.tags if t == "img"]
    assert len(imgs) == 3 and all(str(a["src"]).startswith("data:image/svg+xml;base64,") for a in imgs)
    assert {t for t, _ in p.tags} <= {"html", "head", "meta", "title", "style", "body", "main", "header", "h1", "p",
                                      "ul", "li", "code", "nav", "a", "div", "section", "h2", "h3", "figure", "img",
                                      "figcaption", "table", "thead", "tbody", "tr", "th", "td", "br", "span", "script"}
    text = "".join(p.text)
    for name in HOSTILE:  # the browser shows each name as written
        assert name in text


def test_json_block_cannot_close_its_script(bad: Hostile) -> None:
    page = build_report(bad.current, bad.calibration, bad.estimates)
    m = re.search(r'id="hero-data">(.*)</script></body>', page, re.S)
    assert m is not None
    block = m.group(1)
    assert "<" not in block and ">" not in block and "&" not in block
    data = json.loads(block)
    assert [lab["id"] for lab in data["labelers"]] == list(bad.calibration.labeler_ids)
    assert data["rounds"]["current"]["name"] == CLOSER


def test_figures_carry_no_markup_from_names(bad: Hostile) -> None:
    page = build_report(bad.current, bad.calibration, bad.estimates)
    svgs = _svgs(page)
    assert len(svgs) == 3
    for svg in svgs:
        root = ET.fromstring(svg)  # well-formed XML despite the names
        tags = {el.tag.split("}")[-1] for el in root.iter()}
        assert not tags & {"script", "foreignObject", "iframe", "a"}
        for el in root.iter():
            assert not [k for k in el.attrib if k.lower().startswith("on")]
            if el.tag.endswith("}image"):  # the colour bar: an embedded PNG, nothing fetched
                href = next(v for k, v in el.attrib.items() if k.endswith("href"))
                assert href.startswith("data:image/png;base64,")
        assert "<script" not in svg and "<img" not in svg  # names survive only escaped, in comments


# --------------------------------------------------------- self-containment


def test_self_contained_no_network(sim: Sim, calibration: he.Calibration) -> None:
    page = build_report(sim.current, calibration, history=sim.history)
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', page, re.I)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    for svg in _svgs(page):
        assert "http://" not in svg.replace("http://www.w3.org/", "").replace("http://purl.org/", "").replace(
            "http://creativecommons.org/", "")
        assert not re.search(r'href="(?!#|data:image/png;base64,)', svg)  # in-document references and data: only
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


# ------------------------------------------------------------------ numbers


def test_numbers_match_the_api(sim: Sim, calibration: he.Calibration) -> None:
    res = he.estimate(sim.current, calibration, method="all", history=sim.history)
    assert isinstance(res, he.EstimateCollection)
    d = report_data(sim.current, calibration, res, history=sim.history, ci_method="wald", confidence_level=0.9)
    block = d["rounds"]["current"]
    assert set(block["estimates"]) == set(res)
    for m, r in res.items():
        e = block["estimates"][m]
        ci = r.confidence_interval(0.9, "wald")
        assert e["estimate"] == r.estimate and e["standard_error"] == pytest.approx(r.standard_error, rel=1e-15)
        assert (e["ci_low"], e["ci_high"]) == (ci.low, ci.high)
    # the table shows the same numbers, rounded to 4 places, in rows tagged by method
    page = render_html(d)
    for m in res:
        row = re.search(rf'<tr[^>]*data-round="current" data-method="{m}">(.*?)</tr>', page, re.S)
        assert row is not None, m
        for field in ("estimate", "standard_error", "ci_low", "ci_high"):
            cell = re.search(rf'data-field="{field}">([^<]*)<', row.group(1))
            assert cell is not None and cell.group(1) == f"{block['estimates'][m][field]:.4f}"
    assert _embedded(page)["rounds"] == json.loads(json.dumps(d["rounds"]))


def test_primary_is_hero1_without_a_recommendation(sim: Sim, calibration: he.Calibration) -> None:
    """The report recommends by default (issue #38: as hero report does); asked not to, HERO-1 comes first."""
    assert report_data(sim.current, calibration)["primary"] == "recommended"
    d = report_data(sim.current, calibration, recommend=False)
    order = d["rounds"]["current"]["order"]
    assert d["primary"] == "hero1" and order[:2] == ["hero1", "majority_vote"]


def test_recommended_estimate_shown_first_when_offered(sim: Sim, calibration: he.Calibration) -> None:
    res = he.estimate(sim.current, calibration, method="all", recommend=True, history=sim.history)
    assert isinstance(res, he.EstimateCollection) and res.recommended is not None
    d = report_data(sim.current, calibration, res)
    assert d["primary"] == "recommended"
    assert d["rounds"]["current"]["order"][0] == "recommended"
    chosen = res.recommended.result
    shown = d["rounds"]["current"]["estimates"]["recommended"]
    row = res.table().row("recommended")  # the one table model: label, status and interval as every view shows
    assert shown["label"] == row.title and row.title.startswith(f"recommended ({chosen.title}")
    assert (shown["status"], shown["ci_low"], shown["ci_high"]) == (row.status, row.ci_low, row.ci_high)
    assert d["rounds"]["current"]["estimates"]["recommended"]["estimate"] == chosen.estimate
    assert d["rounds"]["current"]["recommendation"]["reason"] == res.recommended.reason
    page = render_html(d)
    assert page.index('data-method="recommended"') < page.index('data-method="hero1"')


def test_labeler_intervals_from_the_parameter_covariance(calibration: he.Calibration) -> None:
    # independent: logit interval from the diagonal of the parameter covariance, by hand
    J = calibration.n_labelers
    V = calibration.parameter_covariance
    assert V is not None
    from heroeval.report.page_data import _labelers

    rows = _labelers(calibration, 0.95)
    z = norm.ppf(0.975)
    for k, r in enumerate(rows):
        for name, est, pos in (("sensitivity", calibration.alpha[k], k), ("specificity", calibration.beta[k], J + k)):
            se = math.sqrt(V[pos, pos])
            lg, s = math.log(est / (1 - est)), se / (est * (1 - est))
            lo, hi = 1 / (1 + math.exp(-(lg - z * s))), 1 / (1 + math.exp(-(lg + z * s)))
            assert r[name] == est
            assert r[f"{name}_ci"] == pytest.approx([lo, hi], rel=1e-12)
        assert r["gold_overlap"] == int(calibration.gold_tp[k] + calibration.gold_fn[k] + calibration.gold_tn[k]
                                        + calibration.gold_fp[k])


def test_pool_shift_by_hand() -> None:
    # history: a labels 3 items, b 1; current: a 1, b 1, c (new) 2
    hist = he.AnnotationSet.from_arrays([1, 2, 3, 1, 4], ["a", "a", "a", "b", "b"], [1, 0, 1, 1, 0],
                                        gold=([1, 2, 4], [1, 0, 0]), name="history")
    cur = he.AnnotationSet.from_arrays([7, 7, 8, 8], ["a", "b", "c", "c"], [1, 1, 0, 1], name="current")
    cal = he.calibrate(hist)
    res = he.estimate(cur, cal, method=["majority_vote", "hero1"], exclude_new_labelers=True)
    assert isinstance(res, he.EstimateCollection)
    pool = report_data(cur, cal, res)["pool"]
    got = {r["id"]: (r["history_share"], r["current_share"], r["known"]) for r in pool["labelers"]}
    assert got == {"a": (3 / 5, 1 / 4, True), "b": (2 / 5, 1 / 4, True), "c": (0.0, 2 / 4, False)}
    assert pool["total_variation"]["current"] == pytest.approx(0.5 * (0.35 + 0.15 + 0.5))
    assert pool["new_labelers"] == {"current": ["c"]}
    d = report_data(cur, cal, res, history=hist)
    page = render_html(d)
    assert "the history does not know: c." in page
    # three gold items are too few for the error-correlation check: shown as not applicable
    checks = [x for x in d["rounds"]["current"]["diagnostics"] if x["name"].startswith("Labelers' errors")]
    assert checks and all(x["ok"] is None and x["value"] is None for x in checks)
    assert '<span class="muted">n/a</span>' in page


def test_comparison_report_matches_compare(sim: Sim, calibration: he.Calibration) -> None:
    b = sim.current.take_items(np.arange(0, sim.current.n_items, 2))
    cc = he.compare(sim.current, b, calibration, method="all")
    d = comparison_report_data(cc, sim.current, b, calibration)
    # issue #40: the recommended difference first, the same numbers as compare's (and hero compare's)
    assert d["kind"] == "comparison" and d["primary"] == "recommended" and cc.recommended is not None
    rec, ci = d["difference"]["estimates"]["recommended"], cc.recommended.confidence_interval(0.95)
    assert (rec["estimate"], rec["ci_low"], rec["ci_high"], rec["status"]) == (
        cc.recommended.estimate, ci.low, ci.high, cc.recommended.status)
    for key, r in (("a", cc.recommended.a), ("b", cc.recommended.b)):  # each round's own recommended estimate
        assert d["rounds"][key]["estimates"]["recommended"]["estimate"] == r.result.estimate
    for m, c in cc.items():
        e = d["difference"]["estimates"][m]
        ci = c.confidence_interval(0.95)
        assert (e["estimate"], e["a"], e["b"]) == (c.estimate, c.a.estimate, c.b.estimate)
        assert (e["ci_low"], e["ci_high"]) == (ci.low, ci.high)
        assert e["p_value"] == c.p_value
    page = build_comparison_report(cc, sim.current, b, calibration)
    assert page.count('data-round="difference"') == len(cc) + 1
    assert 'data-round="a"' in page and 'data-round="b"' in page
    assert len(_svgs(page)) == 5  # difference, A, B, labelers, pool
    with pytest.raises(he.HeroEvalError, match="ComparisonCollection"):
        comparison_report_data(cc["hero1"], sim.current, b, calibration)


def test_warnings_recorded_and_shown(sim: Sim, calibration: he.Calibration) -> None:
    # a current round whose covariate is shifted far from the history's: HERO-2 warns
    cur = sim.current
    assert cur.covariates is not None
    shifted = he.AnnotationSet.from_arrays(
        cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler], cur.label,
        covariates=(cur.item_ids, cur.covariates + 3.0), covariate_names=["x"], name="shifted")
    with pytest.warns(he.errors.CovariateShiftWarning):
        d = report_data(shifted, calibration)
    assert any(w.startswith("CovariateShiftWarning:") for w in d["warnings"])
    diag = {x["name"]: x for x in d["rounds"]["current"]["diagnostics"]}
    shift = diag["HERO-2 covariate shift (Wald test, current vs history means)"]
    assert shift["ok"] is False and shift["value"] < 1e-3
    page = render_html(d)
    assert 'id="warning-list"' in page and "CovariateShiftWarning" in page


def test_collect_warnings_passes_them_on() -> None:
    import warnings

    def f() -> int:
        warnings.warn("careful", he.errors.ConvergenceWarning, stacklevel=1)
        return 3

    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        out, msgs = collect_warnings(f)
    assert out == 3 and msgs == ["ConvergenceWarning: careful"] and len(outer) == 1


def test_nan_shown_as_dash_and_bad_settings(sim: Sim, calibration: he.Calibration, tmp_path: Any) -> None:
    d = report_data(sim.current, calibration)
    d["rounds"]["current"]["estimates"]["hero1"]["standard_error"] = None
    page = render_html(d)
    row = re.search(r'<tr[^>]*data-method="hero1">(.*?)</tr>', page, re.S)
    assert row is not None and 'data-field="standard_error">–<' in row.group(1)
    with pytest.raises(he.HeroEvalError, match="confidence_level"):
        report_data(sim.current, calibration, confidence_level=1.5)
    with pytest.raises(he.HeroEvalError, match="ci_method"):
        report_data(sim.current, calibration, ci_method="exact")
    with pytest.raises(he.HeroEvalError, match="cannot write the report"):
        write_report(tmp_path / "missing" / "r.html", page)
    p = write_report(tmp_path / "r.html", page)
    assert p.read_text(encoding="utf-8") == page


# ------------------------------------------------- dependence diagnostics


def test_error_correlation_by_hand() -> None:
    from heroeval.checks.dependence import error_correlation

    # 12 gold-1 items; a and b wrong on the same items 0-3, c wrong on 4-6, d on 0 and 7
    items = [f"i{k:02d}" for k in range(12)]
    wrong = {"a": {0, 1, 2, 3}, "b": {0, 1, 2, 3}, "c": {4, 5, 6}, "d": {0, 7}}
    rows = [(i, lab, 0 if k in wrong[lab] else 1) for k, i in enumerate(items) for lab in wrong]
    ds = he.AnnotationSet.from_arrays([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                                      gold=(items, [1] * 12))
    got = error_correlation(ds, n_shuffles=20)
    assert set(got) == {"gold_1"}
    E = np.array([[k in wrong[lab] for lab in "abcd"] for k in range(12)], dtype=float)
    C = np.corrcoef(E, rowvar=False)
    expect = C[~np.eye(4, dtype=bool)].mean()
    assert got["gold_1"]["mean_correlation"] == pytest.approx(expect, abs=1e-12)
    assert got["gold_1"]["n_items"] == 12


def test_error_correlation_near_zero_when_independent_and_flags_copies(sim: Sim) -> None:
    from heroeval.checks.dependence import error_correlation

    # the conftest simulation draws labels independently given the truth
    indep = error_correlation(sim.history)
    for v in indep.values():
        assert abs(v["mean_correlation"]) < 0.1
    # make two labelers copy a third: their errors coincide
    h = sim.history
    labs = h.labeler_ids[h.labeler].astype(object)
    items = h.item_ids[h.annotation_item]
    first = {}
    for i, z in zip(items, h.label, strict=True):
        first.setdefault(i, z)
    copied = [first[i] if lab in ("L01", "L02") else z for i, lab, z in zip(items, labs, h.label, strict=True)]
    g = h.gold >= 0
    dep = he.AnnotationSet.from_arrays(items, labs, copied, gold=(h.item_ids[g], h.gold[g]))
    got = error_correlation(dep)
    assert all(not v["ok"] for v in got.values())
    assert all(v["mean_correlation"] > indep[k]["mean_correlation"] + 0.05 for k, v in got.items())


def test_report_shows_dependence_and_joint_gap(sim: Sim, calibration: he.Calibration) -> None:
    res = he.estimate(sim.current, calibration, method="all", history=sim.history)
    assert isinstance(res, he.EstimateCollection)
    d = report_data(sim.current, calibration, res, history=sim.history)
    diag = {x["name"]: x for x in d["rounds"]["current"]["diagnostics"]}
    gap = diag["HERO joint − HERO-1"]
    assert gap["value"] == pytest.approx(res["hero_joint"].estimate - res["hero1"].estimate, abs=1e-15)
    assert any(k.startswith("Labelers' errors alike on gold-1") for k in diag)
    assert f'{gap["value"]:+.4f}' in render_html(d)
