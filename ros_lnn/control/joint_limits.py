"""Joint position and velocity limits on an effort command, as a careful ros2_control controller keeps
them (no ROS): soft limits that brake before the limit, and zero efforts, latched, on a violation.

Soft limits (the effort form of ros2_control's / ros_control's soft joint limits). A joint ``i`` with
position limits ``[lower, upper]`` has soft limits ``margin`` inside them; the velocity it may have is

    v⁺ = clamp(−k_p (q − soft_upper), −v_lim, v_lim),   v⁻ = clamp(−k_p (q − soft_lower), −v_lim, v_lim)

and the effort it may get is

    u_max = clamp(−k_v (q̇ − v⁺), −u_lim, u_lim),       u_min = clamp(−k_v (q̇ − v⁻), −u_lim, u_lim)

The command is clipped to ``[u_min, u_max]``: far from the limits and below the velocity limit the
bounds lie beyond the effort limits and nothing changes; past a soft limit the allowed velocity towards
the limit turns negative, so the effort that drives further is replaced by the spring-damper
``−k_v q̇ − k_v k_p (q − soft_upper)`` that stops the joint inside the margin; a joint faster than
``v_lim`` gets an effort that brakes it (``−k_v (q̇ − v_lim)``). ``k_v`` is per joint, by default
``5 s/rad × u_lim``: the whole effort range stays available until a joint is within 0.2 rad/s of the
velocity it may have, and the spring ``k_v k_p`` of a joint that can hold its own weight stops it within
``1 / (5 k_p)`` of its soft limit. A joint without a position limit
(continuous) has ``soft_lower = −inf``, ``soft_upper = +inf``; one without a velocity limit ``v_lim = inf``.

Violations. A position beyond a hard limit by more than ``position_tolerance``, or a velocity beyond
``velocity_tolerance × v_lim``, is a violation: every effort is zero from then on, and the guard stays
latched (``violation`` names the joint and the cause) until :meth:`JointLimitGuard.reset`. Zero effort
lets a moving joint coast and a loaded link fall: the DAC pipeline sends its protective stop's efforts
instead (:mod:`.protective_stop`, brake to rest and hold), where one is set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

#: Default soft-limit damping relative to a joint's effort limit: ``k_v = DAMPING_S × u_lim`` [s/rad].
DAMPING_S = 5.0


@dataclass(frozen=True)
class JointLimits:
    """Per joint (one order): position limits (``-inf``/``inf`` where there are none) and velocity
    limits (``inf`` where there is none)."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray

    def __post_init__(self):
        n = len(self.names)
        for label in ("lower", "upper", "velocity"):
            value = np.asarray(getattr(self, label), float)
            if value.shape != (n,) or np.any(np.isnan(value)):
                raise ConfigError(f"joint limits: {label} needs one number per joint {list(self.names)}")
            object.__setattr__(self, label, value)
        if np.any(~(self.lower < self.upper)):
            bad = [j for j, lo, hi in zip(self.names, self.lower, self.upper) if not lo < hi]
            raise ConfigError(f"joint limits: lower must be below upper for {bad}")
        if np.any(~(self.velocity > 0)):
            raise ConfigError(f"joint limits: velocity limits must be > 0 for {list(self.names)}")


def joint_limits_from_model(model, joint_names, position=None, velocity=None) -> JointLimits:
    """The limits of ``joint_names`` from the model (a URDF's ``<limit lower upper velocity>``, kept in
    ``model.joint_position_limits`` and each joint's ``velocity_limit``; continuous joints and models
    from YAML have no position limits), overridden by ``position`` (lower, upper per joint, flattened)
    and ``velocity`` (one number for all, or one per joint) when given. A URDF velocity of 0 or none
    means no velocity limit."""
    names = tuple(joint_names)
    n = len(names)
    urdf = getattr(model, "joint_position_limits", {}) or {}
    if position is not None and len(position):
        pairs = np.asarray(position, float).ravel()
        if pairs.size != 2 * n:
            raise ConfigError(
                f"position_limits has {pairs.size} numbers; give lower, upper for each joint {list(names)}"
            )
        lower, upper = pairs[0::2].copy(), pairs[1::2].copy()
    else:
        lower = np.array([urdf.get(j, (-math.inf, math.inf))[0] for j in names], float)
        upper = np.array([urdf.get(j, (-math.inf, math.inf))[1] for j in names], float)
    if velocity is not None and len(velocity):
        v = np.asarray(velocity, float).ravel()
        if v.size not in (1, n):
            raise ConfigError(
                f"velocity_limits has {v.size} numbers; give one, or one per joint {list(names)}"
            )
        vel = np.broadcast_to(v, (n,)).copy()
    else:
        by_name = {j.name: j.velocity_limit for j in model.joints}
        vel = np.array([by_name.get(j, math.inf) for j in names], float)
        vel[~(vel > 0)] = math.inf  # a URDF velocity="0": no limit
    return JointLimits(names, lower, upper, vel)


