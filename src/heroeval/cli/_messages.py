"""Messages in the CLI's words: heroeval's errors and warnings name Python parameters, the ``hero`` CLI options.

The library's messages give Python advice (``pass gold= to read_annotations``,
``exclude_new_labelers=True``); :func:`to_cli` rewrites them before the CLI
prints them, so a command-line user is told the option to use. The table
below is the one place that maps a parameter to its option; a test runs
failing commands and checks that no Python advice is left.
"""

from __future__ import annotations

import re

__all__ = ["PARAMETER_OPTIONS", "to_cli"]

# whole phrases first (they contain parameter names handled below)
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"[Pp]ass gold= to read_annotations", "pass --gold (the history's gold labels)"),
    (r"exclude_new_labelers=True(?: \(CLI: [^)]*\))?", "--new-labelers exclude"),
    (r"new_labelers='estimate'(?: \(CLI: [^)]*\))?", "--new-labelers estimate"),
    (r"new_labelers='exclude'", "--new-labelers exclude"),
    (r"new_labelers='error'", "--new-labelers error"),
    (r"(?:heroeval\.)?(?:checks\.)?(?:drift\.)?reestimate_without\([^)]*\)",
     "hero drift with --reestimate drop (or estimate)"),
    (r"calibrate with checks=True \(CLI: ([^)]*)\)", r"\1"),
    (r"calibrate with checks=True", "hero calibrate (it saves the model checks)"),
    (r"\(CLI:? ?(--[^)]*)\)", ""),  # a remaining "(CLI: --x)" beside its Python form: the CLI form is below
    (r"round_col=False", "--round-col none"),
    (r"duplicates='(keep|first|error)'", r"--duplicates \1"),
    (r"missing='error'", "a missing value"),
    (r"engine='numba' needs numba", "--engine numba needs numba"),
    (r"engine='duckdb'", "--reader duckdb"),
    (r"engine='pandas'", "--reader pandas"),
    (r"encoding='([^']*)'", r"--encoding \1"),
    (r"label_map= \(e\.g\. \{'A': 1, 'B': 0, 'tie': None\}\)", "--label-map (e.g. A=1,B=0,tie=drop)"),
    (r"read multi-class labels with heroeval\.multiclass \(classes=\)", "give multi-class labels with --classes"),
    (r"classes= \(CLI --classes\)", "--classes"),
    (r"read_multiclass\(\.\.\., ordinal=True\), CLI --ordinal", "--ordinal"),
    (r"\(read_annotations\(\.\.\., covariates=\.\.\.\)\)", "(--covariates)"),
    (r"\(pass covariates= when reading the history\)", "(--history-covariates)"),
    (r"\(calibrate in this process from a history read with covariates=\)", "(--history and --history-covariates)"),
    (r"\(from read_annotations\)", ""),
    (r"give exactly one of half_width, difference or n_items", "give exactly one of --half-width, --difference or --n-items"),
    (r"give exactly one of half_width, difference, n_items or bound",
     "give exactly one of --half-width, --difference, --n-items or --bound"),
    (r"compare two rounds with heroeval\.compare", "compare two rounds with hero compare"),
    (r"\(ci_method='score'; confidence_interval\(alternative='less'\)\)", "(--ci-method score; --alternative less)"),
    (r"mapped to None by label_map", "mapped to drop by --label-map"),
    (r"group_blocks must be an integer >= 2, or None to", "--group-blocks must be an integer >= 2, or 0 to"),
)

PARAMETER_OPTIONS: dict[str, str] = {
    "item_col": "--item-col",
    "labeler_col": "--labeler-col",
    "label_col": "--label-col",
    "round_col": "--round-col",
    "gold_col": "--gold-col",
    "gold_item_col": "--gold-item-col",
    "covariate_item_col": "--covariate-item-col",
    "label_map": "--label-map",
    "half_width": "--half-width",
    "n_items": "--n-items",
    "labels_per_item": "--labels-per-item",
    "pool": "--pool",
    "confidence_level": "--confidence-level",
    "history_weight": "--history-weight",
    "pseudo_count": "--pseudo-count",
    "shrink": "--shrink",
    "max_iter": "--max-iter",
    "significance": "--significance",
    "score_r2": "--score-r2",
    "encoding": "--encoding",
    "classes": "--classes",
}
"""Python parameter -> CLI option, for ``name=`` in a message."""

_PARAM_RE = re.compile(r"\b(" + "|".join(map(re.escape, PARAMETER_OPTIONS)) + r")=(?:(['\"])([^'\"]*)\2)?")


def to_cli(text: str) -> str:
    """``text`` with its Python advice rewritten as ``hero`` options."""
    out = text
    for pat, repl in _PHRASES:
        out = re.sub(pat, repl, out)

    def param(m: re.Match[str]) -> str:
        opt = PARAMETER_OPTIONS[m.group(1)]
        return f"{opt} {m.group(3)}" if m.group(3) is not None else opt

    out = _PARAM_RE.sub(param, out)
    return re.sub(r"  +", " ", out).replace(" ;", ";").replace(" .", ".")
