"""HTML building blocks shared by the reports: the escaping helper, number cells, tables, the page head with its
strict content-security policy and styles, and the JSON data block."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from heroeval.estimators.results import jsonable

__all__ = ["CSS", "esc", "json_script", "num", "page_start", "table_html", "td"]


CSS = """
:root { --fg:#1d1d1f; --muted:#5f6368; --line:#d9dce1; --warn:#8a4b00; --warnbg:#fff4e5; --ok:#1e7b34; --bad:#b3261e; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0; background: #f6f7f9; }
main { max-width: max(1120px, 84vw); margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin: 20px 0 6px; }
p.meta, .muted { color: var(--muted); font-size: 0.9em; }
nav a { margin-right: 14px; font-size: 0.9em; }
.headline { display: flex; flex-wrap: wrap; gap: 16px; margin: 18px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; min-width: 220px; flex: 1 1 220px; }
.card .big { font-size: 2em; font-weight: 600; font-variant-numeric: tabular-nums; }
.card.primary { border-color: #1f77b4; background: #f3f8fd; }
.warnings { background: var(--warnbg); border-left: 4px solid #e8a33d; padding: 8px 14px; margin: 12px 0; }
.warnings li { color: var(--warn); white-space: pre-wrap; overflow-wrap: anywhere; }
.warn { color: var(--warn); background: var(--warnbg); padding: 2px 6px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 0.92em; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); vertical-align: top; text-align: left; }
th { background: #f1f3f5; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { max-width: 280px; overflow-wrap: anywhere; }
tr.primary td { font-weight: 600; background: #f3f8fd; }
.ok { color: var(--ok); } .bad { color: var(--bad); font-weight: 600; }
figure { margin: 8px 0 16px; }
figure img.figure { display: block; max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 0.88em; max-width: 820px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 18px; align-items: start; }
.scroll { overflow-x: auto; }
"""


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def num(x: Any, fmt: str = ".4f") -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return esc(x)
    v = float(x)
    if not math.isfinite(v):
        return "∞" if v > 0 else "–"
    return format(round(v), "d") if fmt == "d" else format(v, fmt)


def td(x: Any, field: str | None = None, fmt: str = ".4f") -> str:
    attr = f' data-field="{esc(field)}"' if field else ""
    return f'<td class="num"{attr}>{num(x, fmt)}</td>'


def table_html(head: Sequence[tuple[str, bool]], rows: Sequence[str], cls: str = "") -> str:
    h = "".join(f'<th{" class=num" if num else ""}>{esc(t)}</th>' for t, num in head)
    c = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{c}><thead><tr>{h}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def page_start(d: Mapping[str, Any], meta_extra: str) -> str:
    """A report page up to its header's meta line: the strict content-security policy, the styles, the title.

    ``meta_extra`` (already escaped) follows the version and date in the meta line.
    """
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'\">"
        f"<title>{esc(d['title'])}</title><style>{CSS}</style></head><body><main>"
        f"<header><h1>{esc(d['title'])}</h1><p class=\"meta\">heroeval {esc(d['heroeval_version'])}, "
        f"{esc(d['generated'])}{meta_extra}</p>"
    )


def json_script(data: Any) -> str:
    text = json.dumps(jsonable(data), ensure_ascii=True, allow_nan=False, sort_keys=False)
    # nothing in the block can close the script element or open a comment
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="hero-data">{text}</script>'
