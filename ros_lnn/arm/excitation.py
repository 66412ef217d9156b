"""Excitation design: a Fourier-series joint trajectory within position, velocity and acceleration
limits that minimises the condition number of the weighted base regressor (the identification
literature's criterion, Swevers et al. 1997; Gautier & Khalil 1992).

The criterion is what :func:`ros_lnn.arm.identification.identify` will see: the base columns of
``[Y(q, q̇, q̈), F(q̇)]`` (rigid body and friction), each joint's rows divided by the spread of its
torque (here the URDF's predicted torque), the columns scaled to unit norm. It is evaluated at a few
hundred states spread over one period. Each candidate is scaled into the limits (per joint, on a dense
grid), so every candidate is feasible and the search is unconstrained: the best of a set of random
multisines, then L-BFGS-B (finite differences) on ``log cond``, stopped at a time budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError, DataError
from . import friction
from . import identification as idn
from .fourier import DEFAULT_ACCELERATION, FourierTrajectory, Limits, random_multisine, shrink
from .programs import PointToPoint
from .rigid_body import ArmRigidBody

LIMIT_KEYS = ("lower", "upper", "velocity", "acceleration")


def arm_limits(arm: ArmRigidBody, spec=None) -> tuple[Limits, list[str]]:
    """The URDF's limits with ``spec`` applied, and notes on what was assumed. ``spec``: None, a dict,
    a YAML file's path, or inline ``acceleration=5,velocity_scale=0.5,J.lower=-1,...``. Global keys:
    ``velocity``, ``acceleration`` (every joint), ``velocity_scale``, ``acceleration_scale`` (× the
    limit); per joint ``J.lower``, ``J.upper``, ``J.velocity``, ``J.acceleration`` (or a nested
    ``J: {lower: …}`` in YAML)."""
    values = _limit_spec(spec)
    notes = []
    lo, hi = arm.position_limits()
    vel = arm.velocity_limits().astype(float)
    vel = np.where(np.isfinite(vel) & (vel > 0), vel, np.nan)
    acc = np.full(arm.n, np.nan)
    index = {j: k for k, j in enumerate(arm.joints)}
    arrays = {"lower": lo.astype(float), "upper": hi.astype(float), "velocity": vel, "acceleration": acc}
    for key in ("velocity", "acceleration"):
        if key in values:
            arrays[key][:] = _number(values.pop(key), key)
    for key, value in list(values.items()):
        joint, dot, what = key.rpartition(".")
        if not dot:
            continue
        if joint not in index:
            raise ConfigError(f"limits: {key}: {joint!r} is not one of the joints ({', '.join(arm.joints)})")
        if what not in LIMIT_KEYS:
            raise ConfigError(f"limits: {key}: unknown limit {what!r}; one of {', '.join(LIMIT_KEYS)}")
        arrays[what][index[joint]] = _number(value, key)
        values.pop(key)
    scales = {k: _number(values.pop(k), k) for k in ("velocity_scale", "acceleration_scale") if k in values}
    if values:
        raise ConfigError(
            f"limits: unknown key(s) {sorted(values)}; use velocity, acceleration, velocity_scale, "
            "acceleration_scale or JOINT.lower|upper|velocity|acceleration"
        )
    missing_v = np.isnan(arrays["velocity"])
    if missing_v.any():
        raise ConfigError(
            f"limits: no velocity limit for {[arm.joints[k] for k in np.flatnonzero(missing_v)]}; "
            "give J.velocity"
        )
    missing_a = np.isnan(arrays["acceleration"])
    if missing_a.any():
        arrays["acceleration"][missing_a] = DEFAULT_ACCELERATION * arrays["velocity"][missing_a]
        notes.append(
            f"acceleration limits: the URDF has none; assumed {DEFAULT_ACCELERATION:g}/s × the velocity "
            "limit "
            f"for {', '.join(arm.joints[k] for k in np.flatnonzero(missing_a))} (set acceleration=…)"
        )
    arrays["velocity"] = arrays["velocity"] * scales.get("velocity_scale", 1.0)
    arrays["acceleration"] = arrays["acceleration"] * scales.get("acceleration_scale", 1.0)
    for k in range(arm.n):
        if (
            not (np.isfinite(arrays["lower"][k]) and np.isfinite(arrays["upper"][k]))
            or arrays["lower"][k] <= -1e3
        ):
            arrays["lower"][k], arrays["upper"][k] = -np.pi, np.pi
            notes.append(f"{arm.joints[k]}: no position limits (continuous); designed within ±π")
    return Limits(**arrays), notes


def _number(value, key) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"limits: {key} = {value!r} is not a number") from None
    if not np.isfinite(x):
        raise ConfigError(f"limits: {key} = {value!r} is not finite")
    if key.endswith(("velocity", "acceleration", "_scale")) and x <= 0:
        raise ConfigError(f"limits: {key} = {value!r} must be positive")
    return x


def _limit_spec(spec) -> dict:
    if spec is None or spec == "":
        return {}
    if isinstance(spec, dict):
        doc = spec
    elif "=" in str(spec):
        doc = {}
        for part in str(spec).split(","):
            key, eq, value = part.strip().partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"limits: '{part.strip()}' is not KEY=VALUE")
            doc[key.strip()] = value.strip()
    else:
        from .mapping import read_config

        doc = read_config(spec)
        if not isinstance(doc, dict):
            raise ConfigError(f"{spec}: limits must be a YAML mapping")
    flat = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            for what, v in value.items():
                flat[f"{key}.{what}"] = v
        else:
            flat[str(key)] = value
    return flat


def condition_number(arm: ArmRigidBody, base: idn.BaseParameters, q, qd, qdd, pi=None) -> float:
    """Condition number of the weighted base regressor (rigid body + friction), columns at unit norm,
    each joint's rows weighted by 1 / std of its torque under ``pi`` (default the URDF's)."""
    Y = arm.regressor(q, qd, qdd)
    A = np.concatenate([Y, friction.regressor(qd)], axis=2)[:, :, base.columns]
    pi = arm.body_parameters() if pi is None else pi
    tau = Y @ pi
    spread = np.std(tau, axis=0)
    weights = 1.0 / np.where(spread > 1e-9, spread, 1.0)
    Aw = (A * weights[None, :, None]).reshape(-1, A.shape[2])
    norms = np.linalg.norm(Aw, axis=0)
    s = np.linalg.svd(Aw / np.where(norms > 0, norms, 1.0), compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


@dataclass
class Design:
    trajectory: FourierTrajectory
    condition_number: float
    random_condition_numbers: list
    base_count: int
    limits: Limits
    samples: int
    evaluations: int
    seconds: float
    design_condition_number: float = float("nan")  # on the states the search used
    design_samples: int = 0
    notes: list = field(default_factory=list)

    def report(self, joints) -> dict:
        peaks = self.trajectory.peaks()
        rnd = np.asarray(self.random_condition_numbers)
        return {
            "joints": list(joints),
            "period_s": self.trajectory.period,
            "harmonics": self.trajectory.harmonics,
            "base_parameters": self.base_count,
            "condition_number": self.condition_number,
            "random_multisine_condition_numbers": rnd.tolist(),
            "random_multisine_condition_number_median": float(np.median(rnd)),
            "criterion": "cond of the weighted base regressor [Y, F] (rigid body + friction), columns at "
            f"unit norm, rows / std of the URDF torque per joint; {self.samples} states over one period "
            f"(the search used {self.design_samples} others: "
            f"condition number {self.design_condition_number:.2f})",
            "limits": {k: getattr(self.limits, k).tolist() for k in LIMIT_KEYS},
            "peaks": {k: v.tolist() for k, v in peaks.items()},
            "evaluations": self.evaluations,
            "design_s": self.seconds,
            "notes": self.notes,
            "fourier": self.trajectory.as_dict(),
        }


def sample_times(period: float, samples: int) -> np.ndarray:
    return (np.arange(samples) + 0.5) * period / samples


def design_excitation(
    arm: ArmRigidBody,
    limits: Limits,
    period: float,
    *,
    harmonics: int = 5,
    samples: int = 200,
    margin: float = 0.05,
    candidates: int = 12,
    max_seconds: float = 60.0,
    random_seeds: int = 5,
    seed: int = 0,
    base: idn.BaseParameters | None = None,
    progress=None,
) -> Design:
    """Optimise a Fourier-series trajectory of ``period`` s for identification; see the module docstring."""
    from scipy.optimize import minimize

    say = progress or (lambda _text: None)
    if not 2 <= harmonics <= 20:
        raise ConfigError(f"harmonics = {harmonics}: give 2 … 20")
    if not period > 0:
        raise ConfigError(f"duration {period}: give a positive number of seconds")
    if not 20 <= samples <= 5000:
        raise ConfigError(f"samples = {samples}: give 20 … 5000")
    start = time.perf_counter()
    base = base or idn.structural_base(arm)
    inner = shrink(limits, margin)
    t = sample_times(period, samples)
    n, H = arm.n, harmonics
    evaluations = 0

    def build(x) -> FourierTrajectory:
        x = np.asarray(x, dtype=float)
        # centre: a sigmoid into the inner range (keeps room to oscillate: 10 % … 90 %)
        u = 0.1 + 0.8 / (1 + np.exp(-x[:n]))
        center = inner.lower + u * (inner.upper - inner.lower)
        a = x[n : n + n * (H - 1)].reshape(n, H - 1)
        b = x[n + n * (H - 1) :].reshape(n, H - 1)
        return FourierTrajectory.from_free(period, center, a, b).fit_to_limits(inner)

    def cost_of(traj) -> float:
        nonlocal evaluations
        evaluations += 1
        q, qd, qdd = traj.evaluate(t)
        c = condition_number(arm, base, q, qd, qdd)
        return float(np.log(c)) if np.isfinite(c) else 50.0

    randoms = [random_multisine(limits, period, H, seed=1000 + s, margin=margin) for s in range(random_seeds)]
    random_conds = [condition_number(arm, base, *r.evaluate(t)) for r in randoms]
    say(
        f"{base.count} base parameters; random multisines within the limits: condition number median "
        f"{np.median(random_conds):.1f} ({', '.join(f'{c:.0f}' for c in random_conds)})"
    )
    rng = np.random.default_rng(seed)
    best_x, best_cost = None, np.inf
    for _ in range(candidates):
        x = np.concatenate([rng.normal(0, 0.5, n), rng.normal(size=2 * n * (H - 1))])
        cost = cost_of(build(x))
        if cost < best_cost:
            best_x, best_cost = x, cost
    say(f"best of {candidates} random starts: condition number {np.exp(best_cost):.1f}")

    class _Budget(Exception):
        pass

    state_x, state_cost = best_x, best_cost
    deadline = start + max_seconds

    def objective(x):
        nonlocal state_x, state_cost
        if time.perf_counter() > deadline:
            raise _Budget
        cost = cost_of(build(x))
        if cost < state_cost:
            state_x, state_cost = np.array(x), cost
        return cost

    iteration = [0]

    def callback(_x):
        iteration[0] += 1
        if iteration[0] % 5 == 0:
            say(f"  iteration {iteration[0]}: condition number {np.exp(state_cost):.1f}")

    try:
        minimize(
            objective, best_x, method="L-BFGS-B", options={"maxiter": 200, "eps": 1e-4}, callback=callback
        )
    except _Budget:
        say(f"stopped at the time budget ({max_seconds:g} s)")
    traj = build(state_x)
    if not traj.within(limits):
        raise DataError("the designed trajectory leaves the limits (a bug: please report it)")
    # the verdict on states the search never saw: 4 × as many, shifted by a third of a step
    check = sample_times(period, 4 * samples) + period / (12 * samples)
    cond = condition_number(arm, base, *traj.evaluate(check))
    random_check = [condition_number(arm, base, *r.evaluate(check)) for r in randoms]
    seconds = time.perf_counter() - start
    say(
        f"designed: condition number {cond:.1f} (random multisines: median {np.median(random_check):.1f}) on "
        f"{len(check)} states, after {evaluations} evaluations, {seconds:.1f} s"
    )
    return Design(
        traj,
        cond,
        random_check,
        base.count,
        limits,
        len(check),
        evaluations,
        seconds,
        design_condition_number=float(np.exp(state_cost)),
        design_samples=samples,
    )


def joint_trajectory_message(
    traj: FourierTrajectory,
    joints,
    *,
    step: float = 0.1,
    lead_in: float = 5.0,
    periods: int = 1,
    then: PointToPoint | None = None,
) -> dict:
    """A trajectory_msgs/JointTrajectory as a dict (``ros2 topic pub --yaml-file`` / YAML): the
    trajectory's start at ``lead_in`` s (at rest — the controller moves there from wherever the arm
    is), then a point every ``step`` s for ``periods`` periods, ending at rest; ``then``: a
    point-to-point program after them (from where the series ends), with a point at every move's start
    and end and at least five along each move, so the controller's interpolation keeps the stops."""
    if step <= 0 or lead_in < 0 or periods < 1:
        raise ConfigError("step > 0, lead-in ≥ 0 and periods ≥ 1, please")
    count = int(round(periods * traj.period / step))
    ts = np.arange(count + 1) * (periods * traj.period / count)
    q, qd, qdd = traj.evaluate(ts)
    qd[0] = qd[-1] = 0.0  # exactly at rest (the series gives ~1e-16)
    qdd[0] = qdd[-1] = 0.0
    if then is not None:
        tail = np.unique(np.round(np.concatenate([_move_points(then, step), [then.duration]]), 6))[1:]
        tq, tqd, tqdd = then.evaluate(tail)
        ts = np.concatenate([ts, ts[-1] + tail])
        q, qd, qdd = np.vstack([q, tq]), np.vstack([qd, tqd]), np.vstack([qdd, tqdd])
    points = []
    for k, tk in enumerate(ts):
        ns = int(round((lead_in + tk) * 1e9))
        points.append(
            {
                "positions": [round(float(v), 7) for v in q[k]],
                "velocities": [round(float(v), 7) for v in qd[k]],
                "accelerations": [round(float(v), 6) for v in qdd[k]],
                "effort": [],
                "time_from_start": {"sec": ns // 10**9, "nanosec": ns % 10**9},
            }
        )
    return {
        "header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""},
        "joint_names": list(joints),
        "points": points,
    }


def _move_points(prog: PointToPoint, step: float) -> np.ndarray:
    """Times of a program's points: each move's start and end, at most ``step`` apart along it (at
    least five per move), and each dwell's end."""
    out = [np.zeros(1)]
    for start, move, dwell in zip(prog.starts, prog.moves, prog.dwells):
        out.append(np.linspace(start, start + move, max(5, int(np.ceil(move / step)) + 1)))
        out.append(np.array([start + move + dwell]))
    return np.concatenate(out)


def dwell_program(design_trajectory: FourierTrajectory, limits: Limits, seconds: float, seed: int = 0):
    """``seconds`` of point-to-point moves with stops after the exciting series, from the pose it
    ends at: steps of several sizes (0.1 % to 10 % of each joint's range) with reversals and dwells
    of 0.3–1 s — the motion that excites friction with memory (presliding after a reversal,
    breakaway after a stop, the torque held at rest), which a Fourier series never stops to show."""
    from .programs import point_to_point

    return point_to_point(
        limits, seconds, start=design_trajectory.center, seed=seed, margin=0.05, amplitudes=(0.001, 0.1),
        dwell=(0.3, 1.0),
    )  # fmt: skip


def write_joint_trajectory(path, message: dict, comment: str = "") -> Path:
    import yaml

    class _Flow(yaml.SafeDumper):
        pass

    def _list(dumper, data):  # numbers and names on one line each: a readable, compact file
        return dumper.represent_sequence(
            "tag:yaml.org,2002:seq", data, flow_style=not any(isinstance(v, dict) for v in data)
        )

    _Flow.add_representer(list, _list)
    text = yaml.dump(message, Dumper=_Flow, sort_keys=False, width=1 << 16)
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    path = Path(path)
    path.write_text(head + text)
    return path


@dataclass
class SampledTrajectory:
    """A JointTrajectory's points as a function of time (cubic Hermite on positions/velocities and on
    velocities/accelerations), time from the first point."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    joints: tuple

    def evaluate(self, t):
        from scipy.interpolate import CubicHermiteSpline

        t = np.clip(np.atleast_1d(np.asarray(t, dtype=float)), self.t[0], self.t[-1])
        q = CubicHermiteSpline(self.t, self.q, self.qd)(t)
        vel = CubicHermiteSpline(self.t, self.qd, self.qdd)
        return q, vel(t), vel.derivative()(t)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])


def read_joint_trajectory(path) -> SampledTrajectory:
    """A JointTrajectory YAML (as :func:`write_joint_trajectory` writes) — positions, velocities and
    accelerations per point."""
    from .mapping import read_config

    doc = read_config(path)
    try:
        points = doc["points"]
        joints = tuple(doc["joint_names"])
        t = np.array([p["time_from_start"]["sec"] + 1e-9 * p["time_from_start"]["nanosec"] for p in points])
        q, qd, qdd = (
            np.array([p[k] for p in points], dtype=float)
            for k in ("positions", "velocities", "accelerations")
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(
            f"{path}: not a JointTrajectory with positions, velocities and accelerations ({exc})"
        ) from None
    if (
        len(t) < 2
        or np.any(np.diff(t) <= 0)
        or q.shape != (len(t), len(joints))
        or qd.shape != q.shape
        or qdd.shape != q.shape
    ):
        raise DataError(
            f"{path}: the trajectory's points are not increasing in time with one value per joint"
        )
    return SampledTrajectory(t - t[0], q, qd, qdd, joints)