@dataclass
class LimitResult:
    """What the guard did to one command: the efforts sent, the joints whose effort the soft limits
    changed, and the violation (latched; '' when none)."""

    effort: np.ndarray
    soft_limited: np.ndarray  # bool per joint
    violation: str


class JointLimitGuard:
    """Soft limits and latched violations on efforts (module docstring). ``effort_limits``: ``|u|``
    bound per joint; ``margin``: distance of the soft limits inside the hard ones (at most a quarter
    of a joint's range); ``k_position`` [1/s], ``k_velocity`` [effort per unit velocity] (one number,
    or one per joint; None: :data:`DAMPING_S` × the effort limits)."""

    def __init__(
        self,
        limits: JointLimits,
        effort_limits,
        margin: float = 0.1,
        k_position: float = 10.0,
        k_velocity=None,
        velocity_tolerance: float = 1.2,
        position_tolerance: float = 0.0,
    ):
        n = len(limits.names)
        u = np.broadcast_to(np.asarray(effort_limits, float).ravel(), (n,)).copy()
        if np.any(~(u > 0)):
            raise ConfigError(f"joint limits: effort limits must be > 0 for {list(limits.names)}")
        k_v = DAMPING_S * u if k_velocity is None else np.asarray(k_velocity, float).ravel()
        if not (margin >= 0 and k_position > 0 and np.all(k_v > 0) and velocity_tolerance >= 1):
            raise ConfigError(
                "joint limits: need margin >= 0, k_position > 0, k_velocity > 0, velocity_tolerance >= 1"
            )
        if not position_tolerance >= 0:
            raise ConfigError("joint limits: position_tolerance must be >= 0")
        self.limits, self.effort_limits = limits, u
        span = limits.upper - limits.lower  # inf for a joint without position limits
        m = np.minimum(float(margin), 0.25 * span)
        self.soft_lower, self.soft_upper = limits.lower + m, limits.upper - m
        self.k_position, self.k_velocity = float(k_position), np.broadcast_to(k_v, (n,)).copy()
        self.velocity_tolerance, self.position_tolerance = (
            float(velocity_tolerance),
            float(position_tolerance),
        )
        self.reset()

    def reset(self) -> None:
        """Clear a latched violation: efforts go out again from the next command."""
        self.violation = ""

    def bounds(self, q, qd) -> tuple[np.ndarray, np.ndarray]:
        """``(u_min, u_max)`` per joint at the state ``q, q̇`` (module docstring)."""
        v_lim = self.limits.velocity
        v_up = np.clip(-self.k_position * (q - self.soft_upper), -v_lim, v_lim)
        v_low = np.clip(-self.k_position * (q - self.soft_lower), -v_lim, v_lim)
        u = self.effort_limits
        u_max = np.clip(-self.k_velocity * (qd - v_up), -u, u)
        u_min = np.clip(-self.k_velocity * (qd - v_low), -u, u)
        return u_min, u_max

    def check(self, q, qd) -> str:
        """The first violation at ``q, q̇`` in one line ('' when none)."""
        lim = self.limits
        tol = self.position_tolerance
        for i, name in enumerate(lim.names):
            if q[i] > lim.upper[i] + tol:
                return f"{name} position {q[i]:.4g} beyond its upper limit {lim.upper[i]:.4g}"
            if q[i] < lim.lower[i] - tol:
                return f"{name} position {q[i]:.4g} beyond its lower limit {lim.lower[i]:.4g}"
            if abs(qd[i]) > self.velocity_tolerance * lim.velocity[i]:
                return (
                    f"{name} velocity {qd[i]:.4g} beyond {self.velocity_tolerance:g} × its limit "
                    f"{lim.velocity[i]:.4g}"
                )
        return ""

    def apply(self, q, qd, effort) -> LimitResult:
        """The efforts to send for ``effort`` at ``q, q̇`` (all in the limits' joint order): zero when a
        violation is latched or found now, else clipped to the soft-limit bounds."""
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        effort = np.asarray(effort, float)
        if not self.violation:
            self.violation = self.check(q, qd)
        if self.violation:
            return LimitResult(np.zeros_like(effort), np.zeros(effort.shape, bool), self.violation)
        u_min, u_max = self.bounds(q, qd)
        out = np.minimum(np.maximum(effort, u_min), u_max)
        return LimitResult(out, out != effort, "")
