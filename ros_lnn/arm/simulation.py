"""A simulated fully actuated arm with measured joint torques: the observer's test bench and the
generator of ``ros-lnn bench collision``.

The true arm is a Pinocchio model (the URDF's, or one whose inertial parameters differ from the URDF:
:func:`perturbed_arm`) with joint friction of its own (:class:`TrueFriction`: viscous, smooth Coulomb,
an offset and a position ripple — not the model's friction law; or :class:`StickyFriction`: the LuGre
model of :mod:`ros_lnn.arm.lugre` with an offset and the ripple — presliding, breakaway and a torque
held at rest, advanced exactly over every sub-step); a PD controller through the URDF's
mass matrix with gravity compensation (``τ = g(q) + M(q)(ω² e + 2ζω ė)``: the same bandwidth on every
joint, stable at 1 kHz whatever the configuration's inertia) tracks a smooth multi-sine reference
inside the joint limits at the sample rate (zero-order hold: the torque computed from the sample at
``t_k`` acts until ``t_{k+1}``).
External joint torques are applied as scripted pulses (:class:`Pulse`: joint, magnitude, start,
duration). Each step integrates the forward dynamics (ABA) with RK4 over ``substeps`` sub-steps.

The run records what a robot reports — q, q̇ and the motor torque τ with sensor noise, at the stamps
— and the truth: the noise-free state and the external torque applied at each stamp.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .rigid_body import ArmRigidBody, pinocchio


@dataclass(frozen=True)
class Pulse:
    """An external joint torque ``magnitude`` (N·m) on ``joint`` (index, mapping order) from ``start``
    for ``duration`` seconds (a rectangle)."""

    joint: int
    magnitude: float
    start: float
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration


def pulse_torque(pulses, t: float, n: int) -> np.ndarray:
    out = np.zeros(n)
    for p in pulses:
        if p.start <= t < p.end:
            out[p.joint] += p.magnitude
    return out


@dataclass
class TrueFriction:
    """Per joint ``f_v q̇ + f_c tanh(q̇ / v_s) + f_o + f_r sin(2 q)`` (``v_s`` wider than the model's,
    the ripple outside the model's law)."""

    viscous: np.ndarray
    coulomb: np.ndarray
    offset: np.ndarray
    ripple: np.ndarray
    v_s: float = 0.05

    def torque(self, q, qd) -> np.ndarray:
        return (
            self.viscous * qd
            + self.coulomb * np.tanh(qd / self.v_s)
            + self.offset
            + self.ripple * np.sin(2 * q)
        )

    @classmethod
    def like_a_real_arm(cls, effort_limits, scale: float = 1.0) -> TrueFriction:
        """Friction sized by each joint's effort limit (Panda-like: ~1 N·m Coulomb on the big joints)."""
        e = np.asarray(effort_limits, dtype=float)
        return cls(
            viscous=scale * 0.01 * e,
            coulomb=scale * 0.012 * e,
            offset=scale * np.resize([0.003, -0.002, 0.002], e.size) * e,
            ripple=scale * 0.003 * e,
        )

    @classmethod
    def none(cls, n: int) -> TrueFriction:
        z = np.zeros(n)
        return cls(z, z, z, z)


class StickyFriction:
    """LuGre friction (:class:`ros_lnn.arm.lugre.LuGre`) plus an offset and a position ripple, with its
    bristle deflection as state: :meth:`torque` at the present deflection, :meth:`advance` after each
    integration sub-step, :meth:`start` at the simulation's first state (a random deflection: nobody
    knows it when a robot starts)."""

    def __init__(self, lugre, offset, ripple, seed: int = 0):
        self.lugre = lugre
        self.offset = np.asarray(offset, dtype=float)
        self.ripple = np.asarray(ripple, dtype=float)
        self.seed = seed
        self.z = np.zeros(lugre.n)

    @classmethod
    def like_a_real_arm(cls, effort_limits, seed: int = 0) -> StickyFriction:
        from .lugre import LuGre

        e = np.asarray(effort_limits, dtype=float)
        rng = np.random.default_rng(seed)
        return cls(
            LuGre.like_a_real_arm(e, rng),
            np.resize([0.003, -0.002, 0.002], e.size) * e,
            0.003 * e,
            seed,
        )

    def start(self) -> None:
        rng = np.random.default_rng(self.seed + 1)
        self.z = rng.uniform(-1, 1, self.lugre.n) * self.lugre.coulomb / self.lugre.stiffness

    def torque(self, q, qd) -> np.ndarray:
        return self.lugre.torque(self.z, qd) + self.offset + self.ripple * np.sin(2 * np.asarray(q))

    def advance(self, qd, h: float) -> None:
        self.z = self.lugre.advance(self.z, qd, h)


def perturbed_arm(
    arm: ArmRigidBody, seed: int = 0, mass: float = 0.2, com_m: float = 0.02, inertia: float = 0.3
):
    """The URDF's arm with every body's mass scaled by up to ±``mass``, its centre of mass moved by up to
    ``com_m`` per axis and its rotational inertia scaled by up to ±``inertia`` (physically consistent)."""
    pin = pinocchio()
    rng = np.random.default_rng(seed)
    params = []
    for joint in arm.joints:
        body = arm.model.inertias[arm.model.getJointId(joint)]
        m = body.mass * (1 + rng.uniform(-mass, mass))
        c = np.array(body.lever) + rng.uniform(-com_m, com_m, 3)
        Ic = np.array(body.inertia) * (1 + rng.uniform(-inertia, inertia))
        params.append(pin.Inertia(m, c, Ic).toDynamicParameters())
    return arm.with_parameters(np.concatenate(params))


def multisine_reference(arm: ArmRigidBody, seed: int = 0, amplitude: float = 0.45, base_hz: float = 0.08):
    """A smooth reference ``t -> (q, q̇)``: per joint five sines (periods 2-12 s) around the middle of
    its range, ``amplitude`` of the half range, random phases."""
    rng = np.random.default_rng(seed)
    lo, hi = arm.position_limits()
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    n = arm.n
    freqs = base_hz * rng.uniform(1.0, 6.0, (n, 5))
    phases = rng.uniform(0, 2 * np.pi, (n, 5))
    amps = rng.uniform(0.5, 1.0, (n, 5))
    amps *= (amplitude * half / amps.sum(1))[:, None]

    def ref(t: float):
        w = 2 * np.pi * freqs
        arg = w * t + phases
        return mid + (amps * np.sin(arg)).sum(1), (amps * w * np.cos(arg)).sum(1)

    return ref


@dataclass
class Noise:
    q: float = 1e-5  # rad: encoder
    qd: float = 1e-3  # rad/s
    tau: float = 0.02  # N·m: torque sensor

    @classmethod
    def off(cls) -> Noise:
        return cls(0.0, 0.0, 0.0)


@dataclass
class ArmRun:
    joints: tuple
    t: np.ndarray
    q: np.ndarray  # measured
    qd: np.ndarray
    tau: np.ndarray  # measured motor torque
    q_true: np.ndarray
    qd_true: np.ndarray
    tau_ext: np.ndarray  # true external joint torque at each stamp (as applied over the next step)
    pulses: tuple = ()
    info: dict = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    def recording(self, name: str = "sim"):
        from .recording import ArmRecording

        return ArmRecording(name, self.joints, self.t.copy(), self.q.copy(), self.qd.copy(), self.tau.copy())


class ArmPlant:
    """The true arm: ``truth``'s rigid body (Pinocchio ABA) with its joint ``friction``, integrated by
    RK4 over ``substeps`` sub-steps under a joint torque held over each step (zero-order hold); a
    :class:`StickyFriction` starts at construction and its deflection advances after every sub-step."""

    def __init__(
        self, truth: ArmRigidBody, friction: TrueFriction | StickyFriction | None = None, substeps: int = 1
    ):
        self.truth = truth
        self.friction = friction or TrueFriction.none(truth.n)
        self.sticky = self.friction if isinstance(self.friction, StickyFriction) else None
        if self.sticky is not None:
            self.sticky.start()
        self.substeps = int(substeps)
        self._pin = pinocchio()
        self._data = truth.model.createData()
        n = truth.n
        self._q, self._qd, self._tau = np.empty(n), np.empty(n), np.empty(n)

    def acceleration(self, q, qd, tau) -> np.ndarray:
        """``q̈`` under the joint torque ``tau`` (mapping order), friction acting against it."""
        order = self.truth.order
        self._q[order], self._qd[order] = q, qd
        self._tau[order] = tau - self.friction.torque(q, qd)
        return self._pin.aba(self.truth.model, self._data, self._q, self._qd, self._tau)[order]

    def step(self, q, qd, tau, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """The state ``dt`` later, ``tau`` held over the step."""
        accel = self.acceleration
        h = dt / self.substeps
        for _ in range(self.substeps):
            a1 = accel(q, qd, tau)
            a2 = accel(q + 0.5 * h * qd, qd + 0.5 * h * a1, tau)
            a3 = accel(q + 0.5 * h * (qd + 0.5 * h * a1), qd + 0.5 * h * a2, tau)
            a4 = accel(q + h * (qd + 0.5 * h * a2), qd + h * a3, tau)
            q_new = q + h * (qd + h / 6 * (a1 + a2 + a3))
            qd_new = qd + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
            if self.sticky is not None:  # the deflection over the sub-step at its mean velocity, exactly
                self.sticky.advance((q_new - q) / h, h)
            q, qd = q_new, qd_new
        return q, qd


class SimulatedArm:
    """A simulated arm as its controller sees it, one control period at a time: :meth:`measure` gives
    the state with sensor noise, :meth:`step` takes the controller's joint torque and moves the arm one
    period. ``delay_steps``: control periods between the state a torque was computed from and the
    period it acts over — 1 as on a robot whose joint torque interface applies each command at its
    next tick (libfranka, a ros2_control hardware loop at the controller's rate); 0: at once (an
    idealised loop). ``applied`` is the torque that acted over the last period and ``measured_torque``
    it with the torque sensor's noise (what a robot reports as effort)."""

    def __init__(
        self,
        plant: ArmPlant,
        q0,
        qd0=None,
        noise: Noise | None = None,
        delay_steps: int = 1,
        seed: int = 0,
    ):
        n = plant.truth.n
        self.plant = plant
        self.q = np.asarray(q0, dtype=float).copy()
        self.qd = np.zeros(n) if qd0 is None else np.asarray(qd0, dtype=float).copy()
        self.noise = noise or Noise.off()
        self.rng = np.random.default_rng(seed)  # q, q̇; the torque's own stream: reading it changes neither
        self._torque_rng = np.random.default_rng([seed, 1])
        self._queue = [np.zeros(n) for _ in range(int(delay_steps))]
        self.applied = np.zeros(n)
        self.t = 0.0

    def measure(self) -> tuple[np.ndarray, np.ndarray]:
        n, noise, rng = len(self.q), self.noise, self.rng
        return self.q + noise.q * rng.standard_normal(n), self.qd + noise.qd * rng.standard_normal(n)

    def measured_torque(self) -> np.ndarray:
        return self.applied + self.noise.tau * self._torque_rng.standard_normal(len(self.q))

    def step(self, tau, dt: float) -> None:
        """Take the command ``tau`` and move one period ``dt`` (under the command of ``delay_steps``
        periods ago); ConfigError when the simulation diverges."""
        tau = np.asarray(tau, dtype=float)
        if self._queue:
            self._queue.append(tau.copy())
            tau = self._queue.pop(0)
        self.applied = tau
        self.q, self.qd = self.plant.step(self.q, self.qd, tau, dt)
        self.t += dt
        if not (np.all(np.isfinite(self.q)) and np.all(np.isfinite(self.qd))):
            raise ConfigError(f"the simulated arm diverged at t = {self.t:.3f} s (lower the gains)")


def simulate_arm(
    truth: ArmRigidBody,
    duration: float,
    *,
    rate_hz: float = 1000.0,
    nominal: ArmRigidBody | None = None,
    friction: TrueFriction | StickyFriction | None = None,
    pulses=(),
    noise: Noise | None = None,
    reference=None,
    bandwidth: float = 25.0,
    damping: float = 0.9,
    seed: int = 0,
    substeps: int = 1,
    jitter: float = 0.0,
) -> ArmRun:
    """Simulate ``duration`` s. ``nominal``: the model the controller's gravity compensation uses (the
    URDF's; default ``truth``); ``bandwidth`` (rad/s) and ``damping``: the tracking loop's ω and ζ;
    ``jitter``: relative spread of the sample interval (irregular stamps)."""
    pin = pinocchio()
    n = truth.n
    if duration <= 0 or rate_hz <= 0:
        raise ConfigError("simulate_arm: duration and rate_hz must be > 0")
    for p in pulses:
        if not 0 <= p.joint < n:
            raise ConfigError(f"pulse on joint {p.joint}: the arm has joints 0..{n - 1}")
    rng = np.random.default_rng(seed)
    nominal = nominal or truth
    noise = noise or Noise.off()
    ref = reference or multisine_reference(truth, seed)
    kp, kd = bandwidth**2, 2 * damping * bandwidth
    plant = ArmPlant(truth, friction, substeps)
    nom_model, nom_data = nominal.model, nominal.model.createData()
    order = truth.order
    steps = int(round(duration * rate_hz))
    dts = np.full(steps, 1.0 / rate_hz)
    if jitter > 0:
        dts *= np.clip(1 + jitter * rng.standard_normal(steps), 0.2, 3.0)
    t_all = np.concatenate([[0.0], np.cumsum(dts)])[: steps + 1]
    q, qd = ref(0.0)
    q, qd = q.copy(), qd.copy()
    pq = np.empty(n)
    N = steps + 1
    out = {k: np.empty((N, n)) for k in ("q", "qd", "tau", "q_true", "qd_true", "ext")}
    for k in range(N):
        t = t_all[k]
        q_m = q + noise.q * rng.standard_normal(n)
        qd_m = qd + noise.qd * rng.standard_normal(n)
        q_ref, qd_ref = ref(t)
        pq[order] = q_m
        g_nom = pin.computeGeneralizedGravity(nom_model, nom_data, pq)[order]
        M_nom = pin.crba(nom_model, nom_data, pq)
        M_nom = (np.triu(M_nom) + np.triu(M_nom, 1).T)[np.ix_(order, order)]
        tau = g_nom + M_nom @ (kp * (q_ref - q_m) + kd * (qd_ref - qd_m))
        ext = pulse_torque(pulses, t, n)
        out["q"][k], out["qd"][k] = q_m, qd_m
        out["tau"][k] = tau + noise.tau * rng.standard_normal(n)
        out["q_true"][k], out["qd_true"][k], out["ext"][k] = q, qd, ext
        if k == N - 1:
            break
        q, qd = plant.step(q, qd, tau + ext, dts[k])
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            raise ConfigError(f"simulation diverged at t = {t:.3f} s (lower the gains or add substeps)")
    return ArmRun(
        truth.joints,
        t_all,
        out["q"],
        out["qd"],
        out["tau"],
        out["q_true"],
        out["qd_true"],
        out["ext"],
        tuple(pulses),
        {"rate_hz": rate_hz, "seed": seed, "substeps": substeps},
    )


def pulse_schedule(
    effort_limits,
    fractions=(0.04, 0.07, 0.12),
    start: float = 2.0,
    spacing: float = 3.0,
    duration=(0.08, 0.25),
    seed: int = 0,
) -> list[Pulse]:
    """One pulse per joint and fraction of its effort limit, random sign and duration, in a shuffled
    order every ``spacing`` s from ``start``."""
    rng = np.random.default_rng(seed)
    e = np.asarray(effort_limits, dtype=float)
    pairs = [(j, f) for f in fractions for j in range(e.size)]
    rng.shuffle(pairs)
    return [
        Pulse(
            int(j),
            float(rng.choice([-1.0, 1.0]) * f * e[j]),
            start + i * spacing,
            float(rng.uniform(*duration)),
        )
        for i, (j, f) in enumerate(pairs)
    ]


PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


def panda_urdf() -> Path:
    """The shipped Panda URDF, config/robots/panda/panda.urdf (:mod:`ros_lnn.shipped`)."""
    from ..shipped import find, search_paths

    parts = ("config", "robots", "panda", "panda.urdf")
    path = find(*parts)
    if path is not None:
        return path
    paths = search_paths(*parts)
    raise ConfigError(f"the Panda URDF is not installed (looked in: {', '.join(map(str, paths))})")


def panda_generator(seed: int = 1):
    """(URDF arm, true arm, true friction, noise) of the benchmarks' simulated Panda."""
    arm = ArmRigidBody.from_urdf(panda_urdf(), PANDA_JOINTS)
    truth = perturbed_arm(arm, seed=seed)
    return arm, truth, TrueFriction.like_a_real_arm(arm.effort_limits()), Noise()
