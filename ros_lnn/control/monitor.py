"""Faults of a running controller that no single sample shows (no ROS): efforts pinned at their limits
for too long, a task error that keeps growing or stays beyond a bound, and where the arm may reach.

``FaultMonitor.update(t, saturated, task_error)`` is called per step with a monotonic time [s]; it
returns the cause (one line) the first time a fault trips, else ''. What the controller does then
(warn, hold, zero) is the caller's choice.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np


class FaultMonitor:
    """``saturation_s``: efforts saturated without a break for this long is a fault (0 = off);
    ``task_error_limit``: a task error above this for ``window_s`` is a fault (0 = off); a task error
    that grew at every one of ``samples`` samples over ``window_s`` (and by more than
    ``growth_min`` and 50 %) is a fault."""

    def __init__(
        self,
        saturation_s: float = 2.0,
        task_error_limit: float = 0.0,
        window_s: float = 2.0,
        samples: int = 10,
        growth_min: float = 0.05,
    ):
        self.saturation_s, self.task_error_limit = float(saturation_s), float(task_error_limit)
        self.window_s, self.samples, self.growth_min = float(window_s), int(samples), float(growth_min)
        self.reset()

    def reset(self) -> None:
        self._saturated_since: float | None = None
        self._beyond_since: float | None = None
        self._history: deque = deque(maxlen=self.samples + 1)
        self._next_sample = -math.inf

    def update(self, t: float, saturated: bool, task_error: float) -> str:
        if self.saturation_s > 0:
            if not saturated:
                self._saturated_since = None
            elif self._saturated_since is None:
                self._saturated_since = t
            elif t - self._saturated_since >= self.saturation_s:
                span = t - self._saturated_since
                self._saturated_since = None
                return (
                    f"efforts at their limits for {span:.1f} s (saturation_timeout_s {self.saturation_s:g})"
                )
        if not math.isfinite(task_error):
            return ""
        if self.task_error_limit > 0:
            if task_error <= self.task_error_limit:
                self._beyond_since = None
            elif self._beyond_since is None:
                self._beyond_since = t
            elif t - self._beyond_since >= self.window_s:
                self._beyond_since = None
                return (
                    f"task error {task_error:.3g} above task_error_limit {self.task_error_limit:g} for "
                    f"{self.window_s:g} s"
                )
        if t >= self._next_sample:
            self._next_sample = t + self.window_s / self.samples
            self._history.append(task_error)
            h = self._history
            if len(h) == h.maxlen:
                first, last = h[0], h[-1]
                rising = all(b > a for a, b in zip(h, list(h)[1:]))
                if rising and last - first > max(self.growth_min, 0.5 * first):
                    h.clear()
                    return f"task error growing: {first:.3g} -> {last:.3g} over {self.window_s:g} s"
        return ""


def reach_bound(pin_model, frame_id: int):
    """(centre, radius): every point the frame can reach lies within ``radius`` of ``centre`` (the
    first moving joint's origin; an upper bound from the lengths along the chain), or None when a
    prismatic joint or a floating base leaves the reach unbounded."""
    frame = pin_model.frames[frame_id]
    chain = []
    jid = int(frame.parentJoint if hasattr(frame, "parentJoint") else frame.parent)
    while jid > 0:
        chain.append(jid)
        jid = int(pin_model.parents[jid])
    if not chain:
        return None
    for j in chain:
        short = pin_model.joints[j].shortname()
        if not short.startswith("JointModelR"):
            return None
    first = chain[-1]
    centre = np.asarray(pin_model.jointPlacements[first].translation, float).copy()
    radius = sum(float(np.linalg.norm(pin_model.jointPlacements[j].translation)) for j in chain[:-1])
    radius += float(np.linalg.norm(frame.placement.translation))
    return centre, radius
