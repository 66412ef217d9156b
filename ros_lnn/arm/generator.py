"""Realistic recordings of a URDF arm, with the truth, for tests and benchmarks.

The *true* arm is the URDF with its inertial parameters perturbed (seeded; masses, centres of mass
and inertias, each body kept physically consistent) — a real arm never matches its URDF. Each joint
has friction the identification's model only approximates:

* viscous ``f_v q̇``, Coulomb ``f_c tanh(q̇ / v_c)`` (its own ``v_c``), an offset ``f_o``,
* a Stribeck term ``(f_s − f_c) exp(−(q̇ / v_s)²) tanh(q̇ / v_c)`` (static friction above Coulomb),
* a cable/spring torque ``k (q − q_rest)`` — linear in q, which neither the rigid-body regressor
  (trigonometric in q) nor the friction model (a function of q̇) can represent.

With ``dynamic_friction`` the Coulomb and Stribeck terms are replaced by the LuGre model
(:mod:`ros_lnn.arm.lugre`): presliding, breakaway and a torque held at rest that remembers the last
motion's direction — a law with a state, and not the model's own. Its deflection is integrated along
the trajectory from a random start (a recording never begins with a known friction state).

The joint trajectory is a Fourier series within the limits (:mod:`ros_lnn.arm.fourier`) or any
program of :mod:`ros_lnn.arm.programs` (point-to-point moves with dwells, holds); τ is the true arm's
inverse dynamics (RNEA) plus friction at the exact sample times — no forward simulation, so q, q̇, q̈
and τ are consistent to machine precision. ``pushes``: a person pushing the standing arm — external
joint torques during dwells that the joint's position controller holds against, so the measured
torque carries their negative. The controller's log: samples at
100 Hz–1 kHz with stamp jitter and dropped samples; positions quantised like an encoder, velocities
with noise; the effort as motor current (τ / drive gain, with noise and the current sensor's
quantisation) or as joint torque (with noise). An optional payload (mass, centre of mass, inertia)
rides on the last actuated link. :func:`write_recording` writes rosbag2 ``/joint_states``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .fourier import DEFAULT_ACCELERATION, FourierTrajectory, Limits, random_multisine
from .lugre import LuGre
from .mapping import ArmMapping
from .rigid_body import ArmRigidBody, pinocchio

ENCODER_BITS = 20  # positions quantised to 2π / 2²⁰ rad


@dataclass
class Payload:
    """A rigid payload on the last actuated link: mass (kg), centre of mass (m, in that link's joint
    frame) and inertia about the centre of mass (3×3, kg·m², in the same axes)."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))

    def __post_init__(self):
        self.com = np.asarray(self.com, dtype=float).reshape(3)
        self.inertia = np.asarray(self.inertia, dtype=float).reshape(3, 3)

    def parameters(self) -> np.ndarray:
        """The payload's ten inertial parameters about the link's joint frame (Pinocchio's order
        ``m, m c, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz``; the inertia moved to the frame's origin)."""
        m, c = float(self.mass), self.com
        I = self.inertia + m * (c @ c * np.eye(3) - np.outer(c, c))
        return np.array([m, *(m * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])

    @classmethod
    def from_parameters(cls, p) -> Payload:
        p = np.asarray(p, dtype=float)
        m = float(p[0])
        c = p[1:4] / m
        I = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
        return cls(m, c, I - m * (c @ c * np.eye(3) - np.outer(c, c)))

    def is_physical(self) -> bool:
        """Positive mass; inertia about the centre of mass positive semi-definite with principal
        moments satisfying the triangle inequality."""
        eig = np.linalg.eigvalsh(0.5 * (self.inertia + self.inertia.T))
        return bool(self.mass > 0 and eig.min() >= 0 and 2 * eig.max() <= eig.sum() * (1 + 1e-9))

    def as_dict(self) -> dict:
        return {
            "mass_kg": float(self.mass),
            "com_m": self.com.tolist(),
            "inertia_kg_m2": self.inertia.tolist(),
        }


@dataclass
class JointFriction:
    """Per joint arrays (n,): the true friction and spring of the generated arm."""

    viscous: np.ndarray
    coulomb: np.ndarray
    offset: np.ndarray
    static: np.ndarray  # Stribeck: friction at rest (≥ coulomb; = coulomb: no Stribeck term)
    stribeck_velocity: np.ndarray
    coulomb_velocity: float
    spring: np.ndarray  # N·m/rad (cable/spring)
    spring_rest: np.ndarray

    def torque(self, q, qd) -> np.ndarray:
        q, qd = np.atleast_2d(q), np.atleast_2d(qd)
        sign = np.tanh(qd / self.coulomb_velocity)
        stribeck = (self.static - self.coulomb) * np.exp(-((qd / self.stribeck_velocity) ** 2)) * sign
        return (
            self.viscous * qd
            + self.coulomb * sign
            + self.offset
            + stribeck
            + self.spring * (q - self.spring_rest)
        )

    def model_part(self) -> np.ndarray:
        """(3 n) ``(viscous, Coulomb, offset)`` per joint in :mod:`ros_lnn.arm.friction`'s layout."""
        return np.column_stack([self.viscous, self.coulomb, self.offset]).reshape(-1)

    def as_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}


