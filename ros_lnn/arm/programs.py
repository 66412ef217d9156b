"""Robot programs for identification and tests beside the exciting Fourier series: point-to-point
moves with dwells (stops and reversals of several amplitudes — what excites friction with memory),
static holds, and trajectories played one after another.

A move is a quintic (minimum-jerk) profile of all joints together from rest to rest, as long as the
slowest joint needs within its velocity and acceleration limits (peak velocity ``15/8 Δ/T``, peak
acceleration ``10/√3 Δ/T²``); a dwell holds the pose. Every trajectory here has ``evaluate(t) → (q, q̇,
q̈)`` and ``duration``, like :class:`ros_lnn.arm.fourier.FourierTrajectory`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .fourier import Limits

PEAK_VELOCITY = 15.0 / 8.0  # quintic rest-to-rest: max q̇ = 15/8 · Δ / T
PEAK_ACCELERATION = 10.0 / np.sqrt(3.0)  # max q̈ = 10/√3 · Δ / T²
MIN_MOVE_S = 0.15


def _quintic(s):
    """Position, velocity and acceleration shape of a rest-to-rest move at ``s`` = t / T ∈ [0, 1]."""
    s = np.clip(s, 0.0, 1.0)
    return (
        10 * s**3 - 15 * s**4 + 6 * s**5,
        30 * s**2 - 60 * s**3 + 30 * s**4,
        60 * s - 180 * s**2 + 120 * s**3,
    )


@dataclass
class PointToPoint:
    """Poses visited in turn: move ``k`` goes from ``poses[k]`` to ``poses[k + 1]`` in ``moves[k]`` s
    starting at ``starts[k]``, then the pose is held for ``dwells[k]`` s."""

    poses: np.ndarray  # (M + 1, n)
    moves: np.ndarray  # (M,)
    dwells: np.ndarray  # (M,)
    lead: float = 0.0  # s held at poses[0] before the first move

    def __post_init__(self):
        self.poses = np.atleast_2d(np.asarray(self.poses, dtype=float))
        self.moves = np.asarray(self.moves, dtype=float).reshape(-1)
        self.dwells = np.asarray(self.dwells, dtype=float).reshape(-1)
        if len(self.poses) != len(self.moves) + 1 or len(self.dwells) != len(self.moves):
            raise ConfigError(
                "a point-to-point program needs one move and one dwell per pose after the first"
            )
        self.starts = self.lead + np.concatenate([[0.0], np.cumsum(self.moves + self.dwells)[:-1]])

    @property
    def n(self) -> int:
        return self.poses.shape[1]

    @property
    def duration(self) -> float:
        return float(self.lead + np.sum(self.moves + self.dwells))

    def evaluate(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        k = np.clip(np.searchsorted(self.starts, t, side="right") - 1, 0, len(self.moves) - 1)
        T = self.moves[k]
        s = (t - self.starts[k]) / T
        p, v, a = _quintic(s)
        delta = self.poses[k + 1] - self.poses[k]
        before = t < self.starts[0]
        q = np.where(before[:, None], self.poses[0], self.poses[k] + p[:, None] * delta)
        inside = ((s >= 0) & (s <= 1) & ~before)[:, None]
        qd = np.where(inside, v[:, None] * delta / T[:, None], 0.0)
        qdd = np.where(inside, a[:, None] * delta / (T**2)[:, None], 0.0)
        return q, qd, qdd

    def stops(self) -> list[tuple[float, float]]:
        """(start, end) of every dwell (s)."""
        ends = self.starts + self.moves
        return [(float(e), float(e + d)) for e, d in zip(ends, self.dwells) if d > 0]


def move_time(delta, limits: Limits) -> float:
    """The shortest rest-to-rest quintic over ``delta`` (n,) within the velocity and acceleration limits."""
    d = np.abs(np.asarray(delta, dtype=float))
    t_v = PEAK_VELOCITY * d / limits.velocity
    t_a = np.sqrt(PEAK_ACCELERATION * d / limits.acceleration)
    return float(max(MIN_MOVE_S, np.max(t_v), np.max(t_a)))


def point_to_point(
    limits: Limits,
    duration: float,
    *,
    start=None,
    seed: int = 0,
    dwell=(0.3, 1.5),
    amplitudes=(0.002, 0.3),
    reversal: float = 0.5,
    margin: float = 0.1,
    speed: float = 0.6,
) -> PointToPoint:
    """A random program of about ``duration`` s: from ``start`` (default the middle of the range), each
    joint moves by a step whose size is log-uniform in ``amplitudes`` (fractions of its range: small
    steps after a reversal are the presliding regime, large ones slide), reversing direction with
    probability ``reversal``, within the inner range (``margin``) at ``speed`` × the limits; each move
    ends in a dwell drawn from ``dwell`` (s)."""
    if duration <= 0:
        raise ConfigError(f"program duration {duration}: give a positive number of seconds")
    rng = np.random.default_rng(seed)
    width = limits.upper - limits.lower
    lo, hi = limits.lower + margin * width, limits.upper - margin * width
    slow = Limits(limits.lower, limits.upper, speed * limits.velocity, speed * limits.acceleration)
    pose = 0.5 * (lo + hi) if start is None else np.clip(np.asarray(start, dtype=float), lo, hi)
    direction = rng.choice([-1.0, 1.0], size=len(pose))
    poses, moves, dwells = [pose], [], []
    total = 0.0
    while total < duration:
        flip = rng.random(len(pose)) < reversal
        direction = np.where(flip, -direction, direction)
        size = np.exp(rng.uniform(np.log(amplitudes[0]), np.log(amplitudes[1]), len(pose))) * width
        target = pose + direction * size
        bounced = (target < lo) | (target > hi)
        direction = np.where(bounced, -direction, direction)
        target = np.clip(np.where(bounced, pose - (target - pose), target), lo, hi)
        T = move_time(target - pose, slow)
        d = float(rng.uniform(*dwell))
        poses.append(target)
        moves.append(T)
        dwells.append(d)
        pose = target
        total += T + d
    return PointToPoint(np.array(poses), np.array(moves), np.array(dwells))


def holds(
    limits: Limits,
    poses: int = 5,
    hold_s: float = 4.0,
    seed: int = 0,
    margin: float = 0.15,
    speed: float = 0.4,
) -> PointToPoint:
    """Static holds: ``poses`` random poses in the inner range, each held ``hold_s`` s, reached by slow
    moves (the holds of a gravity or payload identification)."""
    rng = np.random.default_rng(seed)
    width = limits.upper - limits.lower
    lo, hi = limits.lower + margin * width, limits.upper - margin * width
    slow = Limits(limits.lower, limits.upper, speed * limits.velocity, speed * limits.acceleration)
    points = [0.5 * (lo + hi)] + [rng.uniform(lo, hi) for _ in range(poses)]
    moves = [move_time(b - a, slow) for a, b in itertools.pairwise(points)]
    return PointToPoint(np.array(points), np.array(moves), np.full(poses, float(hold_s)), lead=1.0)


@dataclass
class Sequence:
    """Trajectories played one after another, each from its own time 0 for its ``duration`` s (each
    should end where and as the next begins: at rest at the same pose)."""

    parts: list
    durations: list

    @property
    def duration(self) -> float:
        return float(sum(self.durations))

    @property
    def n(self) -> int:
        return self.parts[0].evaluate(np.zeros(1))[0].shape[1]

    def evaluate(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        edges = np.concatenate([[0.0], np.cumsum(self.durations)])
        which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(self.parts) - 1)
        n = self.n
        out = [np.empty((len(t), n)) for _ in range(3)]
        for i, part in enumerate(self.parts):
            sel = which == i
            if sel.any():
                for o, v in zip(out, part.evaluate(t[sel] - edges[i])):
                    o[sel] = v
        return tuple(out)
