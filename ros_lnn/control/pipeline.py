"""Joint states in, port command and joint efforts out: the DAC as a robot controller sees it (no ROS).

``DacPipeline.step(q, q̇, t)`` computes the certain model at the joint state with Pinocchio (body poses,
twists ``ν = G(q) q̇``, ``H``, ``C``, Jacobians: :mod:`ros_lnn.physics.multibody.pin`), the chosen law on
the current target, and ``u = Gᵀ τ_c`` with limits. Law III runs in joint coordinates
(:class:`ros_lnn.control.joint_space.EndEffectorLawJointSpace`, the same numbers as the coordinate-free
law); laws I/II run the coordinate-free law on the Pinocchio workspace with ``𝓐 = G H⁻¹ Gᵀ``. Targets:

* law III (``end_effector``): a set point (position, optional attitude) from ``set_ee_target``;
* laws I/II (``velocity``/``pose``): a joint trajectory (``set_joint_trajectory``) sampled with cubic
  Hermite segments; body poses, twists and their rates follow from FK, ``G`` and ``Ġ q̇``.

Joint limits (:mod:`ros_lnn.control.joint_limits`, ``set_joint_limits``): the efforts, after their
clamp, go through soft position and velocity limits; a violation stops the arm, latched until
``joint_limits.reset()``: with a protective stop set (``set_protective_stop``, :mod:`.protective_stop`)
the efforts brake every joint to rest inside its soft limits and hold it there against gravity, without
one they are zero. ``stop_efforts`` gives the same stop for any other reason to stop (a fault).

The joint laws (:mod:`ros_lnn.control.joint_laws`: ``feedforward_pd``, ``gravity_compensation``) run on the
same model, joint trajectory and effort map. A model whose certain part is a rigid body brings its
compensated term (``compensation``, :class:`ros_lnn.control.effort.Compensation`: an identified arm's
friction and residual), added to every law's efforts.

Hold policy: before any target arrives, and whenever ``hold()`` is called, the target becomes the
current configuration at rest (the end-effector pose now, or the joint positions now); after the last
trajectory point the trajectory holds its final point. Non-finite inputs raise ``DataError`` and
nothing is computed from them.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, DataError
from ..estimation.trajectory import quintic_coefficients
from ..physics.multibody.pin import JointSpaceData, PinocchioModel, kinematics
from .dac import (
    LAWS,
    BodyPoseTarget,
    DacController,
    DacResult,
    EndEffector,
    EndEffectorTarget,
    Gains,
    VelocityTarget,
    end_effector_state,
)
from .effort import Compensation, EffortCommand, PortToEfforts, Residual
from .joint_laws import JOINT_LAWS, JointLaw
from .joint_limits import JointLimitGuard, LimitResult
from .joint_space import EndEffectorLawJointSpace, JointTargetLawJointSpace
from .mobility import JointSpaceOperators
from .obstacles import ObstacleField, SphereObstacle, default_control_points
from .protective_stop import ProtectiveStop


@dataclass
class PipelineOutput:
    result: DacResult
    efforts: EffortCommand
    data: JointSpaceData
    ee_position: np.ndarray
    target_position: np.ndarray | None
    guarded: bool = False  # the task inverse was singular here and got damped (law III)
    limits: LimitResult | None = None  # what the joint limits did (None: no limits set)


class JointTrajectorySampler:
    """Piecewise cubic Hermite through (t_k, q_k, q̇_k); q̇_k from finite differences when absent. With
    accelerations at every point the segments are quintic (q̈ continuous, as joint_trajectory_controller
    interpolates them): what a feed-forward law needs from a trajectory."""

    def __init__(self, times, positions, velocities=None, accelerations=None):
        t = np.asarray(times, float)
        q = np.asarray(positions, float)
        if (
            q.ndim != 2
            or t.shape != (q.shape[0],)
            or not np.all(np.isfinite(t))
            or np.any(np.diff(t) <= 0)
            or not np.all(np.isfinite(q))
        ):
            raise DataError(
                "joint trajectory: need finite, strictly increasing times and finite positions, "
                "one row per point"
            )
        if velocities is None or len(velocities) != len(t):
            v = np.gradient(q, t, axis=0) if len(t) > 1 else np.zeros_like(q)
            v[-1] = 0.0  # come to rest at the last point
        else:
            v = np.asarray(velocities, float)
            if v.shape != q.shape or not np.all(np.isfinite(v)):
                raise DataError("joint trajectory: velocities must be finite, one per joint and point")
        self.t, self.q, self.v = t, q, v
        self._times = t.tolist()
        h = np.diff(t)[:, None]
        segments = np.empty((max(len(t) - 1, 0), 4, q.shape[1]))  # per segment [q_k, h q̇_k, q_k+1, h q̇_k+1]
        segments[:, 0], segments[:, 1], segments[:, 2], segments[:, 3] = q[:-1], h * v[:-1], q[1:], h * v[1:]
        self._segments = segments
        self._quintic = None
        if accelerations is not None and velocities is not None and len(accelerations) == len(t):
            a = np.asarray(accelerations, float)
            if a.shape != q.shape or not np.all(np.isfinite(a)):
                raise DataError("joint trajectory: accelerations must be finite, one per joint and point")
            # power-basis coefficients in s ∈ [0, 1] per segment (the estimation's quintic)
            p0, p1, v0, v1, a0, a1 = q[:-1], q[1:], h * v[:-1], h * v[1:], h * h * a[:-1], h * h * a[1:]
            self._quintic = np.stack(quintic_coefficients(p0, v0, a0, p1, v1, a1), axis=1)

    def __call__(self, t: float):
        """``(q, q̇, q̈)`` at ``t`` (before the first point: the first at rest; after the last: the last)."""
        ts = self._times
        if t <= ts[0]:
            zero = np.zeros_like(self.q[0])
            return self.q[0].copy(), zero, zero.copy()
        if t >= ts[-1]:
            zero = np.zeros_like(self.q[0])
            return self.q[-1].copy(), zero, zero.copy()
        k = bisect.bisect_left(ts, t) - 1
        h = ts[k + 1] - ts[k]
        s = (t - ts[k]) / h
        s2 = s * s
        s3 = s2 * s
        if self._quintic is not None:
            s4 = s3 * s
            basis = np.array(
                [
                    [1.0, s, s2, s3, s4, s4 * s],
                    [0.0, 1.0 / h, 2 * s / h, 3 * s2 / h, 4 * s3 / h, 5 * s4 / h],
                    [0.0, 0.0, 2 / h**2, 6 * s / h**2, 12 * s2 / h**2, 20 * s3 / h**2],
                ]
            )
            out = basis.dot(self._quintic[k])
            return out[0], out[1], out[2]
        # Hermite basis, its first and second derivatives (in s; divided by h and h² for t)
        basis = np.array(
            [
                [2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2],
                [(6 * s2 - 6 * s) / h, (3 * s2 - 4 * s + 1) / h, (-6 * s2 + 6 * s) / h, (3 * s2 - 2 * s) / h],
                [(12 * s - 6) / h**2, (6 * s - 4) / h**2, (-12 * s + 6) / h**2, (6 * s - 2) / h**2],
            ]
        )
        out = basis.dot(self._segments[k])
        return out[0], out[1], out[2]


def circle_path(center, radius, period_s, normal=(1.0, 0.0, 0.0), phase=0.0):
    """End effector on a circle (position task) with exact feed-forward velocity and acceleration."""
    c = np.asarray(center, float)
    nrm = np.asarray(normal, float) / np.linalg.norm(normal)
    helper = np.eye(3)[int(np.argmin(np.abs(nrm)))]
    e1 = np.cross(nrm, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(nrm, e1)
    w = 2 * np.pi / period_s

    def path(t):
        ph = w * t + phase
        cs, sn = np.cos(ph), np.sin(ph)
        pos = c + radius * (cs * e1 + sn * e2)
        vel = radius * w * (-sn * e1 + cs * e2)
        acc = -radius * w * w * (cs * e1 + sn * e2)
        return EndEffectorTarget(pos, None, np.r_[vel, 0.0, 0.0, 0.0], np.r_[acc, 0.0, 0.0, 0.0])

    return path


class DacPipeline:
    def __init__(
        self,
        model,
        law: str = "end_effector",
        gains: Gains | None = None,
        joint_names=None,
        ee_link: str | None = None,
        ee_attitude: bool = False,
        obstacles=(),
        obstacle_influence=0.1,
        obstacle_eta=5.0,
        effort_limits=None,
        residual: Residual | None = None,
        residual_limit=None,
        compensation: Compensation | None = None,
        joint_kp=(0.0,),
        joint_kd=(0.0,),
    ):
        if model.floating_root is not None:
            raise ConfigError(f"model '{model.name}': the joint-space pipeline needs a fixed base")
        if law not in LAWS + JOINT_LAWS:
            raise ConfigError(f"law '{law}' is not one of {', '.join(LAWS + JOINT_LAWS)}")
        self.model = model
        if ee_link:
            frames = getattr(model, "frames", {})
            if ee_link not in frames or frames[ee_link][0] < 0:
                raise ConfigError(
                    f"ee_link '{ee_link}' is not a moving link of '{model.name}' (links: {sorted(frames)})"
                )
            b, R, p = frames[ee_link]
            ee = EndEffector(b, p, R)
        else:
            ee = EndEffector(model.n_bodies - 1)
        field = None
        if len(obstacles):
            field = ObstacleField(
                tuple(SphereObstacle(np.asarray(c, float), float(r)) for c, r in obstacles),
                *default_control_points(model),
                influence=obstacle_influence,
                gain=obstacle_eta,
            )
        # a joint law keeps a DAC controller for its end effector and obstacle field (the markers)
        self.controller = DacController(model, law if law in LAWS else "pose", gains, ee, field)
        self.pinocchio = PinocchioModel(model, frames=[("end_effector", ee.body, ee.offset, ee.rotation)])
        self.efforts = PortToEfforts(
            model,
            joint_names,
            effort_limits,
            residual,
            self.pinocchio.joint_names,
            residual_limit,
            compensation,
        )
        self.joint_names = self.efforts.joint_names
        self._to_model = np.array([self.joint_names.index(n) for n in self.pinocchio.joint_names])
        self._to_configured = np.argsort(self._to_model)
        self._in_model_order = bool(np.array_equal(self._to_model, np.arange(len(self._to_model))))
        self._state_shape = (len(self.joint_names),)
        self._target_workspace = self.pinocchio.pin.createData()  # joint targets (laws I/II): FK at q_d
        self.law, self.ee_attitude = law, ee_attitude
        self._law_iii = self._joint_space_law()
        self._law_joint_target = self._joint_target_law()
        self._joint_law = None
        if law in JOINT_LAWS:
            self._joint_law = JointLaw(self.pinocchio, law, self.pinocchio.frame_ids["end_effector"])
            self.set_joint_gains(joint_kp, joint_kd)
        self._ee_target: EndEffectorTarget | None = None
        self._trajectory: JointTrajectorySampler | None = None
        self._hold_q: np.ndarray | None = None
        self._ee_path = None
        self._joint_target_cache = None
        self.joint_limits: JointLimitGuard | None = None
        self.protective_stop: ProtectiveStop | None = None
        self.brakes_on_violation = False
        self._stop_workspace = self.pinocchio.pin.createData()

    def _joint_space_law(self) -> EndEffectorLawJointSpace | None:
        if self.law != "end_effector":
            return None
        frame = self.pinocchio.frame_ids["end_effector"]
        return EndEffectorLawJointSpace(self.controller, self.pinocchio, frame)

    def _joint_target_law(self) -> JointTargetLawJointSpace | None:
        if self.law not in ("velocity", "pose"):
            return None
        frame = self.pinocchio.frame_ids["end_effector"]
        return JointTargetLawJointSpace(self.controller, self.pinocchio, frame)

    @property
    def gains(self) -> Gains:
        return self.controller.gains

    def set_gains(self, gains: Gains) -> None:
        """New gains from the next step on (targets, hold and trajectory kept); ``ConfigError`` (and
        nothing changed) when they are not valid."""
        ctl = self.controller
        law = self.law if self.law in LAWS else "pose"
        controller = DacController(self.model, law, gains, ctl.end_effector, ctl.obstacles)
        self.controller = controller
        self._law_iii = self._joint_space_law()
        self._law_joint_target = self._joint_target_law()

    @property
    def compensation(self) -> Compensation | None:
        return self.efforts.compensation

    def set_joint_gains(self, kp, kd) -> None:
        """The joint laws' ``K_p`` and ``K_d`` (one number for every joint, or one per ``joint_names``
        entry) from the next step on; ``ConfigError`` (nothing changed) when they are not valid."""
        from .joint_laws import per_joint

        n = len(self.joint_names)
        kp, kd = per_joint(kp, n, "joint_kp"), per_joint(kd, n, "joint_kd")
        if self._joint_law is not None:
            self._joint_law.set_gains(self.model_order(kp), self.model_order(kd))

    def reset_compensation(self) -> None:
        """Start the compensated term afresh (a model with an internal state: at activation)."""
        if self.efforts.compensation is not None:
            self.efforts.compensation.reset()

    def set_joint_limits(self, guard: JointLimitGuard | None) -> None:
        """Position and velocity limits (``joint_names`` order) on every command from now on; None: off."""
        if guard is not None and list(guard.limits.names) != list(self.joint_names):
            raise ConfigError(f"joint limits are for {list(guard.limits.names)}, not {self.joint_names}")
        self.joint_limits = guard

    def set_protective_stop(self, stop: ProtectiveStop | None, on_limit_violation: bool = True) -> None:
        """The stop of :meth:`stop_efforts` (``joint_names`` order), and of a joint limit violation
        when ``on_limit_violation`` (else, or with None, a violation zeros the efforts)."""
        if stop is not None and stop.effort_limits.size != len(self.joint_names):
            raise ConfigError(f"protective stop needs one effort limit per joint {self.joint_names}")
        self.protective_stop = stop
        self.brakes_on_violation = stop is not None and on_limit_violation

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """``H(q) q̈ + C(q, q̇) q̇ + g(q)`` of the certain model (Pinocchio's RNEA), configured order."""
        import pinocchio as pin

        pm = self.pinocchio
        tau = pin.rnea(pm.pin, self._stop_workspace, *(self.model_order(x) for x in (q, qd, qdd)))
        return np.asarray(tau, float).take(self._to_configured)

    def stop_efforts(self, q, qd) -> np.ndarray:
        """The protective stop's efforts at ``q, q̇`` (configured order): brake to rest and hold
        (:mod:`.protective_stop`); zeros without a stop set."""
        if self.protective_stop is None:
            return np.zeros(len(self.joint_names))
        self._model_state(q, qd)  # DataError unless finite and of the joints' size
        return self.protective_stop.effort(np.asarray(q, float), np.asarray(qd, float), self.inverse_dynamics)

    def _limited(self, cmd: EffortCommand, q, qd) -> LimitResult | None:
        """Apply the joint limits to ``cmd.effort`` in place; what they did (None without limits). A
        violation gives the protective stop's efforts (zeros without one)."""
        if self.joint_limits is None:
            return None
        result = self.joint_limits.apply(q, qd, cmd.effort)
        if result.violation and self.brakes_on_violation:
            result.effort = self.stop_efforts(q, qd)
        cmd.effort = result.effort
        return result

    def set_residual(self, residual: Residual | None, limit=None) -> None:
        """The learned part ``τ̂_res(q, q̇, q̈_r)`` (``joint_names`` order) added to the efforts, bounded
        by ``limit`` per joint (None: unbounded); None removes it."""
        self.efforts.residual = residual
        self.efforts.set_residual_limit(limit)

    def joint_reference_acceleration(self, data: JointSpaceData, result: DacResult) -> np.ndarray:
        """``q̈_r`` (model order) of a law run on the body twists: ``ν_r = G q̇_r`` and ``ν̇_r = G q̈_r +
        Ġ q̇_r`` (the reference lies in the range of ``G``: it was projected with ``𝓐 = G H⁻¹ Gᵀ``), solved
        in the mass-weighted sense, ``q̇_r = H⁻¹ Gᵀ𝓜 ν_r`` and ``q̈_r = H⁻¹ Gᵀ𝓜 (ν̇_r − Ġ q̇_r)``."""
        n = data.n_bodies
        masses = self.pinocchio.masses.repeat(3)

        def weighted(x):  # Gᵀ 𝓜 x
            lin, ang = x[: 3 * n] * masses, (data.inertia @ x[3 * n :].reshape(n, 3, 1)).ravel()
            return data.G.T.dot(np.concatenate([lin, ang]))

        qd_r = np.linalg.solve(data.H, weighted(result.nu_r))
        return np.linalg.solve(data.H, weighted(result.nu_r_dot - data.G_dot.dot(qd_r)))

    # ------------------------------------------------------------------ inputs
    def model_order(self, x_configured):
        return np.asarray(x_configured, float).take(self._to_model)

    def _model_state(self, q, qd):
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        if q.shape != self._state_shape or qd.shape != q.shape or not math.isfinite(q.dot(q) + qd.dot(qd)):
            raise DataError(f"joint state must give finite position and velocity for {self.joint_names}")
        if self._in_model_order:
            return q, qd
        return q.take(self._to_model), qd.take(self._to_model)

    def kinematics(self, q, qd) -> JointSpaceData:
        """Body poses, twists and the joint-space terms (Pinocchio) from joint positions/velocities in
        the configured joint order."""
        return kinematics(self.pinocchio, *self._model_state(q, qd))

    def set_ee_target(self, position, quat=None):
        position = np.asarray(position, float).reshape(3)
        if not np.all(np.isfinite(position)) or (quat is not None and not np.all(np.isfinite(quat))):
            raise DataError("ee_target: position/orientation must be finite")
        if quat is not None:
            norm = float(np.linalg.norm(quat))
            if not (math.isfinite(norm) and norm > 1e-9):
                raise DataError("ee_target: orientation must be a quaternion of non-zero, finite length")
            quat = np.asarray(quat, float) / norm
        self._ee_target = EndEffectorTarget(position, quat if self.ee_attitude else None)

    def set_ee_path(self, path):
        """A moving end-effector target: ``path(t) -> EndEffectorTarget`` (with feed-forward twist)."""
        self._ee_path = path

    def set_joint_trajectory(self, times, positions, velocities=None, accelerations=None):
        """Times in seconds on the pipeline's clock; positions (K, n) in the configured joint order
        (velocities and accelerations likewise: with both the segments are quintic)."""
        self._trajectory = JointTrajectorySampler(times, positions, velocities, accelerations)

    def hold(self, q=None):
        """Drop the target: hold the configuration ``q`` (configured order), at rest."""
        self._ee_target, self._trajectory, self._ee_path = None, None, None
        self._hold_q = None if q is None else np.asarray(q, float).copy()

    @property
    def needs_clock(self) -> bool:
        """Whether :meth:`step` reads its time argument (a path or a trajectory is followed)."""
        return self._ee_path is not None or self._trajectory is not None

    @property
    def has_target(self) -> bool:
        return self._ee_target is not None or self._trajectory is not None or self._ee_path is not None

    # ------------------------------------------------------------------ the step
    def _joint_sample(self, t, q_now):
        """The joint-space target ``(q_d, q̇_d, q̈_d)`` at ``t`` in model order: the trajectory's sample, or
        the held configuration at rest."""
        if self._trajectory is not None:
            q, qd, qdd = self._trajectory(t)
        else:
            if self._hold_q is None:
                self._hold_q = np.asarray(q_now, float).copy()
            q, qd, qdd = self._hold_q, np.zeros_like(self._hold_q), np.zeros_like(self._hold_q)
        if self._in_model_order:
            return q, qd, qdd
        return self.model_order(q), self.model_order(qd), self.model_order(qdd)

    def _joint_target(self, t, q_now):
        """The body-twist target (:class:`VelocityTarget` / :class:`BodyPoseTarget`) of the joint sample at
        ``t`` through :func:`kinematics` and ``G``, ``Ġ`` (the path of :meth:`step_body_twists`)."""
        qm, qdm, qddm = self._joint_sample(t, q_now)
        key = (qm.tobytes(), qdm.tobytes(), qddm.tobytes())
        if self._joint_target_cache is not None and self._joint_target_cache[0] == key:
            return self._joint_target_cache[1]  # holding, or past the last point: the same target again
        d = kinematics(self.pinocchio, qm, qdm, dynamics=False, workspace=self._target_workspace)
        nu_d = d.nu
        nu_d_dot = d.G.dot(qddm) + d.G_dot.dot(qdm)
        target = (
            VelocityTarget(nu_d, nu_d_dot)
            if self.law == "velocity"
            else BodyPoseTarget(d.r, d.quat, nu_d, nu_d_dot)
        )
        self._joint_target_cache = (key, target)
        return target

    def step_body_twists(self, q, qd, t: float = 0.0) -> PipelineOutput:
        """Laws I/II as :meth:`step` computes them, the plain way: the coordinate-free law
        (:meth:`DacController.compute`) on the Pinocchio workspace with ``𝓐 = G H⁻¹ Gᵀ`` formed from
        ``G``, ``Ġ``, and the target's body poses, twists and rates from :func:`kinematics` at the joint
        sample. The same numbers as :meth:`step` to round-off at several times its cost (``ros-lnn bench
        control`` times both); kept as the reference the tests and the benchmark compare against."""
        if self._law_iii is not None:
            raise ConfigError("step_body_twists: laws I/II only (law III runs in joint coordinates)")
        qm, qdm = self._model_state(q, qd)
        data = kinematics(self.pinocchio, qm, qdm)
        ee_pos = end_effector_state(self.model, data, self.controller.end_effector)[0]
        target = self._joint_target(t, q)
        result = self.controller.compute(
            data, target, JointSpaceOperators(self.model, data, data.G, data.G_dot)
        )
        qdd_r = None
        if self.efforts.residual is not None:
            qdd_r = self.joint_reference_acceleration(data, result).take(self._to_configured)
        cmd = self.efforts(
            data, result.tau_c, q=np.asarray(q, float), qd=np.asarray(qd, float), G=data.G, qdd_r=qdd_r
        )
        limits = self._limited(cmd, q, qd)
        return PipelineOutput(result, cmd, data, ee_pos, None, limits=limits)

    def _step_joint_law(self, q, qd, qm, qdm, t: float) -> PipelineOutput:
        """A joint law (:mod:`ros_lnn.control.joint_laws`): its effort through the effort map, the
        compensated term at the desired state (feed-forward) or the measured one (gravity)."""
        law = self._joint_law
        assert law is not None
        sample = self._joint_sample(t, q) if law.feedforward else (qm, qdm, np.zeros_like(qdm))
        result, part, feedback, data, ee_pos = law.step(qm, qdm, *sample)
        desired = None
        if law.feedforward:
            desired = (sample[0].take(self._to_configured), sample[1].take(self._to_configured))
        qdd_r = sample[2].take(self._to_configured) if self.efforts.residual is not None else None
        cmd = self.efforts.from_generalized(part + feedback, q, qd, qdd_r, desired)
        cmd.feedback_part = feedback.take(self._to_configured)
        limits = self._limited(cmd, q, qd)
        return PipelineOutput(result, cmd, data, ee_pos, None, limits=limits)

    def step(self, q, qd, t: float = 0.0) -> PipelineOutput:
        qm, qdm = self._model_state(q, qd)
        if self._joint_law is not None:
            return self._step_joint_law(q, qd, qm, qdm, t)
        if self._law_iii is not None:
            target = self._ee_path(t) if self._ee_path is not None else self._ee_target
            result, gen, data, ee_pos, target = self._law_iii.step(qm, qdm, target, self.ee_attitude)
            if self._ee_path is None and self._ee_target is None:  # held where it was
                self._ee_target = target
            qdd_r = None
            if self.efforts.residual is not None:
                qdd_r = self._law_iii.joint_reference[1].take(self._to_configured)
            cmd = self.efforts.from_generalized(gen, q, qd, qdd_r)
            limits = self._limited(cmd, q, qd)
            return PipelineOutput(result, cmd, data, ee_pos, target.position, self._law_iii.guarded, limits)
        # laws I/II in joint coordinates: the target's kinematics once per trajectory sample
        law = self._law_joint_target
        assert law is not None  # laws I/II
        result, gen, data, ee_pos = law.step(qm, qdm, *self._joint_sample(t, q))
        qdd_r = None
        if self.efforts.residual is not None:
            qdd_r = law.joint_reference[1].take(self._to_configured)
        cmd = self.efforts.from_generalized(gen, q, qd, qdd_r)
        limits = self._limited(cmd, q, qd)
        return PipelineOutput(result, cmd, data, ee_pos, None, limits=limits)
