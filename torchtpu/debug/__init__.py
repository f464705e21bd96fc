"""Debugging tools: metrics and counters, recompile explanations."""

from .counters import metrics, report, reset_metrics
from .explain import explain_recompile

__all__ = ["explain_recompile", "metrics", "report", "reset_metrics"]
