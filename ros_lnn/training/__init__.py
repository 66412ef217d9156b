"""Offline training (torch): a typed run (``spec.py``: RunSpec; ``sources.py``: data and split;
``run.py``: run), the trainer, one checkpoint format, distributed and compiled steps, reports."""
