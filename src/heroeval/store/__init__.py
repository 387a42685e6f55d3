"""An embedded store of evaluation rounds: their annotations and gold, cached calibrations, pins, the trend.

:class:`Store` (``he.Store``) keeps every round in one DuckDB file
(``hero.duckdb`` by default), reuses Stage A fits keyed by the rounds and
settings they used, and gives each round's rate over time with simultaneous
intervals (:mod:`heroeval.store.trend`). ``hero store ...`` is its command
line; docs/store.md its guide.
"""

from heroeval.store._db import SCHEMA_VERSION, StoreError
from heroeval.store._rounds import RoundInfo, RoundList
from heroeval.store.store import AddResult, Store, StoreCalibration, StoreEstimate
from heroeval.store.trend import Trend, TrendDifference, TrendRound, critical_value

__all__ = ["SCHEMA_VERSION", "AddResult", "RoundInfo", "RoundList", "Store", "StoreCalibration", "StoreError",
           "StoreEstimate", "Trend", "TrendDifference", "TrendRound", "critical_value"]