@dataclass
class GeneratorOptions:
    rate_hz: float = 500.0
    jitter: float = 0.1  # stamp jitter, standard deviation as a fraction of the period
    drop: float = 0.01  # fraction of samples the log drops
    effort: str = "motor_current"  # motor_current | joint_states
    current_noise_a: float = 0.02  # A (standard deviation)
    current_lsb_a: float = 0.005  # A (the current sensor's resolution)
    torque_noise: float = 0.002  # joint-torque noise, fraction of each joint's effort limit
    velocity_noise: float = 0.002  # rad/s
    noise: bool = True  # False: exact q, q̇ and τ (stamps still irregular)

    def __post_init__(self):
        if not 100.0 <= self.rate_hz <= 1000.0:
            raise ConfigError(f"rate_hz = {self.rate_hz}: the generator writes 100 Hz–1 kHz logs")
        if self.effort not in ("motor_current", "joint_states"):
            raise ConfigError(f"effort = {self.effort!r}: motor_current or joint_states")
        if not (0.0 <= self.jitter < 0.5 and 0.0 <= self.drop < 0.5):
            raise ConfigError("jitter and drop must lie in [0, 0.5)")


@dataclass
class Generated:
    """A generated recording: what the log holds and the truth behind it."""

    stamp_ns: np.ndarray
    q: np.ndarray  # logged
    qd: np.ndarray  # logged
    effort: np.ndarray  # logged (A or N·m)
    q_true: np.ndarray
    qd_true: np.ndarray
    qdd_true: np.ndarray
    tau_true: np.ndarray  # the joint torque the arm produced
    payload: Payload | None
    mapping: ArmMapping
    trajectory: FourierTrajectory | None = None
    tau_ext: np.ndarray | None = None  # external joint torque (pushes) at each stamp

    @property
    def t(self) -> np.ndarray:
        return (self.stamp_ns - self.stamp_ns[0]) * 1e-9


