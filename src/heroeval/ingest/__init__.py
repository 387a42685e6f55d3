"""Ingest: annotation logs, gold labels and covariates, validated once and int-coded (pandas or DuckDB).

Every row read is either used or counted, by reason, in the ingest report. Labels exported from Label Studio
or logged by inspect-ai are read by :func:`read_label_studio` and :func:`read_inspect_log`
(:mod:`heroeval.ingest.formats`).
"""

from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport
from heroeval.ingest.formats import read_inspect_log, read_label_studio
from heroeval.ingest.read import DUCKDB_MIN_BYTES, read_annotations

__all__ = [
    "DUCKDB_MIN_BYTES",
    "AnnotationSet",
    "IngestReport",
    "TableReport",
    "read_annotations",
    "read_inspect_log",
    "read_label_studio",
]
