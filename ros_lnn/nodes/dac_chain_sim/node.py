"""``dac_chain_sim``: simulator of an arm (URDF) driven by joint efforts or port wrenches, so that
``dac_controller`` closes its loop over real topics.

Subscribes ``effort_commands`` (Float64MultiArray, ``joint_names`` order — remap it to the
controller's ``~/joint_effort_command``) and ``port_commands`` (Float64MultiArray, 6N port added on top,
e.g. the controller's ``~/port_command`` or a disturbance); publishes ``joint_states`` (position,
velocity, applied effort) at ``rate_hz``, integrating RK4 in joint coordinates on Pinocchio's ABA (the
joints cannot drift apart: nothing to stabilise). Commands older than ``command_timeout_s`` fall back to
zero. A constant disturbance wrench on the last body can be set with ``disturbance``. With
``hold_until_command`` the arm stays where it starts until the first effort command that is not all
zeros arrives (brakes on until the controller runs; an effort watchdog's zeros before any controller keep
them on), so a launch does not drop it while the nodes discover each other.

Plant mismatch (all off by default): the simulated arm can differ from the description the controller
uses as real arms do — joint friction (``friction_viscous``, ``friction_coulomb`` with the
``friction_coulomb_velocity`` of its tanh), a payload on a link (``payload_mass``, ``payload_offset``
from the link's centre of mass, ``payload_inertia``, ``payload_link``) and reflected rotor inertia
(``rotor_inertia``): :mod:`ros_lnn.physics.multibody.pin_plant`. Per-joint values follow ``joint_names``;
one value applies to every joint. The ``effort`` of ``joint_states`` is the effort held over the step
that ended at the message's stamp (what the joints received).

The simulated arm keeps real time, as hardware does: a late timer tick takes the RK4 steps it missed
(the efforts held, as a real plant holds its last command) and publishes each state. Stamps are the
simulated time of the state, as a robot's hardware clock stamps its samples: the node clock at the
start plus ``k · dt``, so timer jitter never reaches the stamps (it would reach any q̈ estimated from
them). A tick more than ``MAX_CATCH_UP`` periods late (a busy machine) takes that many: the simulated
time falls behind the clock and the stamps stay those of the physics; more than ``MAX_LAG_S`` (0.25 s)
behind, the stamps jump once to the clock (:func:`ros_lnn.nodes.clocks.catch_up`), counted in
``lagged`` and logged. A fast-swinging arm (one dropped with zero effort) is integrated in up to 4 RK4
sub-steps of at most 0.05 rad per joint.

With ``lockstep`` the simulation waits for its controller instead of keeping wall time, as a
simulator in lockstep does: each effort command advances one step, the simulated time (from 0) is
published on ``/clock`` and stamps the states; run the controller with ``use_sim_time:=true``. The
closed loop is then the same on any machine, however loaded (CI, a laptop). A command that does not come
within ``lockstep_timeout_s`` of wall time steps anyway (the effort held, or zero once stale), so a lost
message or a late controller never stalls the arm.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ...errors import RosLnnError
from ...physics.multibody.pin import PinocchioModel
from ...physics.multibody.pin_plant import Plant, PlantMismatch, mismatch_from_values
from ...physics.multibody.pin_sim import port_efforts, rk4_step
from ...shipped import demo_arm_path
from ..clocks import catch_up
from ..diagnostics import warn_throttled
from ..model_params import resolve_model_path
from ..params import ParameterValues
from ..process import node_main
from ..qos import COMMAND_QOS, SENSOR_QOS, output_publisher, output_qos
from ..stamps import ns_to_stamp
from .parameters import PARAMETERS

#: Largest friction rate × step the simulator takes (explicit RK4 diverges on a decaying mode past ≈ 2.8).
MAX_FRICTION_STEP = 2.5
#: Largest joint rotation (rad) in one RK4 sub-step, and the most sub-steps a step takes.
MAX_SUBSTEP_RAD = 0.05
MAX_SUBSTEPS = 4


class DacChainSim(ParameterValues, Node):
    def __init__(self, node_name: str = "dac_chain_sim", **kwargs):
        super().__init__(node_name, **kwargs)
        self.values = PARAMETERS.attach(self)
        PARAMETERS.check(self)
        from ...physics.multibody.build import load_model
        from ...physics.multibody.urdf import model_from_urdf

        p = self.p
        gravity = [float(g) for g in p("gravity")]
        if p("robot_description"):
            self.model = model_from_urdf(
                p("robot_description"), "parameter robot_description", gravity=gravity
            )
        else:
            self.model = load_model(resolve_model_path(p("model_path"), demo_arm_path))
            self.model.gravity = np.asarray(gravity, float)
        self.pinocchio = PinocchioModel(self.model)
        model_names = list(self.pinocchio.joint_names)
        self.joint_names = p("joint_names") or model_names
        if sorted(self.joint_names) != sorted(model_names):
            raise RosLnnError(f"joint_names {self.joint_names} must list the model's joints {model_names}")
        self._to_model = [self.joint_names.index(j) for j in model_names]
        self.plant = Plant(self.model, self._mismatch(p))
        if self.plant.mismatch.active:
            self.get_logger().info(f"plant differs from the description: {self.plant.mismatch}")
        self._from_model = [model_names.index(j) for j in self.joint_names]
        q0 = np.array(p("initial_positions") or [0.0] * len(model_names), float)
        self.q, self.qd = q0[self._to_model], np.zeros(len(model_names))
        self.effort = np.zeros(len(model_names))
        self.port = np.zeros(6 * self.model.n_bodies)
        self.disturbance = np.array(p("disturbance"), float)
        self.effort_time = self.port_time = None
        self.dt = 1.0 / float(p("rate_hz"))
        self._check_friction_step()
        self._dt_ns = round(self.dt * 1e9)
        self.counts = dict.fromkeys(("steps", "non_finite_state", "parameter_refused"), 0)
        self.steps = 0  # RK4 steps taken: the simulated time is steps · dt
        self.lagged = 0  # ticks that left the simulated time behind the clock (clocks.catch_up)
        self._stamp_anchor_ns: int | None = None  # node clock at simulated time 0
        self.timeout = float(p("command_timeout_s"))
        self.braked = bool(p("hold_until_command"))
        self.clock_pub = None
        self.pub = output_publisher(self.create_publisher, JointState, "joint_states")
        self.create_subscription(Float64MultiArray, "effort_commands", self._on_effort, SENSOR_QOS)
        self.create_subscription(Float64MultiArray, "port_commands", self._on_port, SENSOR_QOS)
        self.lockstep = bool(p("lockstep"))
        if self.lockstep:
            self.clock_pub = self.create_publisher(ClockMsg, "/clock", output_qos(COMMAND_QOS))
            self._stamp_anchor_ns = 0  # simulated time from 0, as /clock
            self._lockstep_timeout = float(p("lockstep_timeout_s"))
            self._last_step = 0.0  # time.monotonic() of the last step
            self.create_timer(min(self._lockstep_timeout, 0.01), self._lockstep_idle)
        else:
            self.create_timer(self.dt, self._step)

    def _check_friction_step(self) -> None:
        """Friction stiffer than RK4 at ``rate_hz`` can integrate is refused at start-up, in one line."""
        rate = self.plant.friction_rate(self.q)
        if rate * self.dt > MAX_FRICTION_STEP:
            raise RosLnnError(
                f"friction_viscous / friction_coulomb: the friction stops the arm at {rate:.3g} 1/s, too "
                f"stiff for one RK4 step at rate_hz {1 / self.dt:g} (rate × step {rate * self.dt:.3g} > "
                f"{MAX_FRICTION_STEP}); lower the friction (or friction_coulomb_velocity's slope) or raise "
                "rate_hz"
            )

    def _mismatch(self, p) -> PlantMismatch:
        """The plant mismatch parameters, per-joint lists taken from joint_names order to the model's."""

        def per_joint(name):
            values = [float(v) for v in p(name)]
            if len(values) > 1:
                if len(values) != len(self.joint_names):
                    raise RosLnnError(
                        f"parameter {name} has {len(values)} values; give one, or one per "
                        "joint "
                        f"{self.joint_names}"
                    )
                values = [values[i] for i in self._to_model]
            return tuple(values)

        link = p("payload_link")
        names = [b.name for b in self.model.bodies]
        if link and link not in names:
            raise RosLnnError(
                f"parameter payload_link '{link}' is not a link of '{self.model.name}' ({names})"
            )
        return mismatch_from_values(
            dict(
                viscous=per_joint("friction_viscous"),
                coulomb=per_joint("friction_coulomb"),
                coulomb_velocity=float(p("friction_coulomb_velocity")),
                payload_mass=float(p("payload_mass")),
                payload_offset=tuple(float(v) for v in p("payload_offset")),
                payload_inertia=tuple(float(v) for v in p("payload_inertia")),
                payload_link=names.index(link) if link else -1,
                rotor_inertia=per_joint("rotor_inertia"),
            )
        )

    def _on_effort(self, msg):
        u = np.asarray(msg.data, float)
        if u.size != len(self.joint_names) or not np.all(np.isfinite(u)):
            return warn_throttled(
                self, "effort", f"effort_commands needs {len(self.joint_names)} finite values"
            )
        self.effort, self.effort_time = u[self._to_model], time.monotonic()
        self.braked = self.braked and not u.any()  # zeros (a watchdog's before any controller) keep them on
        if self.lockstep:
            self._step_once()

    def _on_port(self, msg):
        tau = np.asarray(msg.data, float)
        if tau.size != self.port.size or not np.all(np.isfinite(tau)):
            return warn_throttled(self, "port", f"port_commands needs {self.port.size} finite values")
        self.port, self.port_time = tau, time.monotonic()

    def _fresh(self, stamp):
        return stamp is not None and time.monotonic() - stamp <= self.timeout

    def effort_function(self):
        """``(efforts(t, q, q̇), applied joint efforts)``: the joint efforts held over the step, plus the
        port commands and the disturbance mapped to the joints (``Gᵀ τ`` at every RK4 stage)."""
        n = self.model.n_bodies
        effort = self.effort if self._fresh(self.effort_time) else np.zeros_like(self.effort)
        extra = self.port if self._fresh(self.port_time) else np.zeros(6 * n)
        extra = extra.copy()
        extra[3 * (n - 1) : 3 * n] += self.disturbance[:3]
        extra[3 * n + 3 * (n - 1) :] += self.disturbance[3:]
        if not extra.any():
            return (lambda t, q, qd: effort), effort
        return (lambda t, q, qd: effort + port_efforts(self.pinocchio, q, extra)), effort

    @property
    def t(self) -> float:
        """Simulated time [s]."""
        return self.steps * self.dt

    def _step(self):
        """Steps up to the node clock (module docstring), publishing each state."""
        now = self.get_clock().now().nanoseconds
        if self._stamp_anchor_ns is None:
            self._stamp_anchor_ns = now - self._dt_ns  # the first tick takes one step
        anchor, steps = catch_up(now, self._stamp_anchor_ns, self.steps, self._dt_ns)
        behind = round((now - anchor) / self._dt_ns) - self.steps - steps
        if behind > 0:
            self.lagged += 1
            warn_throttled(
                self,
                "lagged",
                f"{behind + steps} steps behind the clock: this machine cannot simulate at "
                f"{1 / self.dt:g} Hz now; the simulated time runs slower"
                + (
                    f" (the stamps jumped {(anchor - self._stamp_anchor_ns) * 1e-9:.2f} s to the clock)"
                    if anchor != self._stamp_anchor_ns
                    else ""
                ),
            )
        self._stamp_anchor_ns = anchor
        for _ in range(steps):  # an early tick (nothing due) waits for the next
            self._step_once()

    def _lockstep_idle(self):
        """Lockstep: one step when no command came for ``lockstep_timeout_s`` (the first state too)."""
        if time.monotonic() - self._last_step >= self._lockstep_timeout:
            self._step_once()

    def _step_once(self):
        efforts, effort = self.effort_function()
        if not self.braked:
            fd = self.plant.forward_dynamics
            # sub-steps so that no joint turns more than MAX_SUBSTEP_RAD in one: a fast-swinging arm (a
            # dropped one) stays on its physics instead of RK4 feeding it energy
            n = min(MAX_SUBSTEPS, max(1, math.ceil(float(np.abs(self.qd).max()) * self.dt / MAX_SUBSTEP_RAD)))
            h, q, qd = self.dt / n, self.q, self.qd
            with np.errstate(all="ignore"):
                for k in range(n):
                    q, qd = rk4_step(self.pinocchio, q, qd, h, efforts, self.t + k * h, dynamics=fd)
            if np.all(np.isfinite(q)) and np.all(np.isfinite(qd)):
                self.q, self.qd = q, qd
            else:  # efforts or a disturbance the physics cannot follow: stopped where it was
                self.qd = np.zeros_like(self.qd)
                self.counts["non_finite_state"] += 1
                warn_throttled(
                    self,
                    "non_finite",
                    "the arm's state went non-finite (efforts, disturbance or friction the integration "
                    "cannot follow): held at its last finite state, at rest",
                )
        self.steps += 1
        self.counts["steps"] += 1
        q, qd = self.q, self.qd
        msg = JointState()
        assert self._stamp_anchor_ns is not None  # set by _step
        msg.header.stamp = ns_to_stamp(self._stamp_anchor_ns + self.steps * self._dt_ns)
        if self.clock_pub is not None:
            self._last_step = time.monotonic()
            self.clock_pub.publish(ClockMsg(clock=msg.header.stamp))
        msg.name = list(self.joint_names)
        msg.position = [float(x) for x in q[self._from_model]]
        msg.velocity = [float(x) for x in qd[self._from_model]]
        msg.effort = [float(x) for x in effort[self._from_model]]
        self.pub.publish(msg)


def main(argv=None) -> int:
    return node_main("dac_chain_sim", DacChainSim, argv)


if __name__ == "__main__":
    sys.exit(main())
