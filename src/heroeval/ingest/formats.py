"""Readers for where labels live: Label Studio's JSON export and inspect-ai's evaluation logs.

Each reader walks the tool's own file, builds the long table :func:`~heroeval.ingest.read.read_annotations`
takes (``item_id, labeler_id, label`` and, for inspect-ai, ``round``) and a gold table, and hands both to it,
so every validation, row policy and ingest-report entry of the ordinary reader applies. What the walk itself
skips is counted too: the returned set's :class:`~heroeval.ingest.annotations.IngestReport` starts with one
table for the tool's file, whose rows are the tool's units (a Label Studio annotation or prediction, an
inspect-ai (sample, scorer) score), each passed on or dropped with its reason; the ``annotations`` and
``gold`` tables after it account for the rows passed on, as for any table.

* :func:`read_label_studio`: a Label Studio project exported as "JSON" (a list of tasks, each with its
  ``annotations`` and, optionally, ``predictions``; https://labelstud.io/guide/export.html and
  https://labelstud.io/guide/task_format.html). Task -> item, ``completed_by`` -> labeler, the choice of one
  ``Choices`` control -> label; ground-truth or expert annotations can be the gold labels, model predictions
  extra labelers.
* :func:`read_inspect_log`: ``.eval`` or ``.json`` logs written by ``inspect eval``, read with inspect-ai's
  own :func:`inspect_ai.log.read_eval_log` (the optional extra ``pip install 'heroeval[inspect]'``). Sample
  (and epoch) -> item, scorer -> labeler, score value -> label, one round per log.

Hugging Face ``datasets`` need no reader: ``Dataset.to_pandas()`` is a table ``read_annotations`` takes
(see "Where your labels live" in ``docs/guide.md``).
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

import pandas as pd

from heroeval.errors import DataError
from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport
from heroeval.ingest.labels import _FALSE, _TRUE
from heroeval.ingest.read import read_annotations
from heroeval.ingest.tables import file_stem

__all__ = [
    "INSPECT_SCORE_VALUES",
    "LabelMap",
    "RoundBy",
    "read_inspect_log",
    "read_label_studio",
]

LabelMap: TypeAlias = Mapping[Any, "int | None"]
"""A raw label (a Label Studio choice, an inspect-ai score value) -> 0, 1, or None (dropped and counted)."""

RoundBy: TypeAlias = Literal["model", "task", "task_model", "file"] | None
"""What names a log's round in :func:`read_inspect_log`: the evaluated model, the task, both, the log's file
name, or None (every log in one round ``"all"``)."""

INSPECT_SCORE_VALUES: Mapping[str, int] = {"C": 1, "I": 0}
"""inspect-ai's CORRECT and INCORRECT score values and their labels. PARTIAL (``"P"``) and NOANSWER (``"N"``)
are no binary judgment: they need a ``label_map`` entry, or are dropped and counted."""

_BINARY: Mapping[str, int] = {**{k: 1 for k in _TRUE}, **{k: 0 for k in _FALSE}}


# ---------------------------------------------------------------------------
# Shared: the rows a walk collects, its counts, and the hand-over to read_annotations
# ---------------------------------------------------------------------------


@dataclass
class _Rows:
    """Silver and gold rows collected from a tool's file, and what was dropped or noted on the way."""

    table: str
    source: str
    silver: list[tuple[str, str, int, str | None]] = field(default_factory=list)
    gold: list[tuple[str, int]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)

    def finish(self, name: str | None, rounds: bool) -> AnnotationSet:
        """The annotation set of the rows collected, read by :func:`read_annotations`, its report prefixed."""
        if not self.silver:
            why = "; ".join(f"{n} {r}" for r, n in self.dropped.items()) or "the file holds no label"
            raise DataError(f"{self.source}: no silver label left to read ({why})")
        ann = pd.DataFrame(self.silver, columns=["item_id", "labeler_id", "label", "round"])
        if not rounds:
            ann = ann.drop(columns="round")
        gold = pd.DataFrame(self.gold, columns=["item_id", "gold"]) if self.gold else None
        if name is None:
            name = file_stem(self.source).removesuffix(".eval") if not self.source.startswith("<") else "annotations"
        try:
            ds = read_annotations(ann, gold=gold, name=name, engine="pandas",
                                  round_col="round" if rounds else False)
        except DataError as exc:
            raise DataError(f"{self.source}: {exc}") from exc
        used = len(self.silver) + len(self.gold)
        own = TableReport(self.table, self.source, used + sum(self.dropped.values()), used,
                          dict(self.dropped), dict(self.notes))
        tables = tuple(replace(t, source=f"{self.source} ({t.table} passed on)") for t in ds.report.tables)
        return replace(ds, report=IngestReport((own, *tables)))


