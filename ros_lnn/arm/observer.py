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
  unstable; for ``K Δt ≪ 1`` it is De Luca's formula with the trapezoid rule. ``effort_timing`` says
  what a joint state's ``τ`` is (:data:`EFFORT_TIMINGS`): ``sampled`` — the torque at the stamp (a
  torque sensor, motor currents), averaged over the step with the trapezoid as the rest of β;
  ``held_until_stamp`` — the torque the joints held over the step that ended at the stamp (a
  simulator's applied effort: dac_chain_sim, arm_sim, Gazebo), taken for the whole step;
  ``held_from_stamp`` — the command computed at the stamp and held over the next step (a recording of
  commands beside states: :mod:`ros_lnn.arm.simulation`). With the wrong one a step of the effort
  Δτ (a watchdog zeroing a gravity-loaded arm) shows as a one-sample error ``(1 − e^{−KΔt}) Δτ / 2``.
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
``hold_s``. **At rest** a second test: once the arm has stood (``|q̇_j| < still_velocity`` on every
joint) for ``settle_s``, the residual each joint settled at is its baseline, and ``|r_j − baseline_j|
> c_j`` is a collision too. The friction a standing joint holds is known only within the stiction band — its
exact value depends on displacements below what the encoder resolves, so every model leaves a bias
that differs from stop to stop — but a push changes it: with friction memory the model's presliding
term shows a push that stiction absorbs (the motor torque hardly changes), which no memoryless model
can. :func:`calibrate` sets ``a``, ``b`` and ``c`` for a chosen false-alarm rate from collision-free
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
from .presliding import advance
from .rigid_body import ArmRigidBody, pinocchio

METHODS = ("momentum", "direct")
#: What a joint state's effort is, as the weights of (this state's τ, the previous state's τ) over the
#: step between them (module text).
EFFORT_TIMINGS = {"sampled": (0.5, 0.5), "held_until_stamp": (1.0, 0.0), "held_from_stamp": (0.0, 1.0)}


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
        self._in_order = bool(np.array_equal(arm.order, np.arange(arm.n)))
        self._lower = np.tril_indices(arm.n, -1)

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

    def non_rigid_batch(self, q, qd) -> np.ndarray:
        """:meth:`non_rigid_torque` at each state of a batch in time order (B, n)."""
        return np.asarray(self.non_rigid_torque(q, qd), dtype=float).reshape(np.shape(qd))

    def rigid_batch(self, q, qd) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(M, C, g) stacked over a batch of states (B, n): the values of :meth:`mass_matrix`,
        :meth:`coriolis_matrix` and :meth:`gravity_torque` at each, Pinocchio called once per term and
        state, the rest over the whole batch."""
        pin, model, data = self._pin, self.arm.model, self._data
        B, n = q.shape
        M, C, g = np.empty((B, n, n)), np.empty((B, n, n)), np.empty((B, n))
        if not self._in_order:
            q, qd = self._model_order(q), self._model_order(qd)
        for k in range(B):
            qk, vk = q[k], qd[k]
            M[k] = pin.crba(model, data, qk)  # its upper triangle: the lower one is filled below
            C[k] = pin.computeCoriolisMatrix(model, data, qk, vk)
            g[k] = pin.computeGeneralizedGravity(model, data, qk)
        lo, up = self._lower
        M[:, lo, up] = M[:, up, lo]
        if self._in_order:
            return M, C, g
        order = self.arm.order
        return M[:, order[:, None], order], C[:, order[:, None], order], g[:, order]

    def _model_order(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros_like(x)
        out[:, self.arm.order] = x
        return out

    def batch_terms(self, q, qd) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(M, C, g, τ_nr) stacked over a batch of states in time order (B, n): :meth:`terms` at each,
        the non-rigid torque of the whole batch in one call."""
        return (*self.rigid_batch(q, qd), self.non_rigid_batch(q, qd))

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
    ``r``, and the momentum observer takes inertial torques from the measured momentum, not from q̈.

    A model with friction memory (:mod:`ros_lnn.arm.presliding`) advances its friction state with every
    state it is asked about (one call of :meth:`non_rigid_torque` per joint state, or of
    :meth:`non_rigid_batch` per batch, in time order): the state is advanced in numpy (float64, the
    play operators of :func:`ros_lnn.arm.presliding.advance`) and the graph evaluates the torque at the
    state before each sample, so a batch — its states computed first, one graph call — gives what the
    samples one by one give.
    At the start — and after :meth:`reset` — the state is unknown: ``start`` ``"measured"`` sets it
    from the first joint state's torque (:meth:`start_from`: the torque the rest of the model leaves
    unexplained at the start is taken as the friction the joints hold; no contact at start, as a torque
    sensor's bias is set at power-up), ``"neutral"`` starts every element unloaded."""

    START_RULES = ("measured", "neutral")

    def __init__(self, model, start: str = "measured"):
        super().__init__(model.rigid)
        self.model = model
        if start not in self.START_RULES:
            raise ConfigError(f"friction state start '{start}': one of {', '.join(self.START_RULES)}")
        self.start = start
        self.friction_state: np.ndarray | None = None

    @property
    def has_memory(self) -> bool:
        return self.model.memory is not None

    def reset(self) -> None:
        self.friction_state = None

    def start_from(self, q, qd, tau) -> None:
        """Set the friction state at the first joint state (``start`` ``"measured"``)."""
        from .presliding import state_matching

        if not self.has_memory or self.start != "measured":
            return
        q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
        rest = self.model.non_rigid_torque(q[None], qd[None])[0]  # neutral state: no memory torque
        unexplained = (
            np.asarray(tau, dtype=float) - self.gravity_torque(q) - self.coriolis_matrix(q, qd) @ qd - rest
        )
        self.friction_state = state_matching(self.model.memory, q, unexplained)

    def non_rigid_torque(self, q, qd) -> np.ndarray:
        return self.non_rigid_batch(np.atleast_2d(q), np.atleast_2d(qd))[0]

    def non_rigid_batch(self, q, qd) -> np.ndarray:
        memory = self.model.memory
        if memory is None:
            return self.model.non_rigid_torque(q, qd)
        q = np.asarray(q, dtype=float)
        states = memory.states(q, first=self.friction_state)  # neutral at q[0] when None
        torque = self.model.non_rigid_torque(q, qd, states)
        self.friction_state = advance(states[-1], q[-1], memory.widths)
        return torque


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
        if hasattr(self.dyn, "reset"):
            self.dyn.reset()

    def _first(self, q, qd, tau) -> None:
        """At the first joint state (and after a restart): the dynamics' friction state from it."""
        if self._t is None and hasattr(self.dyn, "start_from"):
            self.dyn.start_from(q, qd, tau)

    def update_batch(self, t, q, qd, tau) -> np.ndarray:
        """:meth:`update` at each of a batch of joint states in time order — ``t`` (B,), ``q``, ``q̇``,
        ``τ`` (B, n) — in one go: r at each (B, n), and ``model_efforts`` (B, n) (``model_effort`` the
        last). The same values as sample by sample, to round-off (a restart where a time does not
        increase included); the dynamics' friction and residual of each stretch in one call, Pinocchio
        once per state, the filter and the integration over the stretch sample by sample."""
        t = np.asarray(t, dtype=float).reshape(-1)
        q, qd, tau = (np.asarray(x, dtype=float).reshape(len(t), self.n) for x in (q, qd, tau))
        r, efforts = np.empty((len(t), self.n)), np.empty((len(t), self.n))
        restarts = np.flatnonzero(t[1:] <= t[:-1]) + 1 if len(t) > 1 else ()
        for a, b in itertools.pairwise([0, *restarts, len(t)]):
            if a == b:
                continue
            if self._t is not None and t[a] <= self._t:
                self.reset()
            self._first(q[a], qd[a], tau[a])
            self._stretch(t[a:b], q[a:b], qd[a:b], tau[a:b], r[a:b], efforts[a:b])
        self.model_efforts = efforts
        if len(t):
            self.model_effort = efforts[-1]
        return r

    def _batch_terms(self, q, qd):
        dyn = self.dyn
        if hasattr(dyn, "batch_terms"):
            return dyn.batch_terms(q, qd)
        return tuple(np.array(x) for x in zip(*(dyn.terms(a, b) for a, b in zip(q, qd))))

    def _filtered_qdd(self, t, qd) -> tuple[np.ndarray, np.ndarray]:
        """The causal filter's q̈ at each sample (zeros before it is ready) and where it was ready."""
        qdd, ready = np.zeros_like(qd), np.zeros(len(t), dtype=bool)
        for k in range(len(t)):
            d = self.deriv.update(t[k], qd[k])
            if d is not None:
                qdd[k], ready[k] = d[0], True
        return qdd, ready

    def _stretch(self, t, q, qd, tau, r, efforts) -> None:
        raise NotImplementedError


class MomentumObserver(_Observer):
    """De Luca's generalized-momentum observer, one joint state at a time (see the module text)."""

    method = "momentum"

    def __init__(self, dynamics, gain=100.0, window: int = 9, effort_timing: str = "sampled"):
        if effort_timing not in EFFORT_TIMINGS:
            raise ConfigError(f"effort timing '{effort_timing}': one of {', '.join(EFFORT_TIMINGS)}")
        self.effort_timing = effort_timing
        self._w_now, self._w_prev = EFFORT_TIMINGS[effort_timing]
        super().__init__(dynamics, gain, window)

    def reset(self) -> None:
        super().reset()
        self._p = np.zeros(self.n)
        self._gamma = np.zeros(self.n)  # Cᵀq̇ − g − τ_nr: β without τ
        self._tau = np.zeros(self.n)

    def update(self, t: float, q, qd, tau) -> np.ndarray:
        """Add a joint state (time s, q, q̇, measured τ); returns r, the external torque estimate.
        A time that does not increase restarts the observer (r = 0). ``model_effort`` is then the
        model's τ̂(q, q̇, q̈_f) with q̈_f from the causal filter (for display: r does not use it)."""
        q, qd, tau = (np.asarray(x, dtype=float) for x in (q, qd, tau))
        if self._t is not None and t <= self._t:
            self.reset()
        self._first(q, qd, tau)
        M, C, g, tnr = self.dyn.terms(q, qd)
        p = M @ qd
        gamma = C.T @ qd - g - tnr
        d = self.deriv.update(t, qd)
        self.model_effort = (M @ d[0] if d is not None else 0.0) + C @ qd + g + tnr
        if self._t is not None:
            dt = t - self._t
            held = self._w_now * tau + self._w_prev * self._tau
            ext = (p - self._p) / dt - 0.5 * (gamma + self._gamma) - held
            a = np.exp(-self.K * dt)
            self.r = a * self.r + (1.0 - a) * ext
        self._t, self._p, self._gamma, self._tau = t, p, gamma, tau.copy()
        return self.r

    def _stretch(self, t, q, qd, tau, r, efforts) -> None:
        """:meth:`update` over samples whose times increase (after the observer's last)."""
        M, C, g, tnr = self._batch_terms(q, qd)
        v = qd[:, :, None]
        p = (M @ v)[:, :, 0]
        gamma = (C.transpose(0, 2, 1) @ v)[:, :, 0] - g - tnr
        qdd, _ = self._filtered_qdd(t, qd)
        efforts[:] = (M @ qdd[:, :, None])[:, :, 0] + (C @ v)[:, :, 0] + g + tnr
        if self._t is None:  # the first state after a (re)start only sets p and β
            r[0] = self.r
            self._t, self._p, self._gamma, self._tau = t[0], p[0], gamma[0], tau[0].copy()
            t, p, gamma, tau, r = t[1:], p[1:], gamma[1:], tau[1:], r[1:]
        if len(t):
            dt = (t - np.concatenate(([self._t], t[:-1])))[:, None]
            held = self._w_now * tau + self._w_prev * np.concatenate((self._tau[None], tau[:-1]))
            ext = (
                (p - np.concatenate((self._p[None], p[:-1]))) / dt
                - 0.5 * (gamma + np.concatenate((self._gamma[None], gamma[:-1])))
                - held
            )
            a = np.exp(-self.K * dt)
            step = (1.0 - a) * ext
            rk = self.r
            for k in range(len(t)):  # the first-order lag, sample by sample
                rk = r[k] = a[k] * rk + step[k]
            self.r = rk
            self._t, self._p, self._gamma, self._tau = t[-1], p[-1], gamma[-1], tau[-1].copy()


class DirectObserver(_Observer):
    """``τ̂(q, q̇, q̈_f) − τ`` through a first-order lag of gain ``K`` (see the module text)."""

    method = "direct"

    def update(self, t: float, q, qd, tau) -> np.ndarray:
        q, qd, tau = (np.asarray(x, dtype=float) for x in (q, qd, tau))
        if self._t is not None and t <= self._t:
            self.reset()
        self._first(q, qd, tau)
        d = self.deriv.update(t, qd)
        qdd = np.zeros(self.n) if d is None else d[0]
        M, C, g, tnr = self.dyn.terms(q, qd)
        self.model_effort = M @ qdd + C @ qd + g + tnr
        if d is not None and self._t is not None:
            a = np.exp(-self.K * (t - self._t))
            self.r = a * self.r + (1.0 - a) * (self.model_effort - tau)
        self._t = t
        return self.r

    def _stretch(self, t, q, qd, tau, r, efforts) -> None:
        """:meth:`update` over samples whose times increase (after the observer's last)."""
        M, C, g, tnr = self._batch_terms(q, qd)
        qdd, ready = self._filtered_qdd(t, qd)
        efforts[:] = (M @ qdd[:, :, None])[:, :, 0] + (C @ qd[:, :, None])[:, :, 0] + g + tnr
        t_before = np.concatenate([[np.nan if self._t is None else self._t], t[:-1]])
        a = np.exp(-self.K * (t - t_before)[:, None])
        step = (1.0 - a) * (efforts - tau)
        rk = self.r
        for k in range(len(t)):
            if ready[k] and not np.isnan(t_before[k]):
                rk = a[k] * rk + step[k]
            r[k] = rk
        self.r = r[-1].copy()
        self._t = float(t[-1])


def make_observer(
    dynamics, method: str = "momentum", gain=100.0, window: int = 9, effort_timing: str = "sampled"
):
    """The observer of ``method``; ``effort_timing`` (module text) matters to the momentum observer only
    (the direct residual compares τ̂ and τ at the same stamp)."""
    if method == "momentum":
        return MomentumObserver(dynamics, gain, window, effort_timing)
    if effort_timing not in EFFORT_TIMINGS:
        raise ConfigError(f"effort timing '{effort_timing}': one of {', '.join(EFFORT_TIMINGS)}")
    if method == "direct":
        return DirectObserver(dynamics, gain, window)
    raise ConfigError(f"observer method '{method}': one of {', '.join(METHODS)}")


def friction_state_start(observer, start: str) -> None:
    """Choose how an observer's friction state starts (``measured`` | ``neutral``; see
    :class:`ModelDynamics`); nothing for dynamics without friction memory."""
    if isinstance(observer.dyn, ModelDynamics):
        if start not in ModelDynamics.START_RULES:
            raise ConfigError(
                f"friction state start '{start}': one of {', '.join(ModelDynamics.START_RULES)}"
            )
        observer.dyn.start = start


#: Joint states per :meth:`MomentumObserver.update_batch` call of :func:`run_observer`.
RUN_CHUNK = 4096


def run_observer(observer, t, q, qd, tau) -> np.ndarray:
    """The observer over a whole recording: r (N, n) — the same steps as sample by sample, in batches
    (:meth:`MomentumObserver.update_batch`: friction and residual in one graph call per batch)."""
    observer.reset()
    t = np.asarray(t, dtype=float)
    out = np.empty((len(t), observer.n))
    for a in range(0, len(t), RUN_CHUNK):
        b = a + RUN_CHUNK
        out[a:b] = observer.update_batch(t[a:b], q[a:b], qd[a:b], tau[a:b])
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
    rest: np.ndarray | None = None  # N·m: the change from the settled residual at rest (None: no test)
    still_velocity: float = 0.02  # rad/s: standing below this ...
    settle_s: float = 0.2  # ... for this long sets the baseline

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
        if self.rest is not None:
            self.rest = np.asarray(self.rest, dtype=float).reshape(-1)
            if self.rest.size != n or not (np.all(np.isfinite(self.rest)) and np.all(self.rest > 0)):
                raise ConfigError(f"thresholds: {n} joints need {n} finite rest values > 0 (or none)")
        if not (0.0 < self.still_velocity <= 1.0 and 0.0 <= self.settle_s <= 10.0):
            raise ConfigError(
                f"thresholds: still_velocity {self.still_velocity} must be in (0, 1], settle_s "
                f"{self.settle_s} in [0, 10]"
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
            tuple(joints), self.static[idx], self.velocity_slope[idx], self.release, self.hold_s, self.info,
            None if self.rest is None else self.rest[idx], self.still_velocity, self.settle_s,
        )  # fmt: skip

    def to_dict(self) -> dict:
        joints = {
            j: {"static": float(b), "velocity_slope": float(a)}
            for j, b, a in zip(self.joints, self.static, self.velocity_slope)
        }
        if self.rest is not None:
            for j, c in zip(self.joints, self.rest):
                joints[j]["rest"] = float(c)
        return {
            "joints": joints,
            "release": float(self.release),
            "hold_s": float(self.hold_s),
            "still_velocity": float(self.still_velocity),
            "settle_s": float(self.settle_s),
            **({"calibration": self.info} if self.info else {}),
        }

    @classmethod
    def from_dict(cls, doc, source: str = "thresholds") -> Thresholds:
        if not isinstance(doc, dict) or not isinstance(doc.get("joints"), dict) or not doc["joints"]:
            raise ConfigError(
                f"{source}: expected a mapping with joints: {{JOINT: {{static: .., velocity_slope: ..}}}}"
            )
        joints, static, slope, rest = [], [], [], []
        for joint, entry in doc["joints"].items():
            if not isinstance(entry, dict) or "static" not in entry:
                raise ConfigError(f"{source}: joint {joint} needs static (and optionally velocity_slope)")
            values = (entry["static"], entry.get("velocity_slope", 0.0), entry.get("rest", 1.0))
            if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
                raise ConfigError(f"{source}: joint {joint}: static, velocity_slope and rest must be numbers")
            joints.append(str(joint))
            static.append(float(values[0]))
            slope.append(float(values[1]))
            rest.append(float(entry["rest"]) if "rest" in entry else None)
        if any(v is None for v in rest) and not all(v is None for v in rest):
            raise ConfigError(f"{source}: give rest for every joint or for none")
        known = {"joints", "release", "hold_s", "calibration", "still_velocity", "settle_s"}
        extra = sorted(set(doc) - known)
        if extra:
            raise ConfigError(f"{source}: unknown key(s) {extra}; known: {', '.join(sorted(known))}")
        try:
            release, hold = float(doc.get("release", 0.5)), float(doc.get("hold_s", 0.05))
            still, settle = float(doc.get("still_velocity", 0.02)), float(doc.get("settle_s", 0.2))
        except (TypeError, ValueError):
            raise ConfigError(
                f"{source}: release, hold_s, still_velocity and settle_s must be numbers"
            ) from None
        try:
            return cls(
                tuple(joints), np.array(static), np.array(slope), release, hold, doc.get("calibration") or {},
                None if rest[0] is None else np.array(rest, dtype=float), still, settle,
            )  # fmt: skip
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
    this sample; ``active`` says which are in collision, ``peak`` their largest |r| so far,
    ``last_peak`` each joint's largest |r| in its latest collision (kept after it ended)."""

    def __init__(self, thresholds: Thresholds):
        self.th = thresholds
        self.n = len(thresholds.joints)
        self.reset()

    def reset(self) -> None:
        self.active = np.zeros(self.n, dtype=bool)
        self.peak = np.zeros(self.n)  # 0 where not active
        self.last_peak = np.zeros(self.n)
        self._below_since = np.full(self.n, np.nan)  # NaN where not active
        self._any_active = False
        self._cleared = True  # the rest test's state below holds nothing (the arm moved, or a start)
        self._standing_since: float | None = None
        self._sum, self._count = np.zeros(self.n), 0
        self.baseline = np.full(self.n, np.nan)  # the settled residual of a standing arm (NaN: none)

    def _rest_change(self, t: float, r, standing: bool) -> np.ndarray | None:
        """Per joint ``|r − baseline| / rest`` once the arm has settled (None, no change, before and
        without rest thresholds); keeps the baselines: each the mean residual over the second half of
        the settling time (a mean, not one noisy sample). ``standing``: every joint below
        ``still_velocity`` (the whole arm: a joint standing while others move feels their imperfectly
        modelled motion)."""
        th = self.th
        if not standing:
            if not self._cleared:
                self._standing_since, self._sum, self._count = None, np.zeros(self.n), 0
                self.baseline = np.full(self.n, np.nan)
                self._cleared = True
            return None
        self._cleared = False
        if self._standing_since is None:
            self._standing_since = t
        age = t - self._standing_since
        if age < th.settle_s:
            if age >= 0.5 * th.settle_s:
                self._sum, self._count = self._sum + r, self._count + 1
            return None
        fresh = np.isnan(self.baseline) & ~self.active
        any_fresh = fresh.any()
        if any_fresh:
            mean = (self._sum + r) / (self._count + 1)
            self.baseline = np.where(fresh, mean, self.baseline)
        if th.rest is None:
            return None
        change = np.abs(r - np.where(np.isnan(self.baseline), r, self.baseline)) / th.rest
        return np.where(fresh, 0.0, change) if any_fresh else change

    def update(self, t: float, r, qd) -> list[Onset]:
        r = np.asarray(r, dtype=float)
        band = self.th.band(qd)
        standing = bool(np.all(np.abs(np.asarray(qd, dtype=float)) < self.th.still_velocity))
        return self._step(t, r, band, np.abs(r), self._rest_change(t, r, standing))

    def update_batch(self, t, r, qd) -> list[tuple[int, list[Onset]]]:
        """:meth:`update` at each sample of a batch in time order — ``t`` (B,), ``r``, ``q̇`` (B, n) —
        in order: (index, onsets) of the samples where a collision began, the same as sample by sample.
        The bands and the speed test of the whole batch at once; the hysteresis runs only at the
        samples where it can act (a joint in collision or over its band, a change at rest)."""
        t = np.asarray(t, dtype=float).reshape(-1)
        r, qd = (np.asarray(x, dtype=float).reshape(len(t), self.n) for x in (r, qd))
        th = self.th
        speed = np.abs(qd)
        band = th.velocity_slope * speed + th.static
        mag = np.abs(r)
        over = (mag > band).any(axis=1)
        standing = (speed < th.still_velocity).all(axis=1)
        out = []
        for k in range(len(t)):
            change = self._rest_change(t[k], r[k], standing[k])
            if not (over[k] or self._any_active or (change is not None and (change > 1.0).any())):
                continue  # nothing in collision, nothing over: active, peak and hold timers stay as they are
            onsets = self._step(t[k], r[k], band[k], mag[k], change)
            if onsets:
                out.append((k, onsets))
        return out

    def _step(self, t: float, r, band, mag, change) -> list[Onset]:
        over = mag > band
        if change is not None:
            over |= change > 1.0
        onsets = [Onset(t, int(j), float(r[j]), float(band[j])) for j in np.flatnonzero(over & ~self.active)]
        self.active |= over
        self.peak = np.where(self.active, np.maximum(self.peak, mag), 0.0)
        self.last_peak = np.where(self.active, self.peak, self.last_peak)
        low = self.active & (mag < self.th.release * band)
        if change is not None:
            low &= change < self.th.release
        self._below_since = np.where(low, np.where(np.isnan(self._below_since), t, self._below_since), np.nan)
        ended = low & (t - self._below_since >= self.th.hold_s)
        if ended.any():
            self.active &= ~ended
            self.peak[ended] = 0.0
            self._below_since[ended] = np.nan
        self._any_active = bool(self.active.any())
        return onsets


def score_detection(t, r, qd, thresholds: Thresholds, pulses, settle_s: float = 0.1) -> dict:
    """The detector over a recording's residuals against the external torques known to have acted
    (:class:`ros_lnn.arm.simulation.Pulse`: start, end): per pulse the delay to the first onset within
    it and ``settle_s`` after (None: missed), the false alarms (every other onset), their first times
    and the free time they were counted over."""
    det = CollisionDetector(thresholds)
    onsets = []
    for k in range(len(t)):
        onsets.extend(det.update(float(t[k]), r[k], qd[k]))
    in_window = np.zeros(len(onsets), dtype=bool)
    delays = []
    for p in pulses:
        hits = [i for i, o in enumerate(onsets) if p.start <= o.t < p.end + settle_s]
        in_window[hits] = True
        delays.append(onsets[hits[0]].t - p.start if hits else None)
    covered = sum(min(p.end + settle_s, t[-1]) - p.start for p in pulses)
    return {
        "delays": delays,
        "false_alarms": int((~in_window).sum()),
        "false_alarm_times": [round(o.t, 3) for o, w in zip(onsets, in_window) if not w][:20],
        "free_s": float(t[-1] - t[0] - covered),
    }


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
    still_velocity: float = 0.02,
    settle_s: float = 0.2,
) -> Thresholds:
    """Thresholds from collision-free runs: ``runs`` is a list of ``(t, r, qd)`` (observer residuals
    and velocities of recordings without contact).

    Per joint: the band's shape ``a'|q̇| + b'`` is a line through the ``quantile`` of |r| in ``bins``
    speed bins (slope ≥ 0); the scale ``x`` on it is the level the 1 s maxima of ``|r| / (a'|q̇| + b')``
    exceed with probability ``rate × block_s`` (a Gumbel fit to the block maxima: extreme-value
    extrapolation to rates the recordings are too short to show), the false-alarm rate split evenly
    over the joints; never below ``(1 + margin)`` × the largest value seen (no alarm on the calibration
    data). The rest threshold ``c`` the same way from the change of the settled residual while a joint
    stands (:class:`CollisionDetector`), when every joint stood settled for 10 blocks or more (else no
    rest test); the rate is then split evenly between the two tests."""
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
    changes = [_rest_changes(t, r, v, n, still_velocity, settle_s) for t, r, v in zip(ts, rs, vs)]
    settled_s = [sum(_span(t, ~np.isnan(c[:, j])) for t, c in zip(ts, changes)) for j in range(n)]
    with_rest = min(settled_s) >= 10 * block_s
    # the false-alarm budget is split evenly between the band and, where there is one, the rest test
    rate = false_alarm_rate_per_h / (2.0 if with_rest else 1.0)
    p_block = min(rate / 3600.0 / n * block_s, 0.5)
    static, slope, rest, report = np.empty(n), np.empty(n), np.empty(n), {}
    for j in range(n):
        if with_rest:
            maxima = np.concatenate(
                [
                    _block_maxima(t[~np.isnan(c[:, j])], c[~np.isnan(c[:, j]), j], block_s)
                    for t, c in zip(ts, changes)
                    if np.any(~np.isnan(c[:, j]))
                ]
            )
            rest[j] = max(_gumbel_level(maxima, p_block), (1.0 + margin) * float(maxima.max()))
        a_, b_ = _band_shape(V[:, j], R[:, j], bins, quantile)
        maxima = np.concatenate(
            [
                _block_maxima(t, np.abs(r[:, j]) / (a_ * np.abs(v[:, j]) + b_), block_s)
                for t, r, v in zip(ts, rs, vs)
            ]
        )
        level = _gumbel_level(maxima, p_block)
        seen = float(maxima.max())
        x = max(level, (1.0 + margin) * seen)
        static[j], slope[j] = x * b_, x * a_
        report[joints[j]] = {
            "gumbel_level": level,
            "largest_seen": seen,
            "scale": x,
            "settled_s": settled_s[j],
        }
    info = {
        "false_alarm_rate_per_h": float(false_alarm_rate_per_h),
        "margin": float(margin),
        "seconds": duration,
        "samples": int(len(R)),
        "per_joint": report,
        "rest_test": "calibrated"
        if with_rest
        else f"off: a joint stood settled for {min(settled_s):.1f} s (at least {10 * block_s:g} s needed)",
    }
    return Thresholds(
        joints, static, slope, release, hold_s, info, rest if with_rest else None, still_velocity, settle_s
    )


