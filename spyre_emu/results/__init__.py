"""EventLog -> what people read: the report (text, JSON), timelines, comparisons of reports."""

from .acelyzer import ideal_cycles_files
from .report import Report, build_report
from .timeline import chrome_trace

__all__ = ["Report", "build_report", "chrome_trace", "ideal_cycles_files"]