def _map_table(label_map: LabelMap | None, where: str) -> dict[str, int | None]:
    """``label_map`` keyed by stripped text, its values checked (0, 1 or None)."""
    table: dict[str, int | None] = {}
    for k, v in (label_map or {}).items():
        if v is not None and v not in (0, 1):
            raise DataError(f"{where}: label_map maps {k!r} to {v!r}; values must be 0, 1 or None")
        table[str(k).strip()] = None if v is None else int(v)
    return table


# ---------------------------------------------------------------------------
# Label Studio
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _StudioRules:
    """How :func:`read_label_studio` takes an annotation: the control read, the label map, who is gold."""

    control: str
    labels: Mapping[str, int | None]
    label_map_given: bool
    seen_choices: tuple[str, ...]
    gold_annotators: frozenset[str]
    use_ground_truth: bool

    def label(self, choice: Any, where: str) -> int | None:
        """The label of a choice (None: mapped to None), or a DataError naming where it is."""
        key = str(choice).strip()
        if key in self.labels:
            return self.labels[key]
        if key.lower() in _BINARY:
            return _BINARY[key.lower()]
        shown = ", ".join(f"{c!r}: ..." for c in self.seen_choices[:6])
        if self.label_map_given:
            raise DataError(f"{where}: choice {key!r} of control {self.control!r} is not in label_map "
                            f"(keys {sorted(self.labels)}; choices 0/1, true/false or yes/no pass through)")
        raise DataError(f"{where}: choice {key!r} of control {self.control!r} is not a binary value (0/1, "
                        f"true/false, yes/no); say which choice is 1 with label_map=, e.g. label_map={{{shown}}} "
                        "with each value 0, 1 or None (None: dropped and counted)")


