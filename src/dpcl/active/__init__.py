"""Differentially private active learning ([Schwethelm2025]): schedules, acquisition, DP selection."""
