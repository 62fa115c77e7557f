"""EventLog -> what people read: the report (text, JSON) and timelines."""

from .report import Report, build_report
from .timeline import chrome_trace

__all__ = ["Report", "build_report", "chrome_trace"]
