"""Presentation: the HTML report (data, then view), terminal tables and plots. Renders; computes nothing new."""

from heroeval.report.html import build_comparison_report, build_report, render_html, write_report
from heroeval.report.page_data import collect_warnings, comparison_report_data, report_data

__all__ = [
    "build_comparison_report",
    "build_report",
    "collect_warnings",
    "comparison_report_data",
    "render_html",
    "report_data",
    "write_report",
]
