"""Debugging tools: metrics and counters."""

from .counters import metrics, report, reset_metrics

__all__ = ["metrics", "report", "reset_metrics"]
