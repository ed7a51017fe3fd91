"""Datasets, scenarios (task splits) and output label spaces."""
