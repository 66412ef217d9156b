"""Write a rosbag2 recording of a simulated plant as a real robot records it, and keep the exact truth.

The bag holds what a robot without force sensors publishes: ``sensor_msgs/JointState`` on one topic
(names, positions, velocities; efforts absent or NaN), optionally the servo's commanded trajectory.
Measurement model (:class:`RecordingSpec`), applied in this order:

* sample instants: the nominal grid ``k / rate`` plus Gaussian jitter (std ``jitter_s``, clipped to
  ±0.3 of a period, so samples stay ordered); each header stamp is its sample's instant, the bag
  receive time adds an exponential transport latency (mean ``latency_s``);
* positions: the true value plus white noise, then quantised by the encoder (``counts_per_rev`` for
  revolute joints, ``linear_resolution_m`` for prismatic ones);
* velocities: the true value plus white noise (a drive's velocity estimate);
* one gap: the messages of ``gap = (start as a fraction of the duration, length in s)`` are dropped.

The exact values at every published sample come back as :class:`RecordingTruth` (in memory only: a
robot's bag has no ground truth, so none is written).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..bags.writer import START_NS, STORAGES, BagWriter
from ..errors import ConfigError
from ..physics.friction import FrictionPlant
from ..physics.simulate import simulate
from .profiles import Profile

#: default (position std, velocity std) per coordinate unit: a 4096-count encoder's angle is good to
#: ~0.2 mrad after interpolation; a drive's velocity estimate carries a few mrad/s of noise.
DEFAULT_NOISE = {"rad": (2e-4, 2e-3), "m": (2e-5, 2e-4)}
EFFORTS = ("absent", "nan")


@dataclass(frozen=True)
class RecordingSpec:
    """How the robot records: rate, topic and joint names, noise, quantisation, jitter and a gap."""

    duration_s: float = 4.0
    rate_hz: float = 500.0
    storage: str = "sqlite3"
    joint_states_topic: str = "/joint_states"
    #: published joint names, in the plant's coordinate order (empty: the plant's names)
    joint_names: tuple = ()
    #: publish the servo-driven joints first (as a robot lists its motors), else the plant's order
    servo_first: bool = True
    #: False: JointState.name is empty (some drivers); the mapping then needs ``joint_order``
    publish_names: bool = True
    #: "absent" (effort array empty) or "nan" (one NaN per joint)
    efforts: str = "absent"
    #: white-noise std per coordinate in the plant's units (scalar, tuple, or None = DEFAULT_NOISE)
    position_noise: float | tuple | None = None
    velocity_noise: float | tuple | None = None
    counts_per_rev: int = 4096
    linear_resolution_m: float = 1e-5
    jitter_s: float = 2e-5
    latency_s: float = 3e-4
    gap: tuple | None = (0.55, 0.06)
    #: topic of the servo's commanded trajectory (JointTrajectory with q_e, q̇_e, q̈_e); "" = none
    servo_topic: str = ""
    seed: int = 0

    def __post_init__(self):
        if self.storage not in STORAGES:
            raise ConfigError(f"recording storage '{self.storage}': choose one of {', '.join(STORAGES)}")
        if self.efforts not in EFFORTS:
            raise ConfigError(f"recording efforts '{self.efforts}': choose one of {', '.join(EFFORTS)}")
        if self.rate_hz <= 0 or self.duration_s <= 0:
            raise ConfigError("recording rate_hz and duration_s must be positive")
        object.__setattr__(self, "joint_names", tuple(self.joint_names))

    def noise(self, units) -> tuple[np.ndarray, np.ndarray]:
        """(position std, velocity std) per coordinate of a plant with these ``units``."""
        out = []
        for k, given in enumerate((self.position_noise, self.velocity_noise)):
            default = np.array([DEFAULT_NOISE[u][k] for u in units])
            out.append(
                default if given is None else np.broadcast_to(np.asarray(given, float), default.shape).copy()
            )
        return out[0], out[1]

    def resolution(self, units) -> np.ndarray:
        """Encoder step per coordinate (0 = not quantised)."""
        rad = 2 * np.pi / self.counts_per_rev if self.counts_per_rev else 0.0
        return np.array([rad if u == "rad" else self.linear_resolution_m for u in units])


@dataclass
class RecordingTruth:
    """Exact values at every published sample (plant coordinate order), and what the bag holds."""

    path: Path
    system: str
    coordinate_names: tuple  # the plant's
    published_names: tuple  # the bag's, for the same coordinates
    free_joints: tuple  # bag names
    servo_joints: tuple  # bag names
    t: np.ndarray  # (N,) sample instants, s from the start of the recording
    stamp_ns: np.ndarray  # (N,) header stamps
    recv_ns: np.ndarray  # (N,) bag receive times
    q: np.ndarray  # (N, n)
    qd: np.ndarray
    qdd: np.ndarray
    Q_f: np.ndarray  # (N, n_f) generalised force on the free coordinates (= their friction)
    Q_e: np.ndarray  # (N, n_e) what the servo delivers (its friction included)
    friction: np.ndarray  # (N, n) friction force on every coordinate
    T: np.ndarray
    V: np.ndarray
    E: np.ndarray
    dissipated_power: np.ndarray  # (N,) −q̇ᵀ friction ≥ 0
    measured_q: np.ndarray  # (N, n) as written to the bag
    measured_qd: np.ndarray
    free_index: tuple = ()
    servo_index: tuple = ()
    dropped: int = 0  # messages lost in the gap
    gap_s: tuple | None = None  # (start, end) of the gap, s
    profile: dict = field(default_factory=dict)
    spec: RecordingSpec | None = None
    parameters: dict = field(default_factory=dict)

    @property
    def qdd_f(self) -> np.ndarray:
        return self.qdd[:, list(self.free_index)]

    def manifest(self) -> dict:
        """JSON-ready description of the recording (no ground-truth arrays)."""
        return {
            "path": str(self.path),
            "system": self.system,
            "samples": int(len(self.t)),
            "joints": {"free": list(self.free_joints), "servo": list(self.servo_joints)},
            "dropped": self.dropped,
            "gap_s": list(self.gap_s) if self.gap_s else None,
            "profile": self.profile,
            "spec": _jsonable(asdict(self.spec)) if self.spec else None,
            "parameters": self.parameters,
        }


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def plant_parameters(plant: FrictionPlant) -> dict:
    """The plant's numeric parameters and friction, for manifests."""
    params: dict[str, Any] = {
        k: float(v) for k, v in vars(plant.system).items() if isinstance(v, (int, float))
    }
    params["friction"] = {c: asdict(plant.joint_friction(c)) for c in plant.system.coordinate_names}
    return params


