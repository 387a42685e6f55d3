"""Readers for labels where they live (issue #38, item 6): Label Studio's JSON export and inspect-ai's logs.

inspect-ai logs are written by the real tool inside the tests: a tiny task run with inspect-ai's mock model
provider (``mockllm``, with custom outputs, so nothing goes to the network), scored by ``match()``,
``includes()`` and two ``model_graded_qa()`` graders that are themselves mock models. The reader's view is
checked against the samples as the log stores them, read independently (plain JSON, or the ``.eval`` zip).

Label Studio is a Django server, too heavy to run here. Its export is built by hand, following:

* the documented "JSON" export and task format, https://labelstud.io/guide/export.html and
  https://labelstud.io/guide/task_format.html (a list of tasks with ``id``, ``data``, ``annotations``
  [``id``, ``completed_by``, ``result`` [``id``, ``from_name``, ``to_name``, ``type``, ``value``, ``origin``],
  ``was_cancelled``, ``ground_truth``, ``lead_time``, ...] and ``predictions`` [``model_version``,
  ``result``, ``score``, ...]);
* the export serializer in HumanSignal/label-studio, ``label_studio/data_export/serializers.py``: in older
  releases ``completed_by`` is the user object ``{"id", "email", "first_name", "last_name"}``
  (``CompletedBySerializer``), in newer ones the user's id (``PrimaryKeyRelatedField``, expandable to the
  object), and ``predictions`` may be exported as ids only (``SerializationOptionsSerializer``'s
  ``predictions.only_id``).

``tests/data/formats/label_studio_export.json`` holds those variants: ``completed_by`` as an int and as a
user object, a cancelled annotation, a second Choices control (``quality``) and a TextArea (``comment``),
ground-truth annotations by an expert, predictions with a ``model_version`` and one exported as an id, a
choice mapped to None and a task nobody labelled.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import heroeval as he
from heroeval.errors import DataError
from heroeval.ingest import AnnotationSet, read_inspect_log, read_label_studio
from heroeval.ingest.formats import _score_label

DATA = Path(__file__).resolve().parents[1] / "data" / "formats"
EXPORT = DATA / "label_studio_export.json"
TOXIC = {"Toxic": 1, "Safe": 0, "Unsure": None}

# inspect-ai's retry helper calls tenacity with a parameter tenacity deprecates: not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")


def _labels(ds: AnnotationSet) -> dict[tuple[str, str], int]:
    """(item, labeler) -> label of a set without repeated pairs."""
    items = ds.item_ids[ds.annotation_item]
    out = {(str(i), str(ds.labeler_ids[j])): int(z) for i, j, z in zip(items, ds.labeler, ds.label, strict=True)}
    assert len(out) == ds.n_annotations
    return out


def _gold(ds: AnnotationSet) -> dict[str, int]:
    return {str(i): int(g) for i, g in zip(ds.item_ids, ds.gold, strict=True) if g >= 0}


def _check_bookkeeping(ds: AnnotationSet) -> None:
    for t in ds.report.tables:
        assert t.rows_read == t.rows_used + sum(t.dropped.values())
    first, *rest = ds.report.tables
    assert sum(t.rows_read for t in rest) == first.rows_used  # every row passed on is accounted for after


def _estimate_from(history: AnnotationSet, current: AnnotationSet) -> he.EstimateResult:
    cal = he.calibrate(history)
    res = he.estimate(current, cal)
    assert isinstance(res, he.EstimateResult)
    ci = res.confidence_interval()
    assert math.isfinite(res.estimate) and 0 <= res.estimate <= 1
    assert math.isfinite(ci.low) and math.isfinite(ci.high)
    assert ci.low <= res.estimate <= ci.high
    return res


# ---------------------------------------------------------------------------
# Label Studio
# ---------------------------------------------------------------------------


def test_label_studio_export_every_variant() -> None:
    ds = read_label_studio(EXPORT, label_map=TOXIC, from_name="toxic", use_ground_truth=True,
                           include_predictions=True)
    assert _labels(ds) == {
        ("101", "1"): 0, ("101", "2"): 0, ("101", "prediction:clf-v1"): 0,
        ("102", "1"): 1, ("102", "2"): 1, ("102", "3"): 0, ("102", "prediction:clf-v1"): 1,
    }
    assert _gold(ds) == {"102": 1}  # Eve's ground truth; her label of task 103 has no silver label to join
    assert ds.name == "label_studio_export" and ds.round_ids == ("all",)
    first = ds.report.tables[0]
    assert first.table == "label studio annotations" and first.source == str(EXPORT)
    assert (first.rows_read, first.rows_used) == (13, 9)  # 10 annotations + 3 predictions; 7 silver + 2 gold
    assert dict(first.dropped) == {
        "cancelled (skipped) annotation": 1,
        "no result for control 'toxic'": 1,
        "choice mapped to None by label_map": 1,
        "prediction exported as an id only (no result)": 1,
    }
    assert dict(first.notes) == {"results of other controls, ignored": 3, "tasks with no annotation": 1}
    gold = next(t for t in ds.report.tables if t.table == "gold")
    assert gold.dropped == {"gold for an item with no silver label": 1}
    _check_bookkeeping(ds)
    assert any("cancelled" in line for line in ds.report.lines())


def test_label_studio_defaults_keep_ground_truth_and_skip_predictions() -> None:
    ds = read_label_studio(EXPORT, label_map=TOXIC, from_name="toxic")
    assert ds.n_gold == 0
    assert set(ds.labeler_ids) == {"1", "2", "3", "4"}  # Eve (user 4) is one more labeler
    notes = ds.report.tables[0].notes
    assert notes["ground-truth annotations read as silver labels (use_ground_truth=False)"] == 2
    assert notes["predictions not read (include_predictions=False)"] == 3
    _check_bookkeeping(ds)


def test_label_studio_gzipped_export_reads_the_same(tmp_path: Path) -> None:
    gz = tmp_path / "export.json.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write(EXPORT.read_text())
    a = read_label_studio(gz, label_map=TOXIC, from_name="toxic")
    b = read_label_studio(EXPORT, label_map=TOXIC, from_name="toxic")
    assert _labels(a) == _labels(b) and a.name == "export"


@pytest.mark.parametrize("experts", [["eve@example.org"], [4], ["4"]])
def test_label_studio_gold_annotators_by_id_or_email(experts: list[Any]) -> None:
    ds = read_label_studio(EXPORT, label_map=TOXIC, from_name="toxic", gold_annotators=experts)
    assert _gold(ds) == {"102": 1}
    assert "4" not in set(ds.labeler_ids)


def test_label_studio_item_field_and_binary_choices() -> None:
    tasks = json.loads(EXPORT.read_text())
    for t in tasks:  # choices that already spell a binary value need no label_map
        for a in t["annotations"]:
            for r in a["result"]:
                if r["from_name"] == "toxic":
                    r["value"]["choices"] = [{"Toxic": "Yes", "Safe": "no", "Unsure": "YES"}[r["value"]["choices"][0]]]
    ds = read_label_studio(tasks, from_name="toxic", item_field="ref")
    assert set(ds.item_ids) == {"doc-101", "doc-102", "doc-103"}
    assert _labels(ds)[("doc-103", "3")] == 1
    assert ds.report.tables[0].source == "<Label Studio tasks>"


def _studio_export(seed: int, n: int, first_id: int, experts_every: int | None) -> list[dict[str, Any]]:
    """An export in the documented "JSON" format: four annotators with their own error rates (user ids 1-4,
    written alternately as ids and as user objects), an expert (user 9) marking ground truth, a cancelled
    annotation now and then, and a model's predictions."""
    rng = np.random.default_rng(seed)
    sens, spec = [0.9, 0.8, 0.75, 0.85], [0.85, 0.9, 0.7, 0.8]
    tasks = []
    for k in range(n):
        tid = first_id + k
        truth = rng.random() < 0.35
        anns = []
        for j in range(4):
            says = bool(rng.random() < (sens[j] if truth else 1 - spec[j]))
            user: Any = j + 1 if k % 2 else {"id": j + 1, "email": f"u{j + 1}@example.org", "first_name": "",
                                               "last_name": ""}
            cancelled = rng.random() < 0.03
            result = [] if cancelled else [{"id": f"r{tid}-{j}", "type": "choices", "from_name": "sentiment",
                                             "to_name": "text", "origin": "manual",
                                             "value": {"choices": ["Negative" if says else "Positive"]}}]
            anns.append({"id": tid * 10 + j, "completed_by": user, "result": result, "was_cancelled": cancelled,
                         "ground_truth": False, "lead_time": 3.2, "task": tid})
        if experts_every and k % experts_every == 0:
            anns.append({"id": tid * 10 + 9, "completed_by": 9, "was_cancelled": False, "ground_truth": True,
                         "task": tid, "result": [{"id": f"g{tid}", "type": "choices", "from_name": "sentiment",
                                                  "to_name": "text", "origin": "manual",
                                                  "value": {"choices": ["Negative" if truth else "Positive"]}}]})
        pred = {"id": tid, "model_version": "bert-1", "score": 0.5, "task": tid, "result": [
            {"id": f"p{tid}", "type": "choices", "from_name": "sentiment", "to_name": "text",
             "value": {"choices": ["Negative" if rng.random() < 0.5 else "Positive"]}}]}
        tasks.append({"id": tid, "data": {"text": f"review {tid}"}, "annotations": anns, "predictions": [pred]})
    return tasks


