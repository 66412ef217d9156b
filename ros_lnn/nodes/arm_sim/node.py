"""``arm_sim``: a simulated fully actuated arm with torque sensors (:mod:`ros_lnn.arm.simulation`), driven
by joint torques, so that ``dac_controller`` with an arm model closes its loop over real topics.

The true arm differs from its URDF as a real one does: inertial parameters drawn around the URDF's
(``perturb_*``, seed ``true_model_seed``), joint friction outside the models' law (``friction_scale``),
noise on the measured positions, velocities and torques. The defaults are ``ros-lnn bench
armcontrol``'s Panda, so a model identified there (or by ``ros-lnn train`` on a recording of this
node) is the model of this arm.

Subscribes ``effort_commands`` (Float64MultiArray, ``joints`` order: remap it to the controller's
``~/joint_effort_command``); publishes ``joint_states`` (position, velocity, effort = the measured joint
torque of the period that ended at the stamp) at ``rate_hz``. A command acts ``command_delay_steps``
periods after the state it was computed from (1: at the next tick, as a robot's torque interface
applies it); commands older than ``command_timeout_s`` count as zero. It keeps real time as
``dac_chain_sim`` does (stamps ``k · dt`` from the start, a late tick catches up by at most 10
periods, the stamps re-anchored beyond 0.25 s behind), or steps once per command with
``lockstep`` (simulated time on ``/clock``). With ``hold_until_command`` the arm stays still until the
first command that is not all zeros.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ...errors import ConfigError
from ..clocks import catch_up
from ..diagnostics import warn_throttled
from ..params import ParameterValues
from ..process import node_main
from ..qos import COMMAND_QOS, SENSOR_QOS, output_publisher, output_qos
from ..stamps import ns_to_stamp
from .parameters import PARAMETERS


def simulated_arm(values: dict):
    """The :class:`~ros_lnn.arm.simulation.SimulatedArm` of the parameter values."""
    from ...arm import simulation as sim
    from ...arm.rigid_body import ArmRigidBody

    text = values["robot_description"] or sim.panda_urdf().read_text()
    joints = values["joints"] or (sim.PANDA_JOINTS if not values["robot_description"] else [])
    if not joints:
        raise ConfigError("parameter joints: give the actuated joints of robot_description")
    arm = ArmRigidBody.from_urdf(text, tuple(joints))
    shares = (float(values["perturb_mass"]), float(values["perturb_com_m"]), float(values["perturb_inertia"]))
    truth = sim.perturbed_arm(arm, int(values["true_model_seed"]), *shares) if any(shares) else arm
    friction = sim.TrueFriction.like_a_real_arm(arm.effort_limits(), float(values["friction_scale"]))
    q0 = np.asarray(values["initial_positions"] or np.mean(arm.position_limits(), axis=0), dtype=float)
    if q0.shape != (arm.n,):
        raise ConfigError(f"parameter initial_positions needs {arm.n} values (joints {list(arm.joints)})")
    noise = sim.Noise(float(values["noise_q"]), float(values["noise_qd"]), float(values["noise_tau"]))
    plant = sim.ArmPlant(truth, friction, int(values["substeps"]))
    return sim.SimulatedArm(
        plant, q0, noise=noise, delay_steps=int(values["command_delay_steps"]), seed=int(values["noise_seed"])
    )


class ArmSim(ParameterValues, Node):
    def __init__(self, node_name: str = "arm_sim", **kwargs):
        super().__init__(node_name, **kwargs)
        self.values = PARAMETERS.attach(self)
        PARAMETERS.check(self)
        self.arm = simulated_arm(self.values)
        self.joints = list(self.arm.plant.truth.joints)
        n = len(self.joints)
        self.effort, self.effort_time = np.zeros(n), None
        self.dt = 1.0 / float(self.p("rate_hz"))
        self._dt_ns = round(self.dt * 1e9)
        self.steps = self.lagged = 0
        self._anchor_ns: int | None = None
        self.timeout = float(self.p("command_timeout_s"))
        self.braked = bool(self.p("hold_until_command"))
        self.pub = output_publisher(self.create_publisher, JointState, "joint_states")
        self.create_subscription(Float64MultiArray, "effort_commands", self._on_effort, SENSOR_QOS)
        self.clock_pub = None
        if self.p("lockstep"):
            self.clock_pub = self.create_publisher(ClockMsg, "/clock", output_qos(COMMAND_QOS))
            self._anchor_ns, self._last_step = 0, 0.0
            self._lockstep_timeout = float(self.p("lockstep_timeout_s"))
            self.create_timer(min(self._lockstep_timeout, 0.01), self._lockstep_idle)
        else:
            self.create_timer(self.dt, self._tick)
        self.get_logger().info(
            f"simulating {n} joints {self.joints} at {1 / self.dt:g} Hz"
            + (", lockstep" if self.clock_pub is not None else "")
        )

    def _on_effort(self, msg):
        u = np.asarray(msg.data, float)
        if u.size != len(self.joints) or not np.all(np.isfinite(u)):
            return warn_throttled(self, "effort", f"effort_commands needs {len(self.joints)} finite values")
        self.effort, self.effort_time = u, time.monotonic()
        self.braked = self.braked and not u.any()  # zeros (a watchdog's before any controller) keep them on
        if self.clock_pub is not None:
            self._step_once()

    def _tick(self):
        """Steps up to the node clock, publishing each state (as dac_chain_sim)."""
        now = self.get_clock().now().nanoseconds
        if self._anchor_ns is None:
            self._anchor_ns = now - self._dt_ns
        anchor, steps = catch_up(now, self._anchor_ns, self.steps, self._dt_ns)
        if (behind := round((now - anchor) / self._dt_ns) - self.steps) > steps:
            self.lagged += 1
            warn_throttled(
                self, "lagged", f"{behind} periods behind the clock: the simulated time runs slower"
            )
        self._anchor_ns = anchor
        for _ in range(steps):
            self._step_once()

    def _lockstep_idle(self):
        if time.monotonic() - self._last_step >= self._lockstep_timeout:
            self._step_once()

    def _step_once(self):
        fresh = self.effort_time is not None and time.monotonic() - self.effort_time <= self.timeout
        if not self.braked:
            self.arm.step(self.effort if fresh else np.zeros(len(self.joints)), self.dt)
        self.steps += 1
        assert self._anchor_ns is not None
        msg = JointState()
        msg.header.stamp = ns_to_stamp(self._anchor_ns + self.steps * self._dt_ns)
        msg.header.frame_id = self.p("frame_id")
        if self.clock_pub is not None:
            self._last_step = time.monotonic()
            self.clock_pub.publish(ClockMsg(clock=msg.header.stamp))
        q, qd = self.arm.measure()
        msg.name = self.joints
        msg.position, msg.velocity = q.tolist(), qd.tolist()
        msg.effort = self.arm.measured_torque().tolist()
        self.pub.publish(msg)


def main(argv=None) -> int:
    return node_main("arm_sim", ArmSim, argv)


if __name__ == "__main__":
    sys.exit(main())