def sample_instants(spec: RecordingSpec, rng: np.random.Generator) -> np.ndarray:
    """Nominal grid plus clipped Gaussian jitter (the first sample exactly at 0)."""
    period = 1.0 / spec.rate_hz
    count = int(np.floor(spec.duration_s * spec.rate_hz + 1e-9)) + 1
    jitter = np.clip(rng.normal(0.0, spec.jitter_s, count), -0.3 * period, 0.3 * period)
    jitter[0] = 0.0
    return np.arange(count) * period + jitter


#: the integrator's longest step: 20 ms gives the truth of the recordings here to about 1e-9 of a 5 ms
#: limit, in half the right-hand side evaluations
MAX_STEP_S = 0.02


def simulate_plant(plant: FrictionPlant, profile: Profile, t: np.ndarray, q0_free=None, qd0_free=None):
    """Integrate ``plant`` driven by ``profile`` and sample it at ``t`` (accurate: DOP853, tolerances
    1e-11, steps ≤ 20 ms and ≤ 1/4 of the profile's fastest feature, so no pulse is stepped over).
    Returns a ``Trial``."""
    system = plant.system
    n_f = len(system.partition.free)
    q0 = np.zeros(n_f) if q0_free is None else np.asarray(q0_free, float)
    qd0 = np.zeros(n_f) if qd0_free is None else np.asarray(qd0_free, float)
    return simulate(
        system,
        float(t[-1]),
        q0.tolist(),
        qd0.tolist(),
        servo=profile,
        force=plant.free_force,
        t_eval=t.tolist(),
        method="DOP853",
        rtol=1e-11,
        atol=1e-11,
        max_step=min(MAX_STEP_S, profile.feature_s / 4),
        name=profile.kind,
        attrs={"profile": profile.describe()},
    )