def test_label_studio_end_to_end_estimate(tmp_path: Path) -> None:
    hist_path, cur_path = tmp_path / "history.json", tmp_path / "current.json"
    hist_path.write_text(json.dumps(_studio_export(1, 400, 1, experts_every=4)))
    cur_path.write_text(json.dumps(_studio_export(2, 200, 1001, experts_every=None)))
    negative = {"Negative": 1, "Positive": 0}
    history = read_label_studio(hist_path, label_map=negative, use_ground_truth=True)
    current = read_label_studio(cur_path, label_map=negative)
    assert history.n_gold == 100 and set(history.labeler_ids) == {"1", "2", "3", "4"}
    assert current.n_gold == 0 and current.n_items == 200
    assert history.report.tables[0].dropped["cancelled (skipped) annotation"] > 0
    _check_bookkeeping(history)
    res = _estimate_from(history, current)
    assert 0.15 < res.estimate < 0.6


def test_label_studio_bad_inputs(tmp_path: Path) -> None:
    def write(obj: Any, name: str = "bad.json") -> Path:
        p = tmp_path / name
        p.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
        return p

    tasks = json.loads(EXPORT.read_text())
    p = write({"id": 1, "annotations": []})
    with pytest.raises(DataError, match=r"bad\.json.*list of tasks.*looks like one task"):
        read_label_studio(p)
    with pytest.raises(DataError, match=r"not a JSON file"):
        read_label_studio(write("[{oops", "broken.json"))
    with pytest.raises(DataError, match=r"no such file"):
        read_label_studio(tmp_path / "absent.json")
    no_ann = [dict(tasks[0]), {k: v for k, v in tasks[1].items() if k != "annotations"}]
    with pytest.raises(DataError, match=r"bad\.json, task 102: no 'annotations' list"):
        read_label_studio(write(no_ann), from_name="toxic")
    with pytest.raises(DataError, match=r"several Choices controls, \['quality', 'toxic'\].*from_name="):
        read_label_studio(EXPORT, label_map=TOXIC)
    with pytest.raises(DataError, match=r"from_name='sentimnet'.*\['quality', 'toxic'\]"):
        read_label_studio(EXPORT, label_map=TOXIC, from_name="sentimnet")
    with pytest.raises(DataError, match=r"control 'comment' has results of type \['textarea'\]"):
        read_label_studio(EXPORT, from_name="comment")
    with pytest.raises(DataError, match=r"label_studio_export\.json, task 103, annotation 9: choice 'Unsure' of "
                                        r"control 'toxic' is not in label_map"):
        read_label_studio(EXPORT, label_map={"Toxic": 1, "Safe": 0}, from_name="toxic")
    with pytest.raises(DataError, match=r"task 101, annotation 1: choice 'Safe' .* not a binary value.*label_map="):
        read_label_studio(EXPORT, from_name="toxic")
    with pytest.raises(DataError, match=r"label_map maps 'Toxic' to 2"):
        read_label_studio(EXPORT, label_map={"Toxic": 2}, from_name="toxic")
    with pytest.raises(DataError, match=r"item_field='url'.*keys: \['ref', 'text'\]"):
        read_label_studio(EXPORT, label_map=TOXIC, from_name="toxic", item_field="url")
    bad_result = json.loads(EXPORT.read_text())
    bad_result[0]["annotations"][0]["result"] = {"choices": ["Safe"]}
    with pytest.raises(DataError, match=r"task 101, annotation 1: 'result' must be a list"):
        read_label_studio(bad_result, label_map=TOXIC, from_name="toxic")
    all_cancelled = [{"id": 1, "data": {}, "annotations": [
        {"id": 1, "completed_by": 1, "was_cancelled": True, "result": [
            {"from_name": "x", "to_name": "t", "type": "choices", "value": {"choices": ["1"]}}]}]}]
    with pytest.raises(DataError, match=r"no silver label left to read \(1 cancelled \(skipped\) annotation\)"):
        read_label_studio(all_cancelled)