class ArmGenerator:
    """A "true" arm made from a URDF (seeded perturbation) that writes realistic recordings."""

    def __init__(
        self,
        urdf,
        joints,
        *,
        seed: int = 0,
        perturbation: float = 0.15,
        stribeck: bool = True,
        spring: bool = True,
        coulomb_velocity: float = 0.01,
        acceleration_limits=None,
        dynamic_friction: bool = False,
    ):
        self.nominal = ArmRigidBody.from_urdf(urdf, joints)
        self.joints = self.nominal.joints
        n = self.nominal.n
        rng = np.random.default_rng(seed)
        self.pi = perturbed_parameters(self.nominal.body_parameters(), rng, perturbation)
        self.arm = self.nominal.with_parameters(self.pi)
        effort = self.nominal.effort_limits()
        effort = np.where(np.isfinite(effort) & (effort > 0), effort, 50.0)
        self.effort_limits = effort
        self.gains = effort / 10.0  # N·m/A: the rated torque at 10 A
        lo, hi = self.nominal.position_limits()
        coulomb = effort * rng.uniform(0.01, 0.03, n)
        self.friction = JointFriction(
            viscous=effort * rng.uniform(0.005, 0.02, n),
            coulomb=coulomb,
            offset=effort * rng.uniform(-0.005, 0.005, n),
            static=coulomb * (rng.uniform(1.2, 1.5, n) if stribeck else 1.0),
            stribeck_velocity=rng.uniform(0.05, 0.15, n),
            coulomb_velocity=float(coulomb_velocity),
            spring=effort * rng.uniform(0.002, 0.006, n) * (1.0 if spring else 0.0),
            spring_rest=np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0),
        )
        # drawn after the static friction, so a seed gives the same arm with either law
        self.lugre = LuGre.like_a_real_arm(effort, rng) if dynamic_friction else None
        if self.lugre is not None:
            self.friction.coulomb = np.zeros(n)  # the LuGre model carries Coulomb, Stribeck and viscous
            self.friction.static = np.zeros(n)
            self.friction.viscous = np.zeros(n)
        vel = self.nominal.velocity_limits()
        vel = np.where(np.isfinite(vel) & (vel > 0), vel, 1.0)
        acc = (
            DEFAULT_ACCELERATION * vel
            if acceleration_limits is None
            else np.broadcast_to(acceleration_limits, (n,))
        )
        self.limits = Limits(lo, hi, vel, acc)

    @property
    def n(self) -> int:
        return self.nominal.n

    def true_parameters(self, payload: Payload | None = None) -> np.ndarray:
        """(10 n) the true bodies' parameters, the payload added to the last body."""
        pi = self.pi.copy()
        if payload is not None:
            pi[-10:] += payload.parameters()
        return pi

    def torque(self, q, qd, qdd, payload: Payload | None = None) -> np.ndarray:
        """The true joint torque: rigid body (with the payload) + friction + spring (without the
        dynamic friction's state-dependent part: :meth:`generate` adds it along the trajectory)."""
        arm = self.arm if payload is None else self.nominal.with_parameters(self.true_parameters(payload))
        return arm.inverse_dynamics(q, qd, qdd) + self.friction.torque(q, qd)

    def trajectory(
        self, duration: float, seed: int = 0, harmonics: int = 5, speed: float = 0.6
    ) -> FourierTrajectory:
        """A random Fourier series of period ``duration`` within ``speed`` × the velocity and
        acceleration limits and the inner 80 % of the position range."""
        limits = Limits(
            self.limits.lower,
            self.limits.upper,
            speed * self.limits.velocity,
            speed * self.limits.acceleration,
        )
        return random_multisine(limits, duration, harmonics, seed=seed)

    def stamps(self, duration: float, options: GeneratorOptions, rng) -> np.ndarray:
        """Sample times (s): a nominal grid with jitter and dropped samples, strictly increasing."""
        period = 1.0 / options.rate_hz
        grid = np.arange(0.0, duration, period)
        t = grid + options.jitter * period * np.clip(rng.normal(size=len(grid)), -3, 3)
        t[0] = 0.0
        keep = rng.random(len(t)) >= options.drop
        keep[0] = True
        t = np.sort(t[keep & (t >= 0) & (t <= duration)])
        return t[np.concatenate([[True], np.diff(t) > 1e-6])]

    def generate(
        self,
        duration: float = 20.0,
        *,
        trajectory=None,
        payload: Payload | None = None,
        options: GeneratorOptions | None = None,
        seed: int = 1,
        start_ns: int = 1_700_000_000 * 1_000_000_000,
        pushes=(),
    ) -> Generated:
        """One recording of ``duration`` s. ``trajectory``: a FourierTrajectory or any object with
        ``evaluate(t) → (q, q̇, q̈)``; default a random one (``seed``). ``pushes``:
        :class:`ros_lnn.arm.simulation.Pulse` external torques (on a standing arm)."""
        from .simulation import pulse_torque

        options = options or GeneratorOptions()
        rng = np.random.default_rng(seed)
        traj = trajectory if trajectory is not None else self.trajectory(duration, seed=seed)
        t = self.stamps(duration, options, rng)
        stamp_ns = start_ns + np.round(t * 1e9).astype(np.int64)
        t = (stamp_ns - stamp_ns[0]) * 1e-9
        q, qd, qdd = traj.evaluate(t)
        tau = self.torque(q, qd, qdd, payload)
        if self.lugre is not None:
            z0 = rng.uniform(-1, 1, self.n) * self.lugre.coulomb / self.lugre.stiffness
            tau = tau + self.lugre.along(t, lambda x: traj.evaluate(x)[1], z0)[1]
        ext = np.array([pulse_torque(pushes, float(x), self.n) for x in t]) if pushes else None
        if ext is not None:
            tau = tau - ext
        q_log, qd_log = q.copy(), qd.copy()
        if options.effort == "motor_current":
            effort = tau / self.gains
            mapping = ArmMapping(
                actuated_joints=self.joints,
                effort="motor_current",
                effort_scale={j: float(g) for j, g in zip(self.joints, self.gains)},
            )
        else:
            effort = tau.copy()
            mapping = ArmMapping(actuated_joints=self.joints)
        if options.noise:
            lsb = 2 * np.pi / 2**ENCODER_BITS
            q_log = np.round(q / lsb) * lsb
            qd_log = qd + options.velocity_noise * rng.normal(size=qd.shape)
            if options.effort == "motor_current":
                effort = effort + options.current_noise_a * rng.normal(size=effort.shape)
                effort = np.round(effort / options.current_lsb_a) * options.current_lsb_a
            else:
                effort = effort + options.torque_noise * self.effort_limits * rng.normal(size=effort.shape)
        return Generated(
            stamp_ns,
            q_log,
            qd_log,
            effort,
            q,
            qd,
            qdd,
            tau,
            payload,
            mapping,
            traj if isinstance(traj, FourierTrajectory) else None,
            ext,
        )

    def truth(self, payload: Payload | None = None) -> dict:
        """The truth as plain data (JSON-ready)."""
        return {
            "joints": list(self.joints),
            "pi": self.pi.tolist(),
            "pi_urdf": self.nominal.body_parameters().tolist(),
            "friction": self.friction.as_dict(),
            "dynamic_friction": None if self.lugre is None else self.lugre.as_dict(),
            "drive_gains": self.gains.tolist(),
            "payload": None if payload is None else payload.as_dict(),
        }