def _load_tasks(export: str | os.PathLike[str] | Sequence[Mapping[str, Any]]) -> tuple[Any, str]:
    if not isinstance(export, (str, os.PathLike)):
        return export, "<Label Studio tasks>"
    src = str(export)
    try:
        opener: Callable[..., Any] = gzip.open if src.endswith(".gz") else open
        with opener(src, "rt", encoding="utf-8") as fh:
            return json.load(fh), src
    except FileNotFoundError as exc:
        raise DataError(f"{src}: no such file") from exc
    except (OSError, UnicodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{src}: not a JSON file ({type(exc).__name__}: {exc}); export the project as 'JSON'") from exc


def _results(holder: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    res = holder.get("result")
    if res is None:
        return []
    if not isinstance(res, list) or not all(isinstance(r, Mapping) for r in res):
        raise DataError(f"{where}: 'result' must be a list of objects, got {type(res).__name__}")
    return res


def _controls(tasks: Sequence[Mapping[str, Any]], predictions: bool) -> dict[str, set[str]]:
    """Every control (``from_name``) of the results in the export and the result types it has."""
    seen: dict[str, set[str]] = {}
    for task in tasks:
        holders = list(task.get("annotations") or [])
        if predictions:
            holders += [p for p in task.get("predictions") or [] if isinstance(p, Mapping)]
        for h in holders:
            if not isinstance(h, Mapping) or not isinstance(h.get("result"), list):
                continue
            for r in h["result"]:
                if isinstance(r, Mapping) and "from_name" in r:
                    seen.setdefault(str(r["from_name"]), set()).add(str(r.get("type", "")).lower())
    return seen


def _choice_control(tasks: Sequence[Mapping[str, Any]], src: str, from_name: str | None, predictions: bool) -> str:
    seen = _controls(tasks, predictions)
    choice_controls = sorted(n for n, types in seen.items() if "choices" in types)
    if from_name is not None:
        if from_name not in seen:
            raise DataError(f"{src}: no result of a control named from_name={from_name!r}; the export's choice "
                            f"controls are {choice_controls} (all controls: {sorted(seen)})")
        if "choices" not in seen[from_name]:
            raise DataError(f"{src}: control {from_name!r} has results of type {sorted(seen[from_name])}, not "
                            f"'choices'; heroeval reads a Choices control (choice controls: {choice_controls})")
        return from_name
    if not choice_controls:
        raise DataError(f"{src}: no result of a Choices control in the export (controls seen: {sorted(seen)}); "
                        "heroeval reads the choice of one Choices control per annotation")
    if len(choice_controls) > 1:
        raise DataError(f"{src}: the export has several Choices controls, {choice_controls}; say which one holds "
                        "the label with from_name=")
    return choice_controls[0]


def _seen_choices(tasks: Sequence[Mapping[str, Any]], control: str) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for task in tasks:
        for h in [*(task.get("annotations") or []), *(task.get("predictions") or [])]:
            if isinstance(h, Mapping) and isinstance(h.get("result"), list):
                for r in h["result"]:
                    if isinstance(r, Mapping) and r.get("from_name") == control:
                        choices = (r.get("value") or {}).get("choices")
                        for c in choices if isinstance(choices, list) else []:
                            out[str(c)] = None
    return tuple(out)


def _user(completed_by: Any) -> tuple[str | None, set[str]]:
    """The labeler id of ``completed_by`` (a user id, or a user object in older exports) and the names it
    goes by (id and email), against which ``gold_annotators`` is matched."""
    if isinstance(completed_by, Mapping):
        uid, email = completed_by.get("id"), completed_by.get("email")
        names = {str(x) for x in (uid, email) if x not in (None, "")}
        return (str(uid) if uid is not None else (str(email) if email else None)), names
    if completed_by is None or completed_by == "":
        return None, set()
    return str(completed_by), {str(completed_by)}


def _one_choice(rows: _Rows, results: list[Mapping[str, Any]], rules: _StudioRules, where: str) -> int | None:
    """The label of the control's choice in ``results``, or None after counting why there is none."""
    mine = [r for r in results if r.get("from_name") == rules.control]
    if len(results) > len(mine):
        rows.notes["results of other controls, ignored"] += len(results) - len(mine)
    if not mine:
        rows.dropped[f"no result for control {rules.control!r}"] += 1
        return None
    if len(mine) > 1:
        rows.dropped[f"several results for control {rules.control!r} (per-region choices)"] += 1
        return None
    value = mine[0].get("value")
    choices = value.get("choices") if isinstance(value, Mapping) else None
    if not isinstance(choices, list):
        raise DataError(f"{where}: the result of control {rules.control!r} has no 'value': {{'choices': [...]}}")
    if not choices:
        rows.dropped["no choice selected"] += 1
        return None
    if len(choices) > 1:
        rows.dropped["several choices selected (a multiple-choice control)"] += 1
        return None
    label = rules.label(choices[0], where)
    if label is None:
        rows.dropped["choice mapped to None by label_map"] += 1
    return label


def _annotation(rows: _Rows, ann: Any, item: str, rules: _StudioRules, where: str) -> None:
    if not isinstance(ann, Mapping):
        raise DataError(f"{where}: an annotation is not an object ({type(ann).__name__})")
    where = f"{where}, annotation {ann.get('id', '?')!r}"
    if ann.get("was_cancelled"):
        rows.dropped["cancelled (skipped) annotation"] += 1
        return
    results = _results(ann, where)
    labeler, names = _user(ann.get("completed_by"))
    if labeler is None:
        rows.dropped["annotation without completed_by (no labeler)"] += 1
        return
    label = _one_choice(rows, results, rules, where)
    if label is None:
        return
    flagged = bool(ann.get("ground_truth"))
    if (rules.use_ground_truth and flagged) or names & rules.gold_annotators:
        rows.gold.append((item, label))
        return
    if flagged:
        rows.notes["ground-truth annotations read as silver labels (use_ground_truth=False)"] += 1
    rows.silver.append((item, labeler, label, None))


def _prediction(rows: _Rows, pred: Any, item: str, rules: _StudioRules, where: str) -> None:
    if not isinstance(pred, Mapping):
        rows.dropped["prediction exported as an id only (no result)"] += 1
        return
    where = f"{where}, prediction {pred.get('id', '?')!r}"
    label = _one_choice(rows, _results(pred, where), rules, where)
    if label is not None:
        version = pred.get("model_version")
        rows.silver.append((item, f"prediction:{version if version not in (None, '') else 'unknown'}", label, None))


def _item_of(task: Mapping[str, Any], item_field: str | None, where: str) -> str:
    if item_field is None:
        if task.get("id") is None:
            raise DataError(f"{where}: the task has no 'id'; name a field of its 'data' with item_field=")
        return str(task["id"])
    data = task.get("data")
    if not isinstance(data, Mapping) or data.get(item_field) in (None, ""):
        keys = sorted(data) if isinstance(data, Mapping) else []
        raise DataError(f"{where}: no value for item_field={item_field!r} in the task's 'data' (its keys: {keys})")
    return str(data[item_field])


def read_label_studio(
    export: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
    *,
    label_map: LabelMap | None = None,
    from_name: str | None = None,
    gold_annotators: Collection[str | int] | None = None,
    use_ground_truth: bool = False,
    include_predictions: bool = False,
    item_field: str | None = None,
    name: str | None = None,
) -> AnnotationSet:
    """Read a Label Studio project exported as "JSON" into an :class:`AnnotationSet`.

    The export is a list of tasks; each task holds its ``annotations``, each
    annotation the ``result`` of the labeling interface's controls and the
    user who made it (``completed_by``). The label of an annotation is the
    choice it made in one ``Choices`` control.

    Parameters
    ----------
    export : path or list of dict
        The ``.json`` file (or ``.json.gz``) of Label Studio's "JSON" export,
        or its tasks already loaded. (The "JSON-MIN" and CSV exports lay the
        annotations out differently; they are not read here.)
    label_map : mapping, optional
        Choice -> 0, 1 or None, e.g. ``{"Toxic": 1, "Safe": 0, "Unsure": None}``
        (None: the annotation is dropped and counted). Required unless every
        choice already spells a binary value (``0/1``, ``true/false``,
        ``yes/no``, any case). There is no default for two other choices:
        which of them is 1 is what the rate means (the share of "Toxic" or of
        "Safe"), and a guess would flip it silently. A choice neither in the
        map nor binary is an error naming the task and annotation.
    from_name : str, optional
        The ``name`` of the Choices control that holds the label. Needed when
        the export has several Choices controls; results of other controls
        are ignored and counted in the report's notes.
    gold_annotators : collection of str or int, optional
        Users whose annotations are gold labels (experts): user ids as in
        ``completed_by`` or, in exports that carry the user object, emails.
        Their annotations become the gold table and are not silver labels.
    use_ground_truth : bool, default False
        Take annotations flagged ``ground_truth`` (Label Studio's "ground
        truth" star) as gold labels, not silver ones. Off by default, they
        stay silver labels of their annotator (counted in the notes).
    include_predictions : bool, default False
        Read the tasks' ``predictions`` (model pre-labels) as silver labels,
        one labeler per ``model_version`` (labeler id
        ``"prediction:<model_version>"``). Off by default: they are counted in
        the notes.
    item_field : str, optional
        A key of the tasks' ``data`` that names the item (for example an id
        that other tables use); by default the task's ``id``.
    name : str, optional
        A name shown in reports (default: the file name).

    Returns
    -------
    AnnotationSet
        One round (``"all"``). Its ingest report's first table,
        ``label studio annotations``, has one row per annotation (and per
        prediction when they are read): passed on as a silver or gold label,
        or dropped by reason (cancelled, no choice for the control, several
        choices, mapped to None, no ``completed_by``, a prediction exported
        as an id only).

    Raises
    ------
    DataError
        The file is not a list of tasks, a task has no ``annotations``, the
        control is unknown or ambiguous, or a choice has no label; the message
        names the file, task and annotation.

    Examples
    --------
    >>> from heroeval.ingest import read_label_studio
    >>> tasks = [
    ...     {"id": 1, "data": {"text": "a"}, "annotations": [
    ...         {"id": 10, "completed_by": 7, "was_cancelled": False, "result": [
    ...             {"from_name": "toxic", "to_name": "text", "type": "choices", "value": {"choices": ["Toxic"]}}]},
    ...         {"id": 11, "completed_by": 8, "was_cancelled": True, "result": []}]},
    ...     {"id": 2, "data": {"text": "b"}, "annotations": [
    ...         {"id": 12, "completed_by": 7, "was_cancelled": False, "result": [
    ...             {"from_name": "toxic", "to_name": "text", "type": "choices", "value": {"choices": ["Safe"]}}]}]},
    ... ]
    >>> ds = read_label_studio(tasks, label_map={"Toxic": 1, "Safe": 0})
    >>> ds.n_items, ds.n_annotations, list(ds.labeler_ids)
    (2, 2, ['7'])
    >>> ds.report.tables[0].dropped["cancelled (skipped) annotation"]
    1
    """
    tasks, src = _load_tasks(export)
    if not isinstance(tasks, list):
        hint = " (this looks like one task: the export is a list of them)" if isinstance(tasks, Mapping) and \
            "annotations" in tasks else ""
        raise DataError(f"{src}: a Label Studio JSON export is a list of tasks, got a JSON "
                        f"{type(tasks).__name__}{hint}")
    for k, task in enumerate(tasks):
        where = f"{src}, task {task.get('id', f'#{k + 1}')!r}" if isinstance(task, Mapping) else f"{src}, task #{k + 1}"
        if not isinstance(task, Mapping):
            raise DataError(f"{where}: a task is a JSON object, got {type(task).__name__}")
        if not isinstance(task.get("annotations"), list):
            what = "no 'annotations' list" if "annotations" not in task else "'annotations' is not a list"
            raise DataError(f"{where}: {what}; read_label_studio reads Label Studio's 'JSON' export (JSON-MIN "
                            "and CSV exports lay the annotations out differently)")
    control = _choice_control(tasks, src, from_name, include_predictions)
    rules = _StudioRules(control=control, labels=_map_table(label_map, src),
                         label_map_given=label_map is not None, seen_choices=_seen_choices(tasks, control),
                         gold_annotators=frozenset(str(g) for g in gold_annotators or ()),
                         use_ground_truth=use_ground_truth)
    rows = _Rows("label studio annotations", src)
    for k, task in enumerate(tasks):
        where = f"{src}, task {task.get('id', f'#{k + 1}')!r}"
        item = _item_of(task, item_field, where)
        if not task["annotations"]:
            rows.notes["tasks with no annotation"] += 1
        for ann in task["annotations"]:
            _annotation(rows, ann, item, rules, where)
        preds = task.get("predictions") or []
        if not include_predictions:
            if preds:
                rows.notes["predictions not read (include_predictions=False)"] += len(preds)
            continue
        for pred in preds:
            _prediction(rows, pred, item, rules, where)
    return rows.finish(name, rounds=False)


# ---------------------------------------------------------------------------
# inspect-ai
# ---------------------------------------------------------------------------


def _inspect_reader() -> Callable[..., Any]:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise ImportError("read_inspect_log needs inspect-ai: pip install 'heroeval[inspect]'") from exc
    reader: Callable[..., Any] = read_eval_log
    return reader


def _score_label(value: Any, labels: Mapping[str, int | None]) -> tuple[int | None, str | None]:
    """``(label, None)`` for a score value with a label (None when mapped to None), ``(None, reason)`` for one
    dropped."""
    if isinstance(value, (list, tuple, dict)):
        return None, "score value is a list or dict (a multi-value scorer), not one judgment"
    if value is None:
        return None, "score value missing"
    key = str(value).strip()
    if isinstance(value, float) and value.is_integer():
        key = str(int(value))
    if key in labels:
        return labels[key], "score mapped to None by label_map" if labels[key] is None else None
    if key in INSPECT_SCORE_VALUES:
        return INSPECT_SCORE_VALUES[key], None
    if key.lower() in _BINARY:
        return _BINARY[key.lower()], None
    if key == "P":
        return None, "partial score 'P' (not in label_map)"
    if key == "N":
        return None, "no-answer score 'N' (not in label_map)"
    if isinstance(value, (int, float)):
        return None, "numeric score other than 0 and 1 (not in label_map)"
    return None, "score value not binary (not in label_map)"


def _round_of(log: Any, path: str, round_by: RoundBy) -> str | None:
    if round_by is None:
        return None
    task, model = str(log.eval.task), str(log.eval.model)
    keys = {"model": model, "task": task, "task_model": f"{task}/{model}",
            "file": file_stem(path).removesuffix(".eval")}
    if round_by not in keys:
        raise DataError(f"round_by must be one of {sorted(keys)} or None, got {round_by!r}")
    return keys[round_by]


def _log_scorers(samples: Sequence[Any], scorers: Sequence[str] | None, gold_scorer: str | None,
                 path: str) -> list[str]:
    """The scorers read as labelers in one log: ``scorers``, or every scorer but the gold one."""
    present: dict[str, None] = {}
    for s in samples:
        for k in s.scores or {}:
            present[str(k)] = None
    if scorers is None:
        return [k for k in present if k != gold_scorer]
    absent = [k for k in scorers if k not in present]
    if absent:
        raise DataError(f"{path}: scorer(s) {absent} not in the log; its scorers are {list(present)}")
    return list(scorers)


def read_inspect_log(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    label_map: LabelMap | None = None,
    scorers: Sequence[str] | None = None,
    gold_scorer: str | None = None,
    round_by: RoundBy = "model",
    name: str | None = None,
) -> AnnotationSet:
    """Read inspect-ai evaluation logs into an :class:`AnnotationSet`: scorers as labelers, one round per log.

    The logs (``.eval`` or ``.json``, as ``inspect eval`` writes them) are
    read with inspect-ai's :func:`inspect_ai.log.read_eval_log`; install it
    with ``pip install 'heroeval[inspect]'``.

    Parameters
    ----------
    paths : path or sequence of paths
        One log, or several: one set whose rounds are the logs (a history of
        rounds for :func:`heroeval.calibrate`).
    label_map : mapping, optional
        Score value -> 0, 1 or None, applied first. Without an entry,
        ``"C"`` (CORRECT) is 1, ``"I"`` (INCORRECT) is 0, and so are numeric
        or boolean 1/0 (and true/false, yes/no). ``"P"`` (PARTIAL), ``"N"``
        (NOANSWER), other numbers and other text are no binary judgment: the
        score is dropped and counted by reason unless the map names it (e.g.
        ``{"P": None}`` to say so, or ``{"P": 0}`` for "fully correct").
    scorers : sequence of str, optional
        The scorers read as labelers (keys of ``sample.scores``, e.g.
        ``"match"``, ``"model_graded_qa"``; a task's second scorer of the
        same kind gets a numbered name such as ``"model_graded_qa1"``).
        Default: every scorer in the log but ``gold_scorer``. Unselected
        scorers' scores are counted in the notes.
    gold_scorer : str, optional
        A scorer whose scores are gold labels, e.g. one that records human
        review. Its scores form the gold table, not silver labels; samples
        it did not score have no gold label (counted in the notes).
    round_by : {"model", "task", "task_model", "file"} or None, default "model"
        What names each log's round: the evaluated model (``eval.model``),
        the task, both (``"task/model"``), the file name, or None for a single
        round ``"all"``.
    name : str, optional
        A name shown in reports (default: the first log's file name).

    Returns
    -------
    AnnotationSet
        Items are the samples: the sample ``id``, with ``"#<epoch>"`` appended
        when the log ran more than one epoch (each epoch is a new output of
        the model); with several logs, prefixed by the log's round name (or
        its file name when ``round_by`` is None) and ``"/"``, since the same
        sample is a new item in each log. The ingest report's first table,
        ``inspect scores``, has one row per (sample, scorer read) and per
        gold score: passed on, or dropped by reason (the scorer did not score
        the sample, e.g. an errored sample; a partial, no-answer or
        non-binary score).

    Notes
    -----
    The sample's ``target`` is not gold. It is the reference answer the
    scorers compare the model's output with, not a judgment of that output;
    whether the output is correct given the target is exactly what the
    scorers (the silver labelers) estimate, and where the target can be
    matched mechanically that scorer is one of the labelers (``match()``,
    ``includes()``). Gold labels come from a trusted judgment of the outputs:
    a ``gold_scorer`` (human review recorded as a scorer), or a table of item
    ids and labels given to :meth:`AnnotationSet.with_gold`.

    A labeler is a scorer's name: a scorer whose grader model changed between
    logs keeps its name, and would be calibrated as one labeler; give it a new
    name in the task when its behaviour changes.

    Examples
    --------
    >>> from heroeval.ingest import read_inspect_log
    >>> read_inspect_log([])  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    heroeval.errors.DataError: read_inspect_log: no log given
    """
    files = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not files:
        raise DataError("read_inspect_log: no log given")
    read_eval_log = _inspect_reader()
    labels = _map_table(label_map, "read_inspect_log")
    src = str(files[0]) if len(files) == 1 else f"{files[0]} and {len(files) - 1} more log(s)"
    rows = _Rows("inspect scores", src)
    prefixes: dict[str, str] = {}
    for f in files:
        path = str(f)
        try:
            log = read_eval_log(path)
        except FileNotFoundError as exc:
            raise DataError(f"{path}: no such file") from exc
        except Exception as exc:  # inspect-ai's own errors: name the file
            raise DataError(f"{path}: not an inspect-ai log ({type(exc).__name__}: {exc})") from exc
        samples = list(log.samples or [])
        if not samples:
            raise DataError(f"{path}: the log has no samples (status {log.status!r})")
        rnd = _round_of(log, path, round_by)
        prefix = ""
        if len(files) > 1:
            key = rnd if rnd is not None else file_stem(path).removesuffix(".eval")
            if key in prefixes:
                raise DataError(f"{path} and {prefixes[key]} are both round {key!r}: pick round_by= that tells "
                                "them apart (e.g. 'task_model' or 'file')")
            prefixes[key] = path
            prefix = f"{key}/"
        if log.status != "success":
            rows.notes[f"samples of a log with status {log.status!r}, read as logged"] += len(samples)
        _log_samples(rows, samples, _log_scorers(samples, scorers, gold_scorer, path), gold_scorer, labels,
                     (prefix, rnd))
    return rows.finish(name if name is not None else file_stem(str(files[0])).removesuffix(".eval"),
                       rounds=round_by is not None)


def _log_samples(rows: _Rows, samples: Sequence[Any], chosen: Sequence[str], gold_scorer: str | None,
                 labels: Mapping[str, int | None], where: tuple[str, str | None]) -> None:
    """Add one log's samples: a silver row per (sample, chosen scorer), a gold row per gold score."""
    prefix, rnd = where
    epochs = max(int(getattr(s, "epoch", 1) or 1) for s in samples) > 1
    for s in samples:
        item = f"{prefix}{s.id}" + (f"#{s.epoch}" if epochs else "")
        scores = s.scores or {}
        other = [k for k in scores if k not in chosen and k != gold_scorer]
        if other:
            rows.notes["scores of scorers not read (not in scorers=)"] += len(other)
        for scorer in chosen:
            score = scores.get(scorer)
            if score is None:
                why = "the sample ended in an error" if getattr(s, "error", None) else "the scorer did not score it"
                rows.dropped[f"no score for the sample ({why})"] += 1
                continue
            label, reason = _score_label(score.value, labels)
            if label is None:
                rows.dropped[reason or "score value missing"] += 1
                continue
            rows.silver.append((item, scorer, label, rnd))
        if gold_scorer is None:
            continue
        score = scores.get(gold_scorer)
        if score is None:
            rows.notes["samples without a gold score"] += 1
            continue
        label, reason = _score_label(score.value, labels)
        if label is None:
            rows.dropped[f"gold score: {reason or 'score value missing'}"] += 1
        else:
            rows.gold.append((item, label))

