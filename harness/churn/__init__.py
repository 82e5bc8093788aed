"""Churn: seeded random writes on SKRs (``plan``), their execution (``runner``) and the
ground truth of which WatchEvents they must cause (``truth``)."""