def perturbed_parameters(pi: np.ndarray, rng, size: float) -> np.ndarray:
    """Each body's mass × (1 + size·ε), centre of mass moved by size × 10 cm · ε, inertia about the
    centre of mass rotated (≤ size rad) and scaled × (1 + size·ε) — physically consistent by
    construction (positive mass, positive definite inertia satisfying the triangle inequality)."""
    pin = pinocchio()
    out = []
    for b in range(len(pi) // 10):
        body = pin.Inertia.FromDynamicParameters(np.asarray(pi[10 * b : 10 * b + 10], dtype=float))
        mass = float(body.mass) * (1 + size * rng.uniform(-1, 1))
        com = np.array(body.lever) + size * 0.1 * rng.uniform(-1, 1, 3)
        axis = rng.normal(size=3)
        R = pin.exp3(axis / np.linalg.norm(axis) * size * rng.uniform(-1, 1))
        inertia = (1 + size * rng.uniform(-1, 1)) * R @ np.array(body.inertia) @ R.T
        out.append(np.asarray(pin.Inertia(max(mass, 1e-3), com, inertia).toDynamicParameters(), dtype=float))
    return np.concatenate(out)


def write_recording(path, rec: Generated, storage: str = "sqlite3", topic: str = "/joint_states") -> Path:
    """Write the log as rosbag2 ``topic`` (sensor_msgs/JointState: name, position, velocity, effort;
    header stamp = receive time = the sample time)."""
    from ..bags.writer import BagWriter

    with BagWriter(path, storage) as writer:
        writer.joint_states(topic, rec.stamp_ns, rec.mapping.actuated_joints, rec.q, rec.qd, rec.effort)
    return Path(path)
