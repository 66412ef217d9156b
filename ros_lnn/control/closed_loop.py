"""The DAC pipeline closing the loop on a simulated arm as a robot runs it: sampled, efforts held.

:func:`sampled_loop` evaluates the controller once per sample period on the measured joint state and
holds its efforts over the period (zero-order hold), while the arm — the description's dynamics or a
:class:`ros_lnn.physics.multibody.pin_plant.Plant` that differs from it — integrates with RK4. This is
the ``dac_chain_sim`` + ``dac_controller`` loop over topics without the topics. Also here: joint paths
for end-effector curves (damped least-squares IK with a posture in the null space, for the laws that
track joint trajectories) and multi-sine joint excitations for recordings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..physics.multibody.pin_sim import rk4_step
from .pipeline import DacPipeline


@dataclass
class LoopLog:
    """Samples of a run: ``u[k]`` is the effort held over ``[t[k], t[k] + dt)``; ``ee``/``target`` the
    end-effector point and its target at ``t[k]`` (target NaN when the law has none); ``stopped[k]``:
    a joint limit violation is latched (the pipeline's stop acts)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    u: np.ndarray
    ee: np.ndarray
    target: np.ndarray
    residual_states: dict
    stopped: np.ndarray

    def tracking_rms(self, after_s: float = 1.0) -> float:
        """RMS of the end-effector position error after ``after_s`` seconds [m]."""
        sel = self.t >= after_s
        err = np.linalg.norm(self.ee[sel] - self.target[sel], axis=1)
        return float(np.sqrt(np.mean(err * err)))


def sampled_loop(
    pipe: DacPipeline,
    q0,
    duration: float,
    dt: float = 2e-3,
    qd0=None,
    dynamics: Callable | None = None,
    target: Callable[[float], np.ndarray] | None = None,
    before_step: Callable[[float], None] | None = None,
) -> LoopLog:
    """Run ``pipe`` on the arm for ``duration`` s at the sample period ``dt``; ``dynamics(q, q̇, u)``
    is the arm's forward dynamics (default the description's), ``target(t)`` the end-effector point to
    log the error against (default the law's own target); ``before_step(t)`` runs before each sample
    (a live parameter change, as ``ros2 param set`` makes one between two joint states)."""
    pm = pipe.pinocchio
    q = np.asarray(q0, float).copy()
    qd = np.zeros_like(q) if qd0 is None else np.asarray(qd0, float).copy()
    steps = int(round(duration / dt))
    n = len(q)
    log = {k: np.empty((steps, n)) for k in ("q", "qd", "u")}
    ee, goal = np.empty((steps, 3)), np.full((steps, 3), np.nan)
    states: dict = {}
    stopped = np.zeros(steps, bool)
    for i in range(steps):
        t = i * dt
        if before_step is not None:
            before_step(t)
        out = pipe.step(q, qd, t)
        stopped[i] = out.limits is not None and bool(out.limits.violation)
        u = out.efforts.effort
        log["q"][i], log["qd"][i], log["u"][i], ee[i] = q, qd, u, out.ee_position
        if target is not None:
            goal[i] = target(t)
        elif out.target_position is not None:
            goal[i] = out.target_position
        states[out.efforts.residual_state] = states.get(out.efforts.residual_state, 0) + 1
        qm, qdm = pipe.model_order(q), pipe.model_order(qd)
        um = pipe.model_order(u)
        qm, qdm = rk4_step(pm, qm, qdm, dt, lambda tk, qk, qdk: um, t, dynamics=dynamics)
        q, qd = qm.take(pipe._to_configured), qdm.take(pipe._to_configured)
    return LoopLog(np.arange(steps) * dt, log["q"], log["qd"], log["u"], ee, goal, states, stopped)


def end_effector_point(pipe: DacPipeline, q) -> np.ndarray:
    """The pipeline's end-effector point at the joint positions ``q`` (configured order)."""
    pm, fid = pipe.pinocchio, pipe.pinocchio.frame_ids["end_effector"]
    data = pm.pin.createData()
    pin.framesForwardKinematics(pm.pin, data, pipe.model_order(q))
    return data.oMf[fid].translation.copy()


def ik_joint_path(
    pipe: DacPipeline,
    path: Callable[[float], np.ndarray],
    duration: float,
    q0,
    knot_dt: float = 0.01,
    posture=None,
    posture_gain: float = 0.1,
    tol: float = 1e-10,
):
    """``(times, joint positions)`` whose end-effector point follows ``path(t)`` (a point per time),
    by damped least squares from ``q0``, with a pull toward ``posture`` (default ``q0``) in the task's
    null space so that redundant joints stay where they were. Configured joint order."""
    pm, fid = pipe.pinocchio, pipe.pinocchio.frame_ids["end_effector"]
    data = pm.pin.createData()
    q = pipe.model_order(q0).copy()
    rest = pipe.model_order(q0 if posture is None else posture)
    times = np.arange(0.0, duration + 0.5 * knot_dt, knot_dt)
    out = np.empty((len(times), len(q)))
    eye = np.eye(len(q))
    for k, t in enumerate(times):
        goal = np.asarray(path(t), float)
        for _ in range(50):
            pin.computeJointJacobians(pm.pin, data, q)
            pin.updateFramePlacements(pm.pin, data)
            err = goal - data.oMf[fid].translation
            J = pin.getFrameJacobian(pm.pin, data, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
            J_pinv = J.T @ np.linalg.inv(J @ J.T + 1e-8 * np.eye(3))
            step = J_pinv @ err + posture_gain * (eye - J_pinv @ J) @ (rest - q)
            q = q + step
            if np.linalg.norm(err) < tol and np.linalg.norm(step) < 1e-9:
                break
        out[k] = q
    return times, out.take(pipe._to_configured, axis=1)


def multisine_joint_path(
    center,
    amplitude,
    duration: float,
    seed: int,
    freq_hz=(0.08, 0.5),
    tones: int = 3,
    knot_dt: float = 0.02,
    ramp_s: float = 2.0,
):
    """``(times, positions)``: per joint ``tones`` sines of random frequency in ``freq_hz`` and phase,
    of total amplitude ``amplitude``, around ``center``, faded in over ``ramp_s`` (an excitation for a
    recording: it starts at rest at ``center``)."""
    rng = np.random.default_rng(seed)
    center, amplitude = np.asarray(center, float), np.asarray(amplitude, float)
    times = np.arange(0.0, duration + knot_dt, knot_dt)
    ramp = np.clip(times / ramp_s, 0.0, 1.0) ** 2
    q = np.tile(center, (len(times), 1))
    for j in range(len(center)):
        for _ in range(tones):
            w, phase = 2 * np.pi * rng.uniform(*freq_hz), rng.uniform(0, 2 * np.pi)
            q[:, j] += ramp * amplitude[j] / tones * (np.sin(w * times + phase) - np.sin(phase))
    return times, q


__all__ = ["LoopLog", "sampled_loop", "end_effector_point", "ik_joint_path", "multisine_joint_path"]
