"""Differentially private active learning (paper 004): schedules, acquisition, DP selection."""
