"""Shared by the real-data tests: a rotary arm driven by its servo carrying a free pendulum (Furuta
type; the arm angle grows without bound while the arm spins), with viscous and Coulomb friction on
the pendulum pivot, recorded as a robot's bag: ``joint_states`` only, positions and velocities, no
command topic, no efforts, no ground truth.

Arm angle ``phi`` (servo, about the vertical), pendulum angle ``theta`` from the downward vertical
(free), bob ``m`` at distance ``l`` from the pivot at the arm tip (arm length ``r``, arm inertia
``J``). Independent of the package's machinery, the textbook equations::

    T = ½ (J + m (r² + l² sin²θ)) φ̇² + m r l cos θ φ̇ θ̇ + ½ m l² θ̇²,    V = −m g l cos θ
    m l² θ̈ + m r l cos θ φ̈ − m l² sin θ cos θ φ̇² + m g l sin θ = −b θ̇ − c tanh(θ̇ / v)
"""

from __future__ import annotations

import numpy as np

from ros_lnn.bags.writer import BagWriter
from ros_lnn.physics.lagrangian import Partition
from ros_lnn.physics.simulate import simulate
from ros_lnn.physics.systems import LagrangianSystem

JOINTS = ("pendulum_joint", "arm_joint")
MAPPING = {
    "joint_states_topic": "/joint_states",
    "servo_topic": "",
    "free_joints": ["pendulum_joint"],
    "servo_joints": ["arm_joint"],
    "servo_effort": "none",
    "free_effort": "zero",
    "ground_truth_topic": "",
    "system": "rotary_pendulum",
}


class RotaryPendulum(LagrangianSystem):
    name = "rotary_pendulum"
    coordinate_names = JOINTS
    coordinate_units = ("rad", "rad")

    def __init__(self, m=0.1, l=0.2, r=0.15, J=0.01, g=9.81, b=2e-4, c=1e-4, v=0.02):
        self.m, self.l, self.r, self.J, self.g = m, l, r, J, g
        self.b, self.c, self.v = b, c, v
        self.partition = Partition(free=(0,), servo=(1,))

    def mass_matrix(self, q):
        q = np.asarray(q, float)
        th = q[..., 0]
        M = np.empty(q.shape[:-1] + (2, 2))
        M[..., 0, 0] = self.m * self.l**2
        M[..., 0, 1] = M[..., 1, 0] = self.m * self.r * self.l * np.cos(th)
        M[..., 1, 1] = self.J + self.m * (self.r**2 + self.l**2 * np.sin(th) ** 2)
        return M

    def mass_matrix_partials(self, q):
        q = np.asarray(q, float)
        th = q[..., 0]
        dM = np.zeros(q.shape[:-1] + (2, 2, 2))
        dM[..., 0, 0, 1] = dM[..., 0, 1, 0] = -self.m * self.r * self.l * np.sin(th)
        dM[..., 0, 1, 1] = 2 * self.m * self.l**2 * np.sin(th) * np.cos(th)
        return dM

    def potential(self, q):
        return -self.m * self.g * self.l * np.cos(np.asarray(q, float)[..., 0])

    def potential_gradient(self, q):
        q = np.asarray(q, float)
        dV = np.zeros(q.shape)
        dV[..., 0] = self.m * self.g * self.l * np.sin(q[..., 0])
        return dV

    def friction(self, t, q, qd):
        """Pivot friction as the applied force on the free joint (negative work)."""
        return np.array([-self.b * qd[0] - self.c * np.tanh(qd[0] / self.v)])

    def pendulum_acceleration(self, theta, theta_d, phi_d, phi_dd):
        """θ̈ from the textbook equation above (the independent reference)."""
        m, l, r, g = self.m, self.l, self.r, self.g
        rhs = (
            m * l**2 * np.sin(theta) * np.cos(theta) * phi_d**2
            - m * g * l * np.sin(theta)
            - m * r * l * np.cos(theta) * phi_dd
            - self.b * theta_d
            - self.c * np.tanh(theta_d / self.v)
        )
        return rhs / (m * l**2)


