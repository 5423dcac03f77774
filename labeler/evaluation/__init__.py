"""Measuring labels and PRM scores: human reference labels, metrics, agreement, the HTML report."""
