"""``sim``: a reference system from ros_lnn.physics run in real time.

Publishes ``joint_states`` at ``rate_hz`` (fixed-step RK4 between publishes; free joints' effort =
the applied force, servo joints' effort = the exact driving force Q_e) and the exact estimator outputs
on ``~/ground_truth/{driving_force,prediction,energy}`` (same layout as the estimator's topics).
Servo joints follow ``servo_commands`` (JointTrajectory, or Float64MultiArray positions tracked by a
critically damped servo) or, until a command arrives, a built-in excitation; ``~/servo_plan``
publishes the excitation's upcoming points (with accelerations). Applied forces on free joints come
from ``effort_commands`` (Float64MultiArray, ``effort_joints`` order). With ``publish_clock`` the node
publishes ``/clock`` (simulated time from 0) and stamps with it; run the other nodes with
``use_sim_time:=true``. The simulator itself paces on the steady clock.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..errors import ConfigError
from ..estimation.trajectory import CriticallyDampedServo, ServoPlan
from ..physics.excitation import make_excitation
from ..physics.stepper import FixedStepSimulator
from .diagnostics import warn_throttled
from .messages import driving_force_msg, energy_msg, prediction_msg
from .params import declare, param
from .process import init_ros, make_executor, spin
from .qos import COMMAND_QOS, SENSOR_QOS
from .stamps import duration_ns, ns_to_stamp, seconds_to_duration, stamp_ns

PARAMETERS = (
    ("system", "crane", "reference system: crane or chain"),
    ("crane_m1", 0.45, "crane: cart mass (kg)"),
    ("crane_m2", 0.13, "crane: bob mass (kg)"),
    ("crane_length", 1.5, "crane: string length (m)"),
    ("gravity", 9.8, "gravitational acceleration (m/s^2)"),
    ("chain_joints", ["joint_1", "joint_2", "joint_3"], "chain: joint names, base to tip"),
    ("chain_kinds", ["revolute", "revolute", "revolute"], "chain: revolute or prismatic, per joint"),
    ("chain_masses", [1.0, 1.0, 1.0], "chain: link masses (kg)"),
    ("chain_lengths", [1.0, 1.0, 1.0], "chain: link lengths (m)"),
    ("chain_inertias", [0.0, 0.0, 0.0], "chain: link inertias about the centre of mass (kg m^2); mass at the tip"),
    ("chain_servo_joints", ["joint_1"], "chain: which joints are servo (position-driven); the rest are free"),
    ("rate_hz", 500.0, "joint_states publish rate (Hz); one fixed step (or substeps) per publish"),
    ("substeps", 1, "RK4 steps per publish"),
    ("real_time_factor", 1.0, "simulated seconds per wall second"),
    ("initial_positions", [], "free joints' initial positions (free-joint order); empty = 0.3 rad/m each"),
    ("initial_velocities", [], "free joints' initial velocities; empty = zeros"),
    ("excitation", "multisine", "built-in servo motion until a command arrives: multisine, sweep or hold"),
    ("excitation_amplitude", [0.1, 0.08, 0.05], "multisine: amplitude per frequency; sweep: first entry"),
    ("excitation_frequencies_hz", [0.2, 0.45, 0.8], "multisine frequencies (Hz)"),
    ("sweep_f_low", 0.1, "sweep: lowest frequency (Hz)"),
    ("sweep_f_high", 1.0, "sweep: highest frequency (Hz)"),
    ("sweep_period_s", 20.0, "sweep: period of the frequency swing (s)"),
    ("servo_offset", [], "servo joints' rest positions; empty = zeros"),
    ("servo_command_type", "trajectory", "servo_commands type: trajectory, array (positions) or none"),
    ("servo_bandwidth", 20.0, "array commands: critically damped servo bandwidth (rad/s)"),
    ("effort_joints", [], "joint names of effort_commands entries; empty = the free joints in order"),
    ("effort_timeout_s", 0.5, "applied efforts fall back to zero this long after the last effort command; 0 = hold"),
    ("publish_clock", False, "publish /clock (simulated time from 0) and stamp with it"),
    ("publish_ground_truth", True, "publish ~/ground_truth/{driving_force,prediction,energy}"),
    ("plan_horizon_s", 0.5, "~/servo_plan horizon (upcoming excitation points with accelerations); 0 = off"),
    ("plan_dt_s", 0.02, "~/servo_plan point spacing (s)"),
    ("plan_rate_hz", 20.0, "~/servo_plan publish rate (Hz)"),
    ("frame_id", "", "frame_id of joint_states and ground truth"),
)


def build_system(node):
    p = lambda name: param(node, name)  # noqa: E731
    kind = p("system")
    if kind == "crane":
        from ..physics.crane import Crane

        return Crane(p("crane_m1"), p("crane_m2"), p("crane_length"), p("gravity"))
    if kind == "chain":
        from ..physics.chain import Link, PlanarChain

        joints = p("chain_joints")
        lists = {k: p(f"chain_{k}") for k in ("kinds", "masses", "lengths", "inertias")}
        bad = [k for k, v in lists.items() if len(v) != len(joints)]
        if bad:
            raise ConfigError(f"parameters chain_{', chain_'.join(bad)} need {len(joints)} entries, one per "
                              f"joint in chain_joints {joints}")
        links = [Link(j, lists["kinds"][i], float(lists["masses"][i]), float(lists["lengths"][i]), None,
                      float(lists["inertias"][i])) for i, j in enumerate(joints)]
        return PlanarChain(links, p("chain_servo_joints"), p("gravity"))
    raise ConfigError(f"parameter system='{kind}': use crane or chain")


class SimNode(Node):
    def __init__(self, node_name: str = "sim", **kwargs):
        super().__init__(node_name, **kwargs)
        for name, default, description in PARAMETERS:
            declare(self, name, default, description)
        p = self.p
        self.system = build_system(self)
        sysm = self.system
        self.free_names, self.servo_names = list(sysm.free_names), list(sysm.servo_names)
        n_f, n_e = len(self.free_names), len(self.servo_names)
        # Model order (free then servo) for the ground-truth layout, as the estimator publishes it.
        self.model_order = list(sysm.partition.free) + list(sysm.partition.servo)
        self.model_joints = [sysm.coordinate_names[i] for i in self.model_order]
        q0 = p("initial_positions") or [0.3] * n_f
        qd0 = p("initial_velocities") or [0.0] * n_f
        if len(q0) != n_f or len(qd0) != n_f:
            raise ConfigError(f"initial_positions/initial_velocities need {n_f} entries for free joints {self.free_names}")
        offset = p("servo_offset") or [0.0] * n_e
        self.excitation = make_excitation(p("excitation"), n_e, p("excitation_amplitude"),
                                          p("excitation_frequencies_hz"), p("sweep_f_low"), p("sweep_f_high"),
                                          p("sweep_period_s"), offset)
        self._sources = [(-np.inf, self.excitation)]   # (start time, t -> (q_e, q̇_e, q̈_e))
        self.sim = FixedStepSimulator(sysm, self.servo_source, q0, qd0)
        self.effort_joints = p("effort_joints") or list(self.free_names)
        bad = [j for j in self.effort_joints if j not in self.free_names]
        if bad:
            raise ConfigError(f"effort_joints {bad} are not free joints {self.free_names} (servo joints are "
                              "position-driven and take no effort)")
        self.effort_cols = [self.free_names.index(j) for j in self.effort_joints]
        self.last_effort_time = None
        self.dt = 1.0 / float(p("rate_hz"))
        self.substeps = max(int(p("substeps")), 1)
        self.counts = {"steps": 0, "overruns": 0, "skipped_publishes": 0, "invalid_command": 0, "commands": 0}

        self.js_pub = self.create_publisher(JointState, "joint_states", SENSOR_QOS)
        if p("publish_ground_truth"):
            self.gt_pubs = (self.create_publisher(JointState, "~/ground_truth/driving_force", SENSOR_QOS),
                            self.create_publisher(JointTrajectory, "~/ground_truth/prediction", SENSOR_QOS),
                            self.create_publisher(Float64MultiArray, "~/ground_truth/energy", SENSOR_QOS))
        else:
            self.gt_pubs = None
        self.clock_pub = self.create_publisher(ClockMsg, "/clock", SENSOR_QOS) if p("publish_clock") else None
        self.plan_pub = self.create_publisher(JointTrajectory, "~/servo_plan", COMMAND_QOS)
        kind = p("servo_command_type")
        if kind == "trajectory":
            self.create_subscription(JointTrajectory, "servo_commands", self._on_trajectory, COMMAND_QOS)
        elif kind == "array":
            self.create_subscription(Float64MultiArray, "servo_commands", self._on_array, COMMAND_QOS)
        self.create_subscription(Float64MultiArray, "effort_commands", self._on_effort, COMMAND_QOS)

        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.origin_ns = 0 if self.clock_pub else self.get_clock().now().nanoseconds
        self.wall_start = None          # set by the first tick, so start-up time is not "behind"
        self.k = 0
        self.create_timer(self.dt / float(p("real_time_factor")), self._tick, clock=steady)
        if float(p("plan_horizon_s")) > 0 and float(p("plan_rate_hz")) > 0 and n_e:
            self.create_timer(1.0 / float(p("plan_rate_hz")), self._publish_plan, clock=steady)
        self.get_logger().info(f"simulating {getattr(sysm, 'name', 'system')} at {1 / self.dt:.0f} Hz: free "
                               f"{self.free_names}, servo {self.servo_names}, excitation {p('excitation')}")

    def p(self, name):
        return param(self, name)

    # -- time -----------------------------------------------------------------------------------
    def sim_time_ns(self, t: float | None = None) -> int:
        return self.origin_ns + int(round((self.sim.t if t is None else t) * 1e9))

    def _to_sim_s(self, ns: int) -> float:
        return (ns - self.origin_ns) * 1e-9

    def _tick(self) -> None:
        rtf = float(self.p("real_time_factor"))
        if self.wall_start is None:
            self.wall_start = time.monotonic()
            if self.clock_pub is None:
                self.origin_ns = self.get_clock().now().nanoseconds    # stamps follow the node's clock
        due = int((time.monotonic() - self.wall_start) * rtf / self.dt)
        behind = due - self.k
        if behind > 200:
            # Far behind (the machine is too slow for rate_hz): let simulated time slow down.
            self.counts["overruns"] += 1
            warn_throttled(self, "overrun", f"simulator {behind} steps behind real time; rate_hz too high "
                                              "for this machine, simulated time runs slow", period_s=5.0)
            self.wall_start += (behind - 1) * self.dt / rtf
            behind = 1
        elif behind > 2:
            # Catch up: integrate the missed steps without publishing them (a gap in the stream).
            self.counts["skipped_publishes"] += behind - 1
            for _ in range(behind - 1):
                self.step(publish=False)
            behind = 1
        for _ in range(max(behind, 0)):
            self.step()

    def step(self, publish: bool = True) -> None:
        timeout = float(self.p("effort_timeout_s"))
        if self.last_effort_time is not None and timeout > 0 and time.monotonic() - self.last_effort_time > timeout:
            self.sim.Q_f = np.zeros_like(self.sim.Q_f)
            self.last_effort_time = None
        h = self.dt / self.substeps
        for _ in range(self.substeps):
            self.sim.step(h)
        self.k += 1
        self.sim.t = self.k * self.dt          # no drift from summing dt
        self.counts["steps"] += 1
        if publish:
            self._publish_step()

    def _publish_step(self) -> None:
        q, qd, out = self.sim.outputs()
        stamp = ns_to_stamp(self.sim_time_ns())
        frame = self.p("frame_id")
        if self.clock_pub is not None:
            self.clock_pub.publish(ClockMsg(clock=stamp))
        part = self.system.partition
        effort = np.empty(self.system.n)
        effort[list(part.free)] = self.sim.Q_f
        effort[list(part.servo)] = out["Q_e"]
        msg = JointState()
        msg.header.stamp, msg.header.frame_id = stamp, frame
        msg.name = list(self.system.coordinate_names)
        msg.position, msg.velocity, msg.effort = (q.tolist(), qd.tolist(), effort.tolist())
        self.js_pub.publish(msg)
        self.last = (stamp, q, qd, out)
        if self.gt_pubs is not None:
            o = self.model_order
            e = list(part.servo)
            self.gt_pubs[0].publish(driving_force_msg(stamp, frame, self.servo_names, q[e], qd[e], out["Q_e"]))
            self.gt_pubs[1].publish(prediction_msg(stamp, frame, self.model_joints, q[o], qd[o], out["qdd"][o],
                                                     out["Q"][o]))
            self.gt_pubs[2].publish(energy_msg(stamp, out))

    # -- servo motion ---------------------------------------------------------------------------
    def servo_source(self, t: float):
        """The servo motion in force at time t: the newest command that has started, else the one before."""
        for start, fn in reversed(self._sources):
            if t >= start:
                return fn(t)
        return self._sources[0][1](t)

    def _set_source(self, fn, start: float) -> None:
        """A new command takes over at ``start`` (splicing, as joint_trajectory_controller does)."""
        now = self.sim.t
        kept = [(s, f) for s, f in self._sources if s < start]
        # Drop sources superseded before now: only the last one starting at or before now still matters.
        started = [i for i, (s, _) in enumerate(kept) if s <= now]
        if started:
            kept = kept[started[-1]:]
        self._sources = kept + [(start, fn)]

    # -- inputs ---------------------------------------------------------------------------------
    def _bad_command(self, topic: str, detail: str) -> None:
        self.counts["invalid_command"] += 1
        warn_throttled(self, topic, f"{topic} rejected: {detail}")

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            cols = [list(msg.joint_names).index(j) for j in self.servo_names]
        except ValueError:
            return self._bad_command("servo_commands", f"joint_names {list(msg.joint_names)} lack {self.servo_names}")
        if not msg.points:
            return self._bad_command("servo_commands", "no points")
        base_ns = stamp_ns(msg.header.stamp) or self.sim_time_ns()
        k = len(msg.joint_names)
        try:
            pts = msg.points
            if any(len(pt.positions) != k or len(pt.velocities) not in (0, k) or len(pt.accelerations) not in (0, k)
                   for pt in pts):
                raise ValueError("every point needs one position (and velocity/acceleration, if any) per joint")
            times = [self._to_sim_s(base_ns + duration_ns(pt.time_from_start)) for pt in pts]
            has_v = all(len(pt.velocities) for pt in pts)
            has_a = has_v and all(len(pt.accelerations) for pt in pts)
            plan = ServoPlan(times, [[pt.positions[c] for c in cols] for pt in pts],
                             [[pt.velocities[c] for c in cols] for pt in pts] if has_v else None,
                             [[pt.accelerations[c] for c in cols] for pt in pts] if has_a else None)
        except ValueError as exc:
            return self._bad_command("servo_commands", str(exc))
        self.counts["commands"] += 1
        self._set_source(lambda t: _plan_state(plan, t), start=float(plan.times[0]))

    def _on_array(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        if data.size != len(self.servo_names) or not np.all(np.isfinite(data)):
            return self._bad_command("servo_commands", f"need {len(self.servo_names)} finite positions for "
                                                       f"{self.servo_names}, got {list(data)}")
        t = self.sim.t
        current = self._sources[-1][1]
        if not isinstance(current, CriticallyDampedServo):
            q_e, qd_e, _ = self.servo_source(t)
            current = CriticallyDampedServo(q_e, qd_e, t, float(self.p("servo_bandwidth")))
            self._set_source(current, start=t)
        current.command(t, data)
        self.counts["commands"] += 1

    def _on_effort(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        if data.size != len(self.effort_joints) or not np.all(np.isfinite(data)):
            return self._bad_command("effort_commands", f"need {len(self.effort_joints)} finite efforts for "
                                                        f"{self.effort_joints}, got {list(data)}")
        Q_f = self.sim.Q_f.copy()
        Q_f[self.effort_cols] = data
        self.sim.Q_f = Q_f
        self.last_effort_time = time.monotonic()

    def _publish_plan(self) -> None:
        """Upcoming points of the current servo motion, with accelerations (stamp = now)."""
        if self.wall_start is None:
            return                                 # stamps start with the first step
        horizon, dt = float(self.p("plan_horizon_s")), float(self.p("plan_dt_s"))
        t0 = self.sim.t
        msg = JointTrajectory()
        msg.header.stamp = ns_to_stamp(self.sim_time_ns(t0))
        msg.header.frame_id = self.p("frame_id")
        msg.joint_names = list(self.servo_names)
        for i in range(int(round(horizon / dt)) + 1):
            q, qd, qdd = self.servo_source(t0 + i * dt)
            pt = JointTrajectoryPoint(positions=[float(v) for v in q], velocities=[float(v) for v in qd],
                                      accelerations=[float(v) for v in qdd])
            pt.time_from_start = seconds_to_duration(i * dt)
            msg.points.append(pt)
        self.plan_pub.publish(msg)


def _plan_state(plan: ServoPlan, t: float):
    s = plan.sample(t)
    return s.q, s.qd, s.qdd


def main(argv=None) -> int:
    init_ros(argv if argv is not None else sys.argv)
    code = 0
    node = None
    try:
        node = SimNode()
        spin(node, make_executor(node.context))
    except ConfigError as exc:
        print(f"sim: error: {exc}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
