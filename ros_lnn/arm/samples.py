"""Recordings → filtered samples for identification and evaluation (no torch)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from .recording import ArmRecording
from .signals import filter_joint_signals


@dataclass
class Samples:
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray  # filtered (training) or raw (evaluation) joint torques
    tau_raw: np.ndarray  # the measured joint torques
    rate_hz: float
    cutoff_hz: float
    qd_measured: np.ndarray | None = None  # the logged velocities, unfiltered (from q where not logged)
    starts: tuple = (0,)  # first sample of each piece (a recording, or a stretch between gaps)
    q_measured: np.ndarray | None = None  # the logged positions, unfiltered (friction memory runs on them)
    tau_filtered: np.ndarray | None = None  # the filtered joint torques (= tau for training samples)
    t: np.ndarray | None = None  # the stamps (s), each piece's own

    def __len__(self) -> int:
        return len(self.q)

    def __add__(self, other: Samples) -> Samples:
        """Both sample sets, ``other``'s pieces after ``self``'s."""
        stacked = {k: np.concatenate([getattr(self, k), getattr(other, k)]) for k in _ARRAYS}
        return Samples(
            **stacked,
            rate_hz=self.rate_hz,
            cutoff_hz=self.cutoff_hz,
            starts=tuple(self.starts) + tuple(len(self) + s for s in other.starts),
        )


_ARRAYS = ("q", "qd", "qdd", "tau", "tau_raw", "qd_measured", "q_measured", "tau_filtered", "t")


def filtered_samples(
    recordings: list[ArmRecording], cutoff_hz: float, gap_factor: float, raw_tau: bool = False
) -> Samples:
    """Each recording split at gaps, each piece filtered on its own, all stacked. ``raw_tau``: keep
    the measured torque unfiltered (evaluation) instead of the filtered one (training)."""
    parts = []
    rates, cutoffs = [], []
    for rec in recordings:
        for seg in rec.segments(gap_factor):
            f = filter_joint_signals(seg.t, seg.q, seg.qd, seg.tau, cutoff_hz)
            measured = seg.qd if seg.qd is not None else np.gradient(seg.q, seg.t, axis=0)
            parts.append(
                (f.q, f.qd, f.qdd, seg.tau if raw_tau else f.tau, seg.tau, measured, seg.q, f.tau, seg.t)
            )
            rates.append(f.rate_hz)
            cutoffs.append(f.cutoff_hz)
    if not parts:
        names = ", ".join(r.name for r in recordings)
        raise DataError(f"{names}: no stretch of 64 or more samples without a gap")
    q, qd, qdd, tau, tau_raw, measured, q_logged, tau_f, t = (
        np.concatenate([p[i] for p in parts]) for i in range(9)
    )
    return Samples(
        q=q,
        qd=qd,
        qdd=qdd,
        tau=tau,
        tau_raw=tau_raw,
        rate_hz=float(np.median(rates)),
        cutoff_hz=float(np.median(cutoffs)),
        qd_measured=measured,
        q_measured=q_logged,
        tau_filtered=tau_f,
        t=t,
        starts=tuple(int(x) for x in np.cumsum([0] + [len(p[0]) for p in parts[:-1]])),
    )