def _gumbel_level(maxima: np.ndarray, p_block: float) -> float:
    """The level block maxima exceed with probability ``p_block`` (a Gumbel fit by moments)."""
    beta = max(float(np.std(maxima)) * math.sqrt(6) / math.pi, 1e-12)
    mu = float(np.mean(maxima)) - 0.5772156649 * beta
    return mu - beta * math.log(-math.log1p(-p_block))


def _rest_changes(t, r, qd, n: int, still: float, settle_s: float) -> np.ndarray:
    """(N, n) ``|r − baseline|`` of the settled samples of a standing arm as :class:`CollisionDetector`
    takes them without contact (NaN elsewhere, 0 at the sample that sets the baseline): the spread the
    rest test must tolerate."""
    t, r = np.asarray(t, dtype=float), np.asarray(r, dtype=float)
    standing = np.all(np.abs(np.asarray(qd, dtype=float)) < still, axis=1)
    out = np.full((len(t), n), np.nan)
    padded = np.concatenate([[False], standing, [False]]).astype(int)
    edges = np.flatnonzero(np.diff(padded))
    for a, b in zip(edges[::2], edges[1::2]):
        age = t[a:b] - t[a]
        settled = np.flatnonzero(age >= settle_s)
        if not len(settled):
            continue
        k0 = a + settled[0]
        window = (age >= 0.5 * settle_s) & (age < settle_s)
        baseline = (r[a:b][window].sum(axis=0) + r[k0]) / (window.sum() + 1)
        out[k0:b] = np.abs(r[k0:b] - baseline)
        out[k0] = 0.0
    return out


