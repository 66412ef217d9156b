"""A protective stop that brings an arm to rest inside its limits and holds it there (no ROS).

Zero effort is a stop only for a joint at rest with its brake on: a moving joint coasts on, and a link
that carries its weight falls. Industrial arms answer a protective stop with a *controlled* stop
(IEC 60204-1 stop category 1 or 2): the drives brake every joint to standstill along its path, and
then hold it (category 2) or let the brakes take over (category 1). A torque-controlled arm can do the
same from its rigid-body model, by inverse dynamics on a braking acceleration:

    q̈_stop = k_d (v_ref − q̇),        u = clip(H(q) q̈_stop + C(q, q̇) q̇ + g(q), −u_lim, u_lim)

* a joint still moving inside its soft limits: ``v_ref = 0`` — its velocity decays with the time
  constant ``1/k_d`` (``rate``), or as fast as its effort limit allows;
* a joint that came to rest (``|q̇|`` below :data:`SETTLED_SPEED`): held where it stopped,
  ``v_ref = k_p (q_rest − q)`` with ``k_p = k_d / 4`` (critically damped), gravity compensated;
* a joint past a soft limit (it overshot while braking, or the stop began there): brought back to the
  soft limit, ``v_ref = k_p (q_soft − q)``, at most :data:`RETURN_SPEED` (the reduced speed of ISO
  10218-1) and a tenth of its velocity limit.

The efforts stay within the effort limits; where they saturate, the joint brakes at the most the drive
gives. The latch (when to stop, how to reset) belongs to the caller: :meth:`ProtectiveStop.reset`
forgets where the joints came to rest.

**A late loop brakes softer.** The brake is a first-order loop on a state that is ``τ`` old when its
effort acts (the state's age, the command's way to the drive, the hold until the next one):
``q̈(t) = −k_d q̇(t − τ)`` stops without oscillating only for ``k_d τ < 1/e`` and is unstable past
``π/2``. At 50 1/s a 25 ms late loop already chatters and a 50 ms late one pumps energy into the arm
instead of taking it out (the simulated demo arm from 8 rad/s: 3.7 J to 120 J, 325 rad/s). With
``latency_s`` set (the controller sets it from its states' stamps), ``k_d`` is at most
:data:`LATENCY_RATE` ``/ latency_s``: a loaded machine stops the arm more slowly, never faster than it
can follow.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import ConfigError

#: A joint slower than this [rad/s or m/s] has come to rest: it is held where it is from then on.
SETTLED_SPEED = 0.05
#: The fastest a stopped joint is moved back inside its soft limit [rad/s or m/s].
RETURN_SPEED = 0.25
#: Default braking rate ``k_d`` [1/s]: velocities decay with a 20 ms time constant (at 500 Hz, a
#: tenth of the velocity goes per step: well inside the stable range of a sampled loop).
DEFAULT_RATE = 50.0
#: Largest ``k_d · latency`` of the brake (module text): below 1/e with margin for the sampling.
LATENCY_RATE = 0.3


class ProtectiveStop:
    """The stop's efforts per joint (one order throughout): ``effort_limits`` ``|u|`` bounds; ``rate``
    ``k_d`` [1/s]; ``lower``/``upper`` the soft position limits the joints are kept inside (None:
    none), ``velocity`` the velocity limits (None: none; they cap the speed of a return inside)."""

    def __init__(self, effort_limits, rate: float = DEFAULT_RATE, lower=None, upper=None, velocity=None):
        u = np.asarray(effort_limits, float).ravel()
        n = u.size
        if not (n and np.all(u > 0) and np.all(np.isfinite(u))):
            raise ConfigError("protective stop: effort limits must be finite and > 0 for every joint")
        if not (math.isfinite(rate) and rate > 0):
            raise ConfigError(f"protective stop: rate must be finite and > 0, got {rate}")
        self.effort_limits = u
        self.rate = float(rate)
        self.lower = np.full(n, -math.inf) if lower is None else np.asarray(lower, float).reshape(n)
        self.upper = np.full(n, math.inf) if upper is None else np.asarray(upper, float).reshape(n)
        v = np.full(n, math.inf) if velocity is None else np.asarray(velocity, float).reshape(n)
        self.return_speed = np.minimum(RETURN_SPEED, 0.1 * v)
        self.latency_s = 0.0  # how late the loop acts on a state [s]; 0: unknown (the rate as set)
        self.reset()

    def reset(self) -> None:
        """A new stop: no joint has come to rest yet."""
        self.rest = np.full(self.effort_limits.size, math.nan)

    def braking_rate(self) -> float:
        """``k_d``: the rate as set, at most :data:`LATENCY_RATE` ``/ latency_s`` (module text)."""
        if self.latency_s > 0.0:
            return min(self.rate, LATENCY_RATE / self.latency_s)
        return self.rate

    def acceleration(self, q, qd) -> np.ndarray:
        """``q̈_stop`` at the state ``q, q̇`` (module docstring); marks the joints that came to rest."""
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        inside = np.clip(q, self.lower, self.upper)
        settled = np.isnan(self.rest) & (np.abs(qd) < SETTLED_SPEED)
        self.rest[settled] = inside[settled]
        goal = np.where(np.isnan(self.rest), inside, self.rest)
        rate = self.braking_rate()
        v_ref = np.clip(rate / 4.0 * (goal - q), -self.return_speed, self.return_speed)
        return rate * (v_ref - qd)

    def effort(self, q, qd, inverse_dynamics: Callable) -> np.ndarray:
        """The efforts of the stop: ``inverse_dynamics(q, q̇, q̈) -> u`` (the model's ``H q̈ + C q̇ + g``)
        at :meth:`acceleration`, clipped to the effort limits; zeros where the model's answer is not
        finite (nothing non-finite is ever sent)."""
        u = np.asarray(inverse_dynamics(q, qd, self.acceleration(q, qd)), float)
        if not np.all(np.isfinite(u)):
            return np.zeros_like(self.effort_limits)
        return np.clip(u, -self.effort_limits, self.effort_limits)
