"""Offline training: datasets, trainer, reports (torch)."""