def step_servo(speed=6.0, ramp=0.4):
    """Ramp to a constant arm speed in ``ramp`` seconds (smooth), then hold it: a step response."""

    def servo(t):
        if t < ramp:
            s = t / ramp
            qd = speed * (3 * s**2 - 2 * s**3)
            qdd = speed * (6 * s - 6 * s**2) / ramp
            q = speed * ramp * (s**3 - 0.5 * s**4)
        else:
            q, qd, qdd = speed * ramp * 0.5 + speed * (t - ramp), speed, 0.0
        return np.array([q]), np.array([qd]), np.array([qdd])

    return servo


def impulse_servo(peak=12.0, width=0.25, at=0.5, hold=2.0):
    """An arm speed pulse (a raised cosine of ``width`` s) at ``at`` and another, opposite, ``hold``
    seconds later: speed and acceleration both vary."""

    def pulse(t, t0, sign):
        s = (t - t0) / width
        if not 0.0 <= s <= 1.0:
            return 0.0, 0.0, (0.0 if s < 0 else sign * peak * width / 2)
        qd = sign * peak * 0.5 * (1 - np.cos(2 * np.pi * s))
        qdd = sign * peak * np.pi * np.sin(2 * np.pi * s) / width
        q = sign * peak * width * 0.5 * (s - np.sin(2 * np.pi * s) / (2 * np.pi))
        return qd, qdd, q

    def servo(t):
        a, b = pulse(t, at, 1.0), pulse(t, at + hold, -1.0)
        return np.array([a[2] + b[2]]), np.array([a[0] + b[0]]), np.array([a[1] + b[1]])

    return servo


def chirp_servo(amp=0.8, f0=0.3, f1=1.5, duration=8.0):
    """Arm angle ``amp sin(2π (f0 t + (f1 − f0) t² / (2 duration)))``: a sweep of frequencies."""
    k = (f1 - f0) / duration

    def servo(t):
        ph = 2 * np.pi * (f0 * t + 0.5 * k * t**2)
        w = 2 * np.pi * (f0 + k * t)
        return (
            np.array([amp * np.sin(ph)]),
            np.array([amp * w * np.cos(ph)]),
            np.array([amp * (2 * np.pi * k * np.cos(ph) - w**2 * np.sin(ph))]),
        )

    return servo


def record(system, servo, duration, rate_hz=200.0, theta0=0.3, name="trial"):
    t = np.arange(0.0, duration, 1.0 / rate_hz)
    return simulate(
        system, duration, [theta0], [0.0], servo=servo, force=system.friction, t_eval=t, name=name
    )


def write_joint_states_bag(path, trial, *, noise=0.0, seed=0, rate_hz=None, names=True):
    """The trial as a robot records it: one JointState per sample, positions and velocities only
    (effort empty), optional velocity noise; nothing else in the bag."""
    rng = np.random.default_rng(seed)
    stamps = 1_700_000_000 * 10**9 + np.round(trial.t * 1e9).astype(np.int64)
    qd = trial.qd + noise * rng.standard_normal(trial.qd.shape)
    with BagWriter(path) as writer:
        writer.joint_states("/joint_states", stamps, trial.coordinate_names if names else [], trial.q, qd)
    return path


def urdf(m=0.1, l=0.2, r=0.15, J=0.01):
    """The rotary pendulum as a URDF (continuous joints; the bob a point mass) — with other values
    than the simulated robot's it is a URDF that is wrong the way real ones are."""
    return f"""<robot name="rotary_pendulum">
  <link name="base"/>
  <joint name="arm_joint" type="continuous"><parent link="base"/><child link="arm"/>
    <axis xyz="0 0 1"/></joint>
  <link name="arm"><inertial><origin xyz="0 0 0"/><mass value="0.05"/>
    <inertia ixx="{J / 2}" ixy="0" ixz="0" iyy="{J / 2}" iyz="0" izz="{J}"/></inertial></link>
  <joint name="pendulum_joint" type="continuous"><parent link="arm"/><child link="pendulum"/>
    <origin xyz="{r} 0 0"/><axis xyz="1 0 0"/></joint>
  <link name="pendulum"><inertial><origin xyz="0 0 {-l}"/><mass value="{m}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
</robot>
"""