def test_label_studio_repeats_and_conflicts_reported_by_read_annotations() -> None:
    tasks = [{"id": 1, "data": {}, "annotations": [
        {"id": a, "completed_by": u, "ground_truth": gt, "result": [
            {"from_name": "ok", "to_name": "t", "type": "choices", "value": {"choices": [c]}}]}
        for a, u, gt, c in [(1, 5, False, "yes"), (2, 5, False, "no"), (3, 6, True, "yes"), (4, 7, True, "no")]]}]
    with pytest.raises(DataError, match=r"<Label Studio tasks>: .*gold for item '1' is 0 here but 1"):
        read_label_studio(tasks, use_ground_truth=True)
    ds = read_label_studio(tasks)  # the same user twice on a task: kept as two labels, noted
    notes = next(t for t in ds.report.tables if t.table == "annotations").notes
    assert notes == {"repeated (item, labeler) pair kept as separate labels": 1}


# ---------------------------------------------------------------------------
# inspect-ai
# ---------------------------------------------------------------------------

N_SAMPLES = 40


def _answer(model: str, i: int) -> tuple[str, int]:
    """The mock model's answer to sample ``i`` and whether it is right: a share of right answers per model,
    in two forms each, so that match() and includes() err in their own ways."""
    share = {"model-a": 6, "model-b": 4, "model-c": 3}[model]
    right = (i * 7 + len(model)) % 10 < share
    if right:
        return (f"w{i}" if i % 3 else f"I believe it is w{i}, surely"), 1
    return ("no idea" if i % 2 else f"not w{i}"), 0