def write_recording(
    path,
    plant: FrictionPlant,
    profile: Profile,
    spec: RecordingSpec | None = None,
    *,
    q0_free=None,
    qd0_free=None,
) -> RecordingTruth:
    """Simulate ``plant`` with its servo following ``profile`` and write the rosbag2 ``path`` as a robot
    records it (see the module docstring). Returns the exact truth at the published samples."""
    spec = RecordingSpec() if spec is None else spec
    system = plant.system
    names = spec.joint_names or system.coordinate_names
    if len(names) != system.n or len(set(names)) != system.n:
        raise ConfigError(
            f"recording joint_names {list(names)}: give {system.n} distinct names, one per "
            f"coordinate {list(system.coordinate_names)}"
        )
    rng = np.random.default_rng(spec.seed)
    t_all = sample_instants(spec, rng)
    trial = simulate_plant(plant, profile, t_all, q0_free, qd0_free)

    keep = np.ones(len(t_all), dtype=bool)
    gap = None
    if spec.gap:
        start = spec.gap[0] * spec.duration_s
        gap = (start, start + spec.gap[1])
        keep &= ~((t_all >= gap[0]) & (t_all < gap[1]))
    t = t_all[keep]
    q, qd, qdd = trial.q[keep], trial.qd[keep], trial.qdd[keep]

    pos_std, vel_std = spec.noise(system.coordinate_units)
    step = spec.resolution(system.coordinate_units)
    measured_q = q + rng.normal(size=q.shape) * pos_std
    measured_q = np.where(step > 0, np.round(measured_q / np.where(step > 0, step, 1.0)) * step, measured_q)
    measured_qd = qd + rng.normal(size=qd.shape) * vel_std

    stamp_ns = START_NS + np.round(t * 1e9).astype(np.int64)
    recv_ns = (
        stamp_ns + np.round(rng.exponential(spec.latency_s, len(t)) * 1e9).astype(np.int64)
        if spec.latency_s > 0
        else stamp_ns.copy()
    )

    free, servo = list(system.partition.free), list(system.partition.servo)
    order = servo + free if spec.servo_first else list(range(system.n))
    effort = np.full((len(t), system.n), np.nan) if spec.efforts == "nan" else None
    writer = BagWriter(path, spec.storage)
    writer.joint_states(
        spec.joint_states_topic,
        stamp_ns,
        [names[i] for i in order] if spec.publish_names else [],
        measured_q[:, order],
        measured_qd[:, order],
        effort,
        recv_ns=recv_ns,
    )
    if spec.servo_topic and servo:
        q_e, qd_e, qdd_e = profile(t)
        writer.joint_trajectory(
            spec.servo_topic,
            stamp_ns,
            [names[i] for i in servo],
            q_e[:, None],
            qd_e[:, None],
            qdd_e[:, None],
            recv_ns=recv_ns,
        )
    writer.close()

    friction = plant.friction_forces(qd)
    Q = trial.Q[keep]
    return RecordingTruth(
        path=Path(path),
        system=plant.name,
        coordinate_names=system.coordinate_names,
        published_names=tuple(names),
        free_joints=tuple(names[i] for i in free),
        servo_joints=tuple(names[i] for i in servo),
        t=t,
        stamp_ns=stamp_ns,
        recv_ns=recv_ns,
        q=q,
        qd=qd,
        qdd=qdd,
        Q_f=Q[:, free],
        Q_e=Q[:, servo] - friction[:, servo],
        friction=friction,
        T=trial.T[keep],
        V=trial.V[keep],
        E=trial.E[keep],
        dissipated_power=-(qd * friction).sum(-1),
        measured_q=measured_q,
        measured_qd=measured_qd,
        free_index=tuple(free),
        servo_index=tuple(servo),
        dropped=int((~keep).sum()),
        gap_s=gap,
        profile=profile.describe(),
        spec=spec,
        parameters=plant_parameters(plant),
    )


def bag_mapping(truth: RecordingTruth, *, savgol_window: int = 11, savgol_order: int = 3) -> dict:
    """The ``bag:`` mapping (as a dict for ``BagMapping.from_dict`` or a YAML file) that reads this
    recording: joint states only, no command topic unless recorded, no efforts, no ground truth."""
    spec = truth.spec or RecordingSpec()
    out = {
        "joint_states_topic": spec.joint_states_topic,
        "servo_topic": spec.servo_topic,
        "free_joints": list(truth.free_joints),
        "servo_joints": list(truth.servo_joints),
        "servo_effort": "none",
        "free_effort": "zero",
        "ground_truth_topic": "",
        "savgol_window": savgol_window,
        "savgol_order": savgol_order,
        "system": truth.system,
    }
    if not spec.publish_names:
        order = (
            list(truth.servo_index + truth.free_index)
            if spec.servo_first
            else list(range(len(truth.published_names)))
        )
        out["joint_order"] = [truth.published_names[i] for i in order]
    return out


__all__ = [
    "RecordingSpec",
    "RecordingTruth",
    "write_recording",
    "simulate_plant",
    "sample_instants",
    "bag_mapping",
    "plant_parameters",
    "DEFAULT_NOISE",
]