def _span(t, mask) -> float:
    """Seconds covered by the samples in ``mask`` (each counts its step to the next)."""
    if len(t) < 2:
        return 0.0
    steps = np.diff(t, append=t[-1])
    return float(np.sum(steps[mask]))


def spread_by_motion(runs, joints, still: float = 0.02) -> dict:
    """Per joint the residual's spread at rest (``|q̇| < still``) and in motion over collision-free
    ``runs`` of ``(t, r, qd)``: sample count, 99th percentile and largest ``|r|`` (None where a joint
    has no such sample). At rest is where friction with memory matters and where people touch an arm."""
    R = np.abs(np.concatenate([np.asarray(r, dtype=float) for _, r, _ in runs]))
    V = np.abs(np.concatenate([np.asarray(v, dtype=float) for _, _, v in runs]))
    out = {}
    for j, joint in enumerate(joints):
        entry = {}
        for name, mask in (("rest", V[:, j] < still), ("motion", V[:, j] >= still)):
            values = R[mask, j]
            entry[name] = {
                "samples": int(mask.sum()),
                "p99": float(np.quantile(values, 0.99)) if len(values) else None,
                "max": float(values.max()) if len(values) else None,
            }
        out[joint] = entry
    return {"still_velocity": still, "joints": out}


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
