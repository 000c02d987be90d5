"""``replyguard eval``: how often the judge agrees with human labels on a dataset.

``stats`` holds the agreement figures (pure), ``run`` judges the records (live or replayed),
``report`` builds ``report.json`` and the summary, ``html`` the self-contained page (its SVG
charts in ``charts``), ``wording`` holds the words both share, and ``command`` runs the
command line.
"""

from replyguard.evaluation.command import add_arguments, main
from replyguard.evaluation.report import build_report, summary, write_reports
from replyguard.evaluation.run import RecordResult, ReplayJudge, judge_records

__all__ = [
    "RecordResult",
    "ReplayJudge",
    "add_arguments",
    "build_report",
    "judge_records",
    "main",
    "summary",
    "write_reports",
]