def _noisy(text: str, flip_percent: int) -> bool:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 100 < flip_percent


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three logs written by inspect-ai: two history models (``.eval``) and a current one (``.json``, two
    epochs), each scored by match(), includes() and two mock-model graders (the second with partial credit)."""
    inspect_ai = pytest.importorskip("inspect_ai")
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes, match, model_graded_qa
    from inspect_ai.solver import generate

    def output(text: str) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm", content=text)
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tokenizer download
        return out

    def solver_model(name: str) -> Any:
        def respond(messages: list[Any], *_: Any) -> ModelOutput:
            i = int(messages[-1].text.split("w")[-1])
            return output(_answer(name, i)[0])
        return get_model(f"mockllm/{name}", custom_outputs=respond)

    def grader(name: str, flip: int, partial: bool) -> Any:
        def grade(messages: list[Any], *_: Any) -> ModelOutput:
            text = messages[-1].text
            submission = text.split("[Submission]:")[1].split("[")[0]
            right = "no idea" not in submission and "not w" not in submission
            if _noisy(name + text, flip):
                right = not right
            grade_ = "P" if partial and _noisy("p" + text, 20) else ("C" if right else "I")
            return output(f"GRADE: {grade_}")
        return get_model(f"mockllm/{name}", custom_outputs=grade)

    samples = [Sample(input=f"Repeat the word w{i}", target=f"w{i}", id=f"s{i}") for i in range(N_SAMPLES)]
    task = inspect_ai.Task(dataset=samples, solver=generate(),
                           scorer=[match(), includes(), model_graded_qa(model=grader("grader-1", 12, False)),
                                   model_graded_qa(model=grader("grader-2", 18, True), partial_credit=True)])
    root = tmp_path_factory.mktemp("inspect")
    history = inspect_ai.eval(task, model=[solver_model("model-a"), solver_model("model-b")],
                              log_dir=str(root / "history"), display="none")
    current = inspect_ai.eval(task, model=solver_model("model-c"), log_dir=str(root / "current"),
                              log_format="json", epochs=2, display="none")
    assert all(log.status == "success" for log in [*history, *current]), [log.error for log in history]
    return {"history": [log.location for log in history], "current": current[0].location}


def _json_samples(path: str) -> list[dict[str, Any]]:
    """The samples of a ``.json`` log, read as plain JSON."""
    return list(json.loads(Path(path).read_text())["samples"])


def _zip_samples(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and samples of an ``.eval`` log, read from the zip (inspect-ai compresses its entries with
    zstandard; ``zipfile_zstd``, installed with inspect-ai, teaches ``zipfile`` to read them)."""
    pytest.importorskip("zipfile_zstd")
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.startswith("samples/")]
        return json.loads(z.read("header.json")), [json.loads(z.read(n)) for n in names]


