"""The arm flow's closed loop without ROS: ``dac_controller``'s pipeline on a simulated Panda
(:mod:`ros_lnn.arm.simulation`), one control period at a time — what ``ros-lnn bench armcontrol``
measures and its DDS loop is held against.

The certain models compared: the URDF's nominal rigid body (no friction), an identified arm model
(:func:`ros_lnn.arm.compensation.certain_model` and its friction + residual), and the simulator's true
parameters with its true friction (:class:`TrueCompensation`). The gains (:data:`KP`, :data:`KD`) are
what a Panda set-up at 500 Hz runs: moderate, so that the feed-forward carries the motion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..arm.simulation import SimulatedArm, TrueFriction
from ..arm.tracking import Program
from ..control.pipeline import DacPipeline, JointTrajectorySampler

#: Joint PD of the benchmark [N m/rad], [N m s/rad], panda_joint1 … 7: moderate stiffness (a 200 N m/rad
#: shoulder: 1 N m of model error is 5 mrad), damping each joint as far as the sampled loop allows. At
#: 500 Hz the damping is bounded by the arm's lightest directions (the wrist, and joints 1 and 3 when
#: they align): dt · λ_max(M⁻¹ K_d) ≤ 0.42 over the workspace, so the loop stays stable with commands
#: up to four periods late (a loaded machine's DDS loop), not only with the one-period delay.
KP = (200.0, 200.0, 200.0, 200.0, 30.0, 30.0, 10.0)
KD = (2.5, 20.0, 2.5, 6.0, 0.4, 0.4, 0.1)
RATE_HZ = 500.0
EE_LINK = "panda_hand_tcp"


class TrueCompensation:
    """The simulator's own friction as the compensated term (the true-parameter controller)."""

    def __init__(self, friction: TrueFriction):
        self.friction = friction

    def reset(self) -> None:
        pass

    def torque(self, q, qd) -> np.ndarray:
        return self.friction.torque(np.asarray(q, float), np.asarray(qd, float))


def feedforward_pipeline(model, compensation=None, kp=KP, kd=KD) -> DacPipeline:
    """Feed-forward + PD on ``model`` (a multibody model) with ``compensation``."""
    return DacPipeline(
        model, law="feedforward_pd", ee_link=EE_LINK, joint_kp=kp, joint_kd=kd, compensation=compensation
    )


@dataclass
class TrackingRun:
    t: np.ndarray  # (K,) [s]
    q_d: np.ndarray  # (K, n) desired
    q: np.ndarray  # (K, n) measured
    effort: np.ndarray  # (K, n) commanded
    feedback: np.ndarray  # (K, n) its PD part

    def rms_mrad(self, select=None) -> float:
        e = self.q - self.q_d if select is None else (self.q - self.q_d)[select]
        return 1e3 * float(np.sqrt(np.mean(e**2)))

    def rms_per_joint_mrad(self) -> np.ndarray:
        return 1e3 * np.sqrt(np.mean((self.q - self.q_d) ** 2, axis=0))

    def feedforward_share(self) -> float:
        """Σ|feed-forward| / (Σ|feed-forward| + Σ|PD|) over joints and samples."""
        ff = np.abs(self.effort - self.feedback).sum()
        return float(ff / (ff + np.abs(self.feedback).sum()))


def track(
    pipeline: DacPipeline, arm: SimulatedArm, program: Program, rate_hz: float = RATE_HZ
) -> TrackingRun:
    """Run ``program`` (from t = 0) under ``pipeline`` on ``arm`` at ``rate_hz``: each period the arm is
    measured, the pipeline steps at that time and the arm moves one period under the command."""
    pipeline.set_joint_trajectory(program.times, program.q, program.qd, program.qdd)
    pipeline.reset_compensation()
    sampler = JointTrajectorySampler(program.times, program.q, program.qd, program.qdd)
    dt = 1.0 / rate_hz
    steps = int(round(program.duration * rate_hz)) + 1
    n = len(program.q[0])
    out = {k: np.empty((steps, n)) for k in ("q_d", "q", "effort", "feedback")}
    t = np.arange(steps) * dt
    for k in range(steps):
        q, qd = arm.measure()
        step = pipeline.step(q, qd, t[k])
        effort = step.efforts.effort
        out["q_d"][k] = sampler(t[k])[0]
        out["q"][k], out["effort"][k] = q, effort
        fb = step.efforts.feedback_part
        out["feedback"][k] = fb if fb is not None else 0.0
        arm.step(effort, dt)
    return TrackingRun(t, out["q_d"], out["q"], out["effort"], out["feedback"])
