"""Ingest: annotation logs, gold labels and covariates, validated once and int-coded (pandas or DuckDB).

Every row read is either used or counted, by reason, in the ingest report.
"""

from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport
from heroeval.ingest.read import DUCKDB_MIN_BYTES, read_annotations

__all__ = ["DUCKDB_MIN_BYTES", "AnnotationSet", "IngestReport", "TableReport", "read_annotations"]