def _expected(samples: list[dict[str, Any]], prefix: str, epochs: bool) -> tuple[dict[tuple[str, str], int], int]:
    values = {"C": 1, "I": 0}
    out, partial = {}, 0
    for s in samples:
        item = f"{prefix}{s['id']}" + (f"#{s['epoch']}" if epochs else "")
        for scorer, score in s["scores"].items():
            if score["value"] in values:
                out[(item, scorer)] = values[score["value"]]
            else:
                assert score["value"] == "P"
                partial += 1
    return out, partial


def test_inspect_json_log_matches_its_samples(inspect_logs: dict[str, Any]) -> None:
    path = inspect_logs["current"]
    samples = _json_samples(path)
    assert len(samples) == 2 * N_SAMPLES
    assert set(samples[0]["scores"]) == {"match", "includes", "model_graded_qa", "model_graded_qa1"}
    ds = read_inspect_log(path)
    expected, partial = _expected(samples, "", epochs=True)
    assert partial > 0
    assert _labels(ds) == expected
    assert ds.n_items == 2 * N_SAMPLES and "s7#2" in set(ds.item_ids)
    assert ds.round_ids == ("mockllm/model-c",) and ds.n_gold == 0
    first = ds.report.tables[0]
    assert first.table == "inspect scores" and first.rows_read == 4 * 2 * N_SAMPLES
    assert first.dropped == {"partial score 'P' (not in label_map)": partial}
    _check_bookkeeping(ds)
    assert read_inspect_log(path, label_map={"P": 1}).n_annotations == 4 * 2 * N_SAMPLES
    ds2 = read_inspect_log(path, label_map={"P": None}, scorers=["match", "model_graded_qa"])
    assert set(ds2.labeler_ids) == {"match", "model_graded_qa"}
    assert ds2.report.tables[0].notes == {"scores of scorers not read (not in scorers=)": 2 * 2 * N_SAMPLES}


