"""``replyguard insights``: what keeps failing in a ledger, and what to change about it.

``report`` reads and aggregates (pure), ``suggestions`` derives advice from the numbers only,
``command`` prints, asks a model for a proposal a human reviews (nothing is applied), and runs
the command line.
"""

from replyguard.insights.command import add_arguments, main, render
from replyguard.insights.report import percentile, read_ledger, summarise
from replyguard.insights.stats import Report, Suggestion, themes

__all__ = [
    "Report",
    "Suggestion",
    "add_arguments",
    "main",
    "percentile",
    "read_ledger",
    "render",
    "summarise",
    "themes",
]
