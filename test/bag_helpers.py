"""Shared by the bag tests (test/bags/, test/commands/test_bag_record.py, test/training/test_training_run.py):
short crane trials sampled at a fixed rate, as a robot records."""

from __future__ import annotations

import functools

import numpy as np

from ros_lnn.bags.mapping import CRANE, BagMapping
from ros_lnn.physics.crane import Crane
from ros_lnn.physics.datasets import PAPER_TRIALS, position_servo
from ros_lnn.physics.simulate import simulate

RATE_HZ = 200.0
DURATION = 3.0


def crane_trial(spec_index: int, t_eval=None, duration=DURATION):
    spec = PAPER_TRIALS[spec_index]
    t_eval = np.arange(0.0, duration, 1.0 / RATE_HZ) if t_eval is None else t_eval
    return simulate(
        Crane(), duration, [spec.theta0], [0.0], servo=position_servo(spec), t_eval=t_eval, name=spec.name
    )


@functools.lru_cache(maxsize=1)
def crane_trials():
    """Three paper-like crane trials (cosine, multi-frequency, decaying), 3 s at 200 Hz."""
    return tuple(crane_trial(i) for i in (1, 3, 5))


def mapping(**overrides) -> BagMapping:
    return BagMapping.from_dict({**CRANE, **overrides})