def test_inspect_eval_logs_as_a_history_of_rounds(inspect_logs: dict[str, Any]) -> None:
    paths = inspect_logs["history"]
    ds = read_inspect_log(paths, label_map={"P": None})
    expected: dict[tuple[str, str], int] = {}
    n_partial = 0
    for p in paths:
        header, samples = _zip_samples(p)
        part, partial = _expected(samples, header["eval"]["model"] + "/", epochs=False)
        expected.update(part)
        n_partial += partial
    assert _labels(ds) == expected
    assert ds.round_ids == ("mockllm/model-a", "mockllm/model-b")
    assert ds.name == Path(paths[0]).name.removesuffix(".eval")
    assert ds.n_items == 2 * N_SAMPLES
    assert ds.report.tables[0].dropped == {"score mapped to None by label_map": n_partial}
    by_file = read_inspect_log(paths, round_by="file", label_map={"P": None})
    assert by_file.round_ids == tuple(sorted(Path(p).name.removesuffix(".eval") for p in paths))
    with pytest.raises(DataError, match=r"are both round 'mockllm/model-a'"):
        read_inspect_log([paths[0], paths[0]])
    with pytest.raises(DataError, match=r"round_by must be one of"):
        read_inspect_log(paths, round_by="labeler")  # type: ignore[arg-type]


def test_inspect_gold_scorer(inspect_logs: dict[str, Any]) -> None:
    ds = read_inspect_log(inspect_logs["history"], gold_scorer="includes")
    assert "includes" not in set(ds.labeler_ids) and ds.n_gold == 2 * N_SAMPLES
    for model in ("model-a", "model-b"):
        for i in range(N_SAMPLES):
            answer = _answer(model, i)[0]
            assert _gold(ds)[f"mockllm/{model}/s{i}"] == int(f"w{i}" in answer)  # includes(): target in answer
    _check_bookkeeping(ds)


def test_inspect_end_to_end_estimate(inspect_logs: dict[str, Any]) -> None:
    history = read_inspect_log(inspect_logs["history"], label_map={"P": None})
    truth = {f"mockllm/{m}/s{i}": _answer(m, i)[1] for m in ("model-a", "model-b") for i in range(N_SAMPLES)}
    gold_items = sorted(truth)[::3]  # a reviewer's gold labels for a third of the history's outputs
    history = history.with_gold(gold_items, [truth[k] for k in gold_items])
    current = read_inspect_log(inspect_logs["current"], label_map={"P": None})
    res = _estimate_from(history, current)
    true_rate = np.mean([_answer("model-c", i)[1] for i in range(N_SAMPLES)])
    assert abs(res.estimate - true_rate) < 0.25


def test_inspect_bad_inputs(tmp_path: Path, inspect_logs: dict[str, Any]) -> None:
    with pytest.raises(DataError, match=r"no log given"):
        read_inspect_log([])
    with pytest.raises(DataError, match=r"absent\.eval: no such file"):
        read_inspect_log(tmp_path / "absent.eval")
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2]")
    with pytest.raises(DataError, match=r"junk\.json: not an inspect-ai log"):
        read_inspect_log(junk)
    with pytest.raises(DataError, match=r"scorer\(s\) \['human'\] not in the log; its scorers are"):
        read_inspect_log(inspect_logs["current"], scorers=["human"])


def test_inspect_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"pip install 'heroeval\[inspect\]'"):
        read_inspect_log("any.eval")


def test_score_values() -> None:
    """Every kind of score value: the binary ones read, the others dropped with a reason naming the kind."""

    table: dict[str, int | None] = {}
    ok: list[tuple[Any, int]] = [("C", 1), ("I", 0), (1, 1), (0.0, 0), (True, 1), ("false", 0)]
    for value, want in ok:
        assert _score_label(value, table) == (want, None)
    for value, check in [("P", "partial"), ("N", "no-answer"), (0.5, "numeric"), ("maybe", "not binary"),
                         (None, "missing")]:
        label, reason = _score_label(value, table)
        assert label is None and reason is not None and check in reason
    assert _score_label({"a": 1}, table)[1] is not None
    assert _score_label("P", {"P": 0}) == (0, None)
