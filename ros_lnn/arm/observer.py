"""External joint torque of an arm from its joint states: what the motors did not command.

Two estimators of ``τ_ext`` in ``M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_nr(q, q̇) = τ + τ_ext`` (``τ``: the
measured joint torque, ``τ_nr``: friction + the learned residual):

* :class:`MomentumObserver` — De Luca's generalized-momentum observer. With ``p = M(q) q̇`` and
  ``ṗ = τ + τ_ext + Cᵀq̇ − g − τ_nr``::

      r(t) = K ( p(t) − p(0) − ∫ (τ + Cᵀq̇ − g − τ_nr + r) dt )

  so ``ṙ = K (τ_ext − r)``: every joint's ``r_j`` follows its external torque through a first-order lag
  of gain ``K_j`` (1/s), with no accelerations. Discretely, from one joint state to the next::

      d_k = (p_k − p_{k−1}) / Δt_k − mean(β_k, β_{k−1}),   β = τ + Cᵀq̇ − g − τ_nr
      r_k = e^{−K Δt_k} r_{k−1} + (1 − e^{−K Δt_k}) d_k

  the exact solution of the first-order lag over a step on which ``d`` is constant (the sum form above
  with ``r`` integrated exactly), so an irregular or long ``Δt`` (a dropped sample) never makes it
  unstable; for ``K Δt ≪ 1`` it is De Luca's formula with the trapezoid rule.
* :class:`DirectObserver` — the direct residual ``τ̂(q, q̇, q̈_f) − τ`` with ``q̈_f`` from a causal
  local-polynomial fit of the last samples of q̇ (:class:`ros_lnn.estimation.derivative.CausalPolyDerivative`),
  passed through the same first-order lag ``K``; it needs q̈, so contact during fast motion shows its
  filter's lag and noise.

The dynamics come from an identified arm model (:class:`ros_lnn.arm.model.ArmModel`) or from the URDF
alone (:class:`RigidDynamics` with the URDF's inertial parameters and no friction: the "URDF-nominal"
observer, as ``ext_observer_ros`` or KDL's observer compute it).

Detection (:class:`CollisionDetector`): joint ``j`` is in collision when ``|r_j| > a_j |q̇_j| + b_j``
(a static threshold plus a band that widens with speed, where friction and the q̇-dependent model
error grow); it leaves the state when ``|r_j|`` fell below ``release × (a_j |q̇_j| + b_j)`` for
``hold_s``. :func:`calibrate` sets ``a`` and ``b`` for a chosen false-alarm rate from collision-free
recordings. :func:`external_wrench` maps ``r`` to a wrench at a frame through the damped
pseudo-inverse of the frame's Jacobian transpose.

What no joint-torque observer sees: an external wrench whose joint torque ``Jᵀ F`` is zero (a force
along the arm's structure into a joint axis: the null space of ``Jᵀ``); a wrench at a frame is only
determined up to what the joints before the contact feel. numpy + Pinocchio (+ ONNX Runtime through
ArmModel); no torch.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, DataError
from . import friction
from .rigid_body import ArmRigidBody, pinocchio

METHODS = ("momentum", "direct")


# -- dynamics ------------------------------------------------------------------------------------
class RigidDynamics:
    """M, C, g (and friction, when ``phi`` is given) of an :class:`ArmRigidBody`, one state at a time,
    with one Pinocchio workspace (ArmRigidBody's own methods build a fresh one per call)."""

    def __init__(self, arm: ArmRigidBody, phi=None, coulomb_velocity: float = friction.COULOMB_VELOCITY):
        self.arm = arm
        self.joints = arm.joints
        self.n = arm.n
        self.phi = None if phi is None else np.asarray(phi, dtype=float)
        self.coulomb_velocity = float(coulomb_velocity)
        self._pin = pinocchio()
        self._data = arm.model.createData()
        self._ix = np.ix_(arm.order, arm.order)
        self._q = np.zeros(arm.n)
        self._qd = np.zeros(arm.n)

    def _set(self, q, qd=None):
        self._q[self.arm.order] = q
        if qd is not None:
            self._qd[self.arm.order] = qd

    def mass_matrix(self, q) -> np.ndarray:
        self._set(q)
        M = self._pin.crba(self.arm.model, self._data, self._q)
        M = np.triu(M) + np.triu(M, 1).T
        return M[self._ix]

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        self._set(q, qd)
        return self._pin.computeCoriolisMatrix(self.arm.model, self._data, self._q, self._qd)[self._ix]

    def gravity_torque(self, q) -> np.ndarray:
        self._set(q)
        return self._pin.computeGeneralizedGravity(self.arm.model, self._data, self._q)[self.arm.order]

    def non_rigid_torque(self, q, qd) -> np.ndarray:
        qd = np.asarray(qd, dtype=float)
        if self.phi is None:
            return np.zeros_like(qd)
        return friction.torque(self.phi, qd, self.coulomb_velocity)

    def terms(self, q, qd) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(M, C, g, τ_nr) at one state (1-D q, q̇)."""
        q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
        return (
            self.mass_matrix(q),
            self.coriolis_matrix(q, qd),
            self.gravity_torque(q),
            np.asarray(self.non_rigid_torque(q, qd)).reshape(-1),
        )


class ModelDynamics(RigidDynamics):
    """An identified :class:`ros_lnn.arm.model.ArmModel`: its rigid body through :class:`RigidDynamics`,
    friction + learned residual from its ONNX graph. Not its fast torque (:mod:`ros_lnn.arm.fast_torque`,
    10–100 Hz): the observers' first-order lag ``K`` (tens to 150 1/s) attenuates most of that band in
    ``r``, and the momentum observer takes inertial torques from the measured momentum, not from q̈."""

    def __init__(self, model):
        super().__init__(model.rigid)
        self.model = model

    def non_rigid_torque(self, q, qd) -> np.ndarray:
        return self.model.non_rigid_torque(np.atleast_2d(q), np.atleast_2d(qd))[0]


def dynamics_of(source):
    """The per-state dynamics an observer runs on: an ArmModel (identified), an ArmRigidBody (its
    parameters, no friction), or any object with ``terms(q, qd)``."""
    if hasattr(source, "terms"):
        return source
    if isinstance(source, ArmRigidBody):
        return RigidDynamics(source)
    if hasattr(source, "rigid") and hasattr(source, "non_rigid_torque"):
        return ModelDynamics(source)
    raise ConfigError(f"{type(source).__name__}: not an arm model, an ArmRigidBody or a dynamics object")


def _gains(gain, n: int) -> np.ndarray:
    k = np.broadcast_to(np.asarray(gain, dtype=float), (n,)).copy()
    if not np.all(np.isfinite(k)) or np.any(k <= 0):
        raise ConfigError(f"observer gains {k.tolist()}: give finite gains > 0 (1/s)")
    return k


# -- observers ------------------------------------------------------------------------------------
class _Observer:
    """What both observers hold: the dynamics, the gain K per joint, the causal q̈ filter, r."""

    def __init__(self, dynamics, gain=100.0, window: int = 9):
        from ..estimation.derivative import CausalPolyDerivative

        self.dyn = dynamics_of(dynamics)
        self.n = self.dyn.n
        self.K = _gains(gain, self.n)
        self.deriv = CausalPolyDerivative(window=window, degree=2, order=1)
        self.reset()

    def reset(self) -> None:
        self._t: float | None = None
        self.deriv.reset()
        self.r = np.zeros(self.n)
        self.model_effort = np.zeros(self.n)


class MomentumObserver(_Observer):
    """De Luca's generalized-momentum observer, one joint state at a time (see the module text)."""

    method = "momentum"

    def reset(self) -> None:
        super().reset()
        self._p = np.zeros(self.n)
        self._beta = np.zeros(self.n)

    def update(self, t: float, q, qd, tau) -> np.ndarray:
        """Add a joint state (time s, q, q̇, measured τ); returns r, the external torque estimate.
        A time that does not increase restarts the observer (r = 0). ``model_effort`` is then the
        model's τ̂(q, q̇, q̈_f) with q̈_f from the causal filter (for display: r does not use it)."""
        q, qd, tau = (np.asarray(x, dtype=float) for x in (q, qd, tau))
        if self._t is not None and t <= self._t:
            self.reset()
        M, C, g, tnr = self.dyn.terms(q, qd)
        p = M @ qd
        beta = tau + C.T @ qd - g - tnr
        d = self.deriv.update(t, qd)
        self.model_effort = (M @ d[0] if d is not None else 0.0) + C @ qd + g + tnr
        if self._t is not None:
            dt = t - self._t
            ext = (p - self._p) / dt - 0.5 * (beta + self._beta)
            a = np.exp(-self.K * dt)
            self.r = a * self.r + (1.0 - a) * ext
        self._t, self._p, self._beta = t, p, beta
        return self.r


class DirectObserver(_Observer):
    """``τ̂(q, q̇, q̈_f) − τ`` through a first-order lag of gain ``K`` (see the module text)."""

    method = "direct"

    def update(self, t: float, q, qd, tau) -> np.ndarray:
        q, qd, tau = (np.asarray(x, dtype=float) for x in (q, qd, tau))
        if self._t is not None and t <= self._t:
            self.reset()
        d = self.deriv.update(t, qd)
        qdd = np.zeros(self.n) if d is None else d[0]
        M, C, g, tnr = self.dyn.terms(q, qd)
        self.model_effort = M @ qdd + C @ qd + g + tnr
        if d is not None and self._t is not None:
            a = np.exp(-self.K * (t - self._t))
            self.r = a * self.r + (1.0 - a) * (self.model_effort - tau)
        self._t = t
        return self.r


def make_observer(dynamics, method: str = "momentum", gain=100.0, window: int = 9):
    if method == "momentum":
        return MomentumObserver(dynamics, gain, window)
    if method == "direct":
        return DirectObserver(dynamics, gain, window)
    raise ConfigError(f"observer method '{method}': one of {', '.join(METHODS)}")


class _Replayed:
    """Per-state terms of ``dyn`` with friction + residual taken from a table computed for the whole
    recording in one ONNX Runtime call (``run_observer``: the per-sample call was most of its time)."""

    def __init__(self, dyn: RigidDynamics, table: np.ndarray):
        self.dyn, self.table, self.k = dyn, table, 0
        self.n, self.joints = dyn.n, dyn.joints

    def terms(self, q, qd):
        q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
        out = (
            self.dyn.mass_matrix(q),
            self.dyn.coriolis_matrix(q, qd),
            self.dyn.gravity_torque(q),
            self.table[self.k],
        )
        self.k += 1
        return out


def run_observer(observer, t, q, qd, tau) -> np.ndarray:
    """The observer over a whole recording: r (N, n) — the same steps as sample by sample."""
    observer.reset()
    dyn = observer.dyn
    if isinstance(dyn, ModelDynamics):
        observer.dyn = _Replayed(dyn, dyn.model.non_rigid_torque(np.asarray(q), np.asarray(qd)))
    out = np.empty((len(t), observer.n))
    try:
        for k in range(len(t)):
            out[k] = observer.update(float(t[k]), q[k], qd[k], tau[k])
    finally:
        observer.dyn = dyn
    return out


# -- thresholds and detection ---------------------------------------------------------------------
@dataclass
class Thresholds:
    """Per joint ``|r_j| > velocity_slope_j · |q̇_j| + static_j`` is a collision."""

    joints: tuple
    static: np.ndarray  # N·m (N for a prismatic joint)
    velocity_slope: np.ndarray  # N·m per rad/s
    release: float = 0.5  # leave the collision state below release × threshold ...
    hold_s: float = 0.05  # ... for this long
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.joints = tuple(self.joints)
        self.static = np.asarray(self.static, dtype=float).reshape(-1)
        self.velocity_slope = np.asarray(self.velocity_slope, dtype=float).reshape(-1)
        n = len(self.joints)
        if self.static.size != n or self.velocity_slope.size != n:
            raise ConfigError(f"thresholds: {n} joints need {n} static values and {n} velocity slopes")
        if not (np.all(np.isfinite(self.static)) and np.all(self.static > 0)):
            raise ConfigError(f"thresholds: static values {self.static.tolist()} must be finite and > 0")
        if not (np.all(np.isfinite(self.velocity_slope)) and np.all(self.velocity_slope >= 0)):
            raise ConfigError(
                f"thresholds: velocity slopes {self.velocity_slope.tolist()} must be finite, >= 0"
            )
        if not 0.0 < self.release <= 1.0 or not 0.0 <= self.hold_s <= 10.0:
            raise ConfigError(
                f"thresholds: release {self.release} must be in (0, 1], hold_s {self.hold_s} in [0, 10]"
            )

    def band(self, qd) -> np.ndarray:
        return self.velocity_slope * np.abs(np.asarray(qd, dtype=float)) + self.static

    def reordered(self, joints) -> Thresholds:
        """The thresholds for ``joints`` (a model's order); ConfigError when one is missing."""
        missing = [j for j in joints if j not in self.joints]
        if missing:
            raise ConfigError(
                f"thresholds have no values for joints {missing} (they cover {list(self.joints)})"
            )
        idx = [self.joints.index(j) for j in joints]
        return Thresholds(
            tuple(joints), self.static[idx], self.velocity_slope[idx], self.release, self.hold_s, self.info
        )

    def to_dict(self) -> dict:
        return {
            "joints": {
                j: {"static": float(b), "velocity_slope": float(a)}
                for j, b, a in zip(self.joints, self.static, self.velocity_slope)
            },
            "release": float(self.release),
            "hold_s": float(self.hold_s),
            **({"calibration": self.info} if self.info else {}),
        }

    @classmethod
    def from_dict(cls, doc, source: str = "thresholds") -> Thresholds:
        if not isinstance(doc, dict) or not isinstance(doc.get("joints"), dict) or not doc["joints"]:
            raise ConfigError(
                f"{source}: expected a mapping with joints: {{JOINT: {{static: .., velocity_slope: ..}}}}"
            )
        joints, static, slope = [], [], []
        for joint, entry in doc["joints"].items():
            if not isinstance(entry, dict) or "static" not in entry:
                raise ConfigError(f"{source}: joint {joint} needs static (and optionally velocity_slope)")
            values = (entry["static"], entry.get("velocity_slope", 0.0))
            if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
                raise ConfigError(f"{source}: joint {joint}: static and velocity_slope must be numbers")
            joints.append(str(joint))
            static.append(float(values[0]))
            slope.append(float(values[1]))
        extra = sorted(set(doc) - {"joints", "release", "hold_s", "calibration"})
        if extra:
            raise ConfigError(
                f"{source}: unknown key(s) {extra}; known: joints, release, hold_s, calibration"
            )
        try:
            release, hold = float(doc.get("release", 0.5)), float(doc.get("hold_s", 0.05))
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: release and hold_s must be numbers") from None
        try:
            return cls(
                tuple(joints), np.array(static), np.array(slope), release, hold, doc.get("calibration") or {}
            )
        except ConfigError as exc:
            raise ConfigError(f"{source}: {str(exc).removeprefix('thresholds: ')}") from None

    def save(self, path) -> None:
        from pathlib import Path

        import yaml

        from ..files import write_atomically

        text = (
            "# ros-lnn calibrate-observer: per joint |r| > velocity_slope * |qd| + static is a collision\n"
            + yaml.safe_dump(self.to_dict(), sort_keys=False)
        )
        write_atomically(Path(path), text.encode())  # a node may be reading the previous thresholds

    @classmethod
    def load(cls, path) -> Thresholds:
        from .mapping import read_config

        return cls.from_dict(read_config(path), str(path))


@dataclass
class Onset:
    """A collision's first sample on one joint."""

    t: float
    joint: int
    residual: float
    threshold: float


class CollisionDetector:
    """Per-joint threshold with hysteresis: :meth:`update` returns the joints whose collision began at
    this sample; ``active`` says which are in collision, ``peak`` their largest |r| so far."""

    def __init__(self, thresholds: Thresholds):
        self.th = thresholds
        self.n = len(thresholds.joints)
        self.reset()

    def reset(self) -> None:
        self.active = np.zeros(self.n, dtype=bool)
        self.peak = np.zeros(self.n)
        self._below_since = np.full(self.n, np.nan)

    def update(self, t: float, r, qd) -> list[Onset]:
        r = np.asarray(r, dtype=float)
        band = self.th.band(qd)
        mag = np.abs(r)
        over = mag > band
        onsets = [Onset(t, int(j), float(r[j]), float(band[j])) for j in np.flatnonzero(over & ~self.active)]
        self.active |= over
        self.peak = np.where(self.active, np.maximum(self.peak, mag), 0.0)
        low = self.active & (mag < self.th.release * band)
        self._below_since = np.where(low, np.where(np.isnan(self._below_since), t, self._below_since), np.nan)
        ended = low & (t - self._below_since >= self.th.hold_s)
        if ended.any():
            self.active &= ~ended
            self.peak[ended] = 0.0
            self._below_since[ended] = np.nan
        return onsets


def calibrate(
    runs,
    joints,
    *,
    false_alarm_rate_per_h: float = 0.1,
    margin: float = 0.1,
    block_s: float = 1.0,
    bins: int = 8,
    quantile: float = 0.99,
    release: float = 0.5,
    hold_s: float = 0.05,
) -> Thresholds:
    """Thresholds from collision-free runs: ``runs`` is a list of ``(t, r, qd)`` (observer residuals
    and velocities of recordings without contact).

    Per joint: the band's shape ``a'|q̇| + b'`` is a line through the ``quantile`` of |r| in ``bins``
    speed bins (slope ≥ 0); the scale ``x`` on it is the level the 1 s maxima of ``|r| / (a'|q̇| + b')``
    exceed with probability ``rate × block_s`` (a Gumbel fit to the block maxima: extreme-value
    extrapolation to rates the recordings are too short to show), the false-alarm rate split evenly
    over the joints; never below ``(1 + margin)`` × the largest value seen (no alarm on the calibration
    data)."""
    if not (isinstance(false_alarm_rate_per_h, (int, float)) and 0 < false_alarm_rate_per_h < 3600):
        raise ConfigError(f"false-alarm rate {false_alarm_rate_per_h}: give a rate per hour in (0, 3600)")
    if not 0 <= margin <= 10:
        raise ConfigError(f"margin {margin}: give a fraction in [0, 10]")
    joints = tuple(joints)
    n = len(joints)
    ts, rs, vs = [], [], []
    for t, r, qd in runs:
        r, qd = np.asarray(r, dtype=float), np.asarray(qd, dtype=float)
        if r.ndim != 2 or r.shape[1] != n or qd.shape != r.shape or len(t) != len(r):
            raise DataError(
                f"calibration run of shape {r.shape}: expected (samples, {n}) residuals and velocities"
            )
        ts.append(np.asarray(t, dtype=float))
        rs.append(r)
        vs.append(qd)
    duration = sum(float(t[-1] - t[0]) for t in ts if len(t) > 1)
    if duration < 10 * block_s:
        raise DataError(
            f"{duration:.1f} s of collision-free motion: calibrate on at least {10 * block_s:g} s"
        )
    R, V = np.abs(np.concatenate(rs)), np.abs(np.concatenate(vs))
    p_block = min(false_alarm_rate_per_h / 3600.0 / n * block_s, 0.5)
    static, slope, report = np.empty(n), np.empty(n), {}
    for j in range(n):
        a_, b_ = _band_shape(V[:, j], R[:, j], bins, quantile)
        maxima = np.concatenate(
            [
                _block_maxima(t, np.abs(r[:, j]) / (a_ * np.abs(v[:, j]) + b_), block_s)
                for t, r, v in zip(ts, rs, vs)
            ]
        )
        beta = max(float(np.std(maxima)) * math.sqrt(6) / math.pi, 1e-12)
        mu = float(np.mean(maxima)) - 0.5772156649 * beta
        level = mu - beta * math.log(-math.log1p(-p_block))
        seen = float(maxima.max())
        x = max(level, (1.0 + margin) * seen)
        static[j], slope[j] = x * b_, x * a_
        report[joints[j]] = {"gumbel_level": level, "largest_seen": seen, "scale": x}
    info = {
        "false_alarm_rate_per_h": float(false_alarm_rate_per_h),
        "margin": float(margin),
        "seconds": duration,
        "samples": int(len(R)),
        "per_joint": report,
    }
    return Thresholds(joints, static, slope, release, hold_s, info)


def _band_shape(v, r, bins: int, quantile: float) -> tuple[float, float]:
    edges = np.quantile(v, np.linspace(0, 1, bins + 1))
    centres, levels = [], []
    for lo, hi in itertools.pairwise(edges):
        sel = (v >= lo) & (v <= hi)
        if sel.sum() >= 20:
            centres.append(float(np.median(v[sel])))
            levels.append(float(np.quantile(r[sel], quantile)))
    floor = max(float(np.quantile(r, quantile)), 1e-9)
    if len(centres) < 2 or np.ptp(centres) <= 0:
        return 0.0, floor
    a, b = np.polyfit(centres, levels, 1)
    if a <= 0:
        return 0.0, floor
    b = max(b, 0.25 * float(np.min(levels)), 1e-9)
    return float(a), float(b)


def _block_maxima(t, s, block_s: float) -> np.ndarray:
    idx = np.floor((t - t[0]) / block_s).astype(int)
    out = np.full(idx[-1] + 1, -np.inf)
    np.maximum.at(out, idx, s)
    return out[np.isfinite(out)]


# -- wrench ----------------------------------------------------------------------------------------
class WrenchEstimator:
    """The wrench at a URDF frame whose joint torque ``Jᵀ F`` explains ``τ_ext``:
    ``F = (J Jᵀ + λ² I)⁻¹ J τ_ext`` (the damped pseudo-inverse of Jᵀ). ``J`` is the frame's Jacobian in
    Pinocchio's LOCAL convention: force and torque about the frame's origin, in the frame's own axes
    (a WrenchStamped with that frame_id)."""

    def __init__(self, arm: ArmRigidBody, frame: str, damping: float = 0.01):
        self.pin = pinocchio()
        self.arm = arm
        if not arm.model.existFrame(frame):
            names = [f.name for f in arm.model.frames if f.name != "universe"]
            raise ConfigError(f"frame '{frame}' is not in the URDF (it has {', '.join(names[:12])}, ...)")
        self.frame_id = arm.model.getFrameId(frame)
        self.frame = frame
        self.damping = float(damping)
        self._data = arm.model.createData()
        self._q = np.zeros(arm.n)

    def jacobian(self, q) -> np.ndarray:
        """(6, n) in mapping order."""
        pin = self.pin
        self._q[self.arm.order] = q
        J = pin.computeFrameJacobian(
            self.arm.model, self._data, self._q, self.frame_id, pin.ReferenceFrame.LOCAL
        )
        return J[:, self.arm.order]

    def wrench(self, q, tau_ext) -> np.ndarray:
        """(fx, fy, fz, tx, ty, tz)."""
        J = self.jacobian(q)
        A = J @ J.T + self.damping**2 * np.eye(6)
        return np.linalg.solve(A, J @ np.asarray(tau_ext, dtype=float))
