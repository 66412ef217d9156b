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
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.serialization import deserialize_message
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ...errors import ConfigError
from ...estimation.trajectory import CriticallyDampedServo
from ...physics.excitation import make_excitation
from ...physics.stepper import FixedStepSimulator
from ..diagnostics import CountWindow, diagnostic_status, guarded, status_name, warn_throttled
from ..joint_state_reader import trajectory_size
from ..messages import (
    ENERGY_FIELDS,
    ENERGY_TYPE,
    PREDICTION_TYPE,
    driving_force_msg,
    energy_values_msg,
    outputs_finite,
    prediction_msg,
    report_interfaces,
)
from ..params import ParameterValues
from ..process import node_main
from ..qos import COMMAND_QOS, output_publisher
from ..serialized import PackedMessages, PackersByFrame
from ..stamps import ns_to_stamp, seconds_to_duration, stamp_ns
from ..trajectory_command import command_bound_problem
from .commands import plan_state, servo_plan
from .parameters import PARAMETERS, build_system

#: Bigger array or effort commands are refused before they are read.
MAX_ARRAY_COMMAND_BYTES = 4096


class SimNode(ParameterValues, Node):
    def __init__(self, node_name: str = "sim", **kwargs):
        super().__init__(node_name, **kwargs)
        self.counts = {
            "steps": 0,
            "published": 0,
            "overruns": 0,
            "skipped_publishes": 0,
            "invalid_command": 0,
            "commands": 0,
            "non_finite_state": 0,
            "internal_error": 0,
            "parameter_refused": 0,
        }
        self.window = CountWindow()
        self.values = values = PARAMETERS.attach(self)
        PARAMETERS.check(self)
        try:
            self.system = build_system(values)
        except ValueError as exc:
            raise ConfigError(f"the {values['system']} parameters do not make a system: {exc}") from None
        sysm = self.system
        self.free_names, self.servo_names = list(sysm.free_names), list(sysm.servo_names)
        n_f, n_e = len(self.free_names), len(self.servo_names)
        # Model order (free then servo) for the ground-truth layout, as the estimator publishes it.
        self.model_order = list(sysm.partition.free) + list(sysm.partition.servo)
        self.model_joints = [sysm.coordinate_names[i] for i in self.model_order]
        q0 = values["initial_positions"] or [0.3] * n_f
        qd0 = values["initial_velocities"] or [0.0] * n_f
        if len(q0) != n_f or len(qd0) != n_f:
            raise ConfigError(
                f"initial_positions/initial_velocities need {n_f} entries for free joints {self.free_names}"
            )
        offset = values["servo_offset"] or [0.0] * n_e
        if len(offset) != n_e:
            raise ConfigError(f"servo_offset needs {n_e} entries for servo joints {self.servo_names}")
        try:
            self.excitation = make_excitation(
                values["excitation"],
                n_e,
                values["excitation_amplitude"],
                values["excitation_frequencies_hz"],
                values["sweep_f_low"],
                values["sweep_f_high"],
                values["sweep_period_s"],
                offset,
            )
        except ValueError as exc:
            raise ConfigError(f"excitation parameters: {exc}") from None
        self._sources = [(-np.inf, self.excitation)]  # (start time, t -> (q_e, q̇_e, q̈_e))
        self.sim = FixedStepSimulator(sysm, self.servo_source, q0, qd0)
        self._published_state = (self.sim.q_f.copy(), self.sim.qd_f.copy())
        self.effort_joints = values["effort_joints"] or list(self.free_names)
        bad = [j for j in self.effort_joints if j not in self.free_names]
        if bad:
            raise ConfigError(
                f"effort_joints {bad} are not free joints {self.free_names} (servo joints are "
                "position-driven and take no effort)"
            )
        self.effort_cols = [self.free_names.index(j) for j in self.effort_joints]
        self.last_effort_time: float | None = None
        self._packers = PackersByFrame(self._make_packer)  # frame_id -> the per-step messages' layout
        self.dt = 1.0 / values["rate_hz"]
        self.substeps = values["substeps"]

        report_interfaces(self.get_logger())
        pub = self.create_publisher
        self.js_pub = output_publisher(pub, JointState, "joint_states")
        self.gt_pubs: tuple[Publisher[Any], Publisher[Any], Publisher[Any]] | None
        if values["publish_ground_truth"]:
            self.gt_pubs = (
                output_publisher(pub, JointState, "~/ground_truth/driving_force"),
                output_publisher(pub, PREDICTION_TYPE, "~/ground_truth/prediction"),
                output_publisher(pub, ENERGY_TYPE, "~/ground_truth/energy"),
            )
        else:
            self.gt_pubs = None
        self.clock_pub = (
            output_publisher(pub, ClockMsg, "/clock", COMMAND_QOS) if values["publish_clock"] else None
        )
        self.plan_pub = output_publisher(pub, JointTrajectory, "~/servo_plan", COMMAND_QOS)
        self.diagnostics_pub = pub(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        kind = values["servo_command_type"]
        if kind == "trajectory":
            self.create_subscription(
                JointTrajectory, "servo_commands", self._on_trajectory, COMMAND_QOS, raw=True
            )
        elif kind == "array":
            self.create_subscription(
                Float64MultiArray, "servo_commands", self._on_array, COMMAND_QOS, raw=True
            )
        self.create_subscription(Float64MultiArray, "effort_commands", self._on_effort, COMMAND_QOS, raw=True)

        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.origin_ns = 0 if self.clock_pub else self.get_clock().now().nanoseconds
        self.wall_start: float | None = None  # set by the first tick, so start-up time is not "behind"
        self.k = 0
        self.create_timer(self.dt / values["real_time_factor"], self._tick, clock=steady)
        if values["plan_horizon_s"] > 0 and values["plan_rate_hz"] > 0 and n_e:
            self.create_timer(1.0 / values["plan_rate_hz"], self._publish_plan, clock=steady)
        self.window.start(self.counts)
        self.create_timer(values["diagnostics_period_s"], self._publish_diagnostics, clock=steady)
        self.get_logger().info(
            f"simulating {getattr(sysm, 'name', 'system')} at {1 / self.dt:.0f} Hz: free "
            f"{self.free_names}, servo {self.servo_names}, excitation {values['excitation']}"
        )

    # -- time -----------------------------------------------------------------------------------
    def sim_time_ns(self, t: float | None = None) -> int:
        return self.origin_ns + int(round((self.sim.t if t is None else t) * 1e9))

    def _to_sim_s(self, ns: int) -> float:
        return (ns - self.origin_ns) * 1e-9

    @guarded("step")
    def _tick(self) -> None:
        rtf = self.values["real_time_factor"]
        if self.wall_start is None:
            self.wall_start = time.monotonic()
            if self.clock_pub is None:
                self.origin_ns = self.get_clock().now().nanoseconds  # stamps follow the node's clock
        due = int((time.monotonic() - self.wall_start) * rtf / self.dt)
        behind = due - self.k
        if behind > 200:
            # Far behind (the machine is too slow for rate_hz): let simulated time slow down.
            self.counts["overruns"] += 1
            warn_throttled(
                self,
                "overrun",
                f"simulator {behind} steps behind real time; rate_hz too high "
                "for this machine, simulated time runs slow",
                period_s=5.0,
            )
            self.wall_start += (behind - 1) * self.dt / rtf
            if self.clock_pub is None:  # stamps on the node clock: one jump, not a drift behind it
                self.origin_ns += round((behind - 1) * self.dt * 1e9)
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
        timeout = self.values["effort_timeout_s"]
        if (
            self.last_effort_time is not None
            and timeout > 0
            and time.monotonic() - self.last_effort_time > timeout
        ):
            self.sim.Q_f = np.zeros_like(self.sim.Q_f)
            self.last_effort_time = None
        h = self.dt / self.substeps
        before = (self.sim.q_f.copy(), self.sim.qd_f.copy())
        with np.errstate(all="ignore"):
            for _ in range(self.substeps):
                self.sim.step(h)
        self.k += 1
        self.sim.t = self.k * self.dt  # no drift from summing dt
        if not (np.isfinite(self.sim.q_f).all() and np.isfinite(self.sim.qd_f).all()):
            self._recover(*before)
        self.counts["steps"] += 1
        if publish:
            self._publish_step()

    def _recover(self, q_f, qd_f) -> None:
        """The state went non-finite (a command or effort the physics cannot follow): back to the last
        finite state, efforts zeroed, servo joints held where they were."""
        self.counts["non_finite_state"] += 1
        self.sim.q_f, self.sim.qd_f = q_f, qd_f
        self.sim.Q_f = np.zeros_like(self.sim.Q_f)
        t = self.sim.t
        with np.errstate(all="ignore"):
            q_e = np.asarray(self.servo_source(t)[0], dtype=float)
        if not np.isfinite(q_e).all():
            q_e = np.asarray(self.excitation(t)[0], dtype=float)
        zeros = np.zeros_like(q_e)
        self._sources = [(-np.inf, lambda _t: (q_e.copy(), zeros.copy(), zeros.copy()))]
        warn_throttled(
            self,
            "non_finite_state",
            "the simulated state went non-finite (NaN/inf) after a command "
            "or effort: restored the last state, holding the servo joints",
        )

    def _publish_step(self) -> None:
        with np.errstate(all="ignore"):
            q, qd, out = self.sim.outputs()
        stamp = ns_to_stamp(self.sim_time_ns())
        frame = self.values["frame_id"]
        if self.clock_pub is not None:
            self.clock_pub.publish(ClockMsg(clock=stamp))
        part = self.system.partition
        effort = np.empty(self.system.n)
        effort[list(part.free)] = self.sim.Q_f
        effort[list(part.servo)] = out["Q_e"]
        if not (
            np.isfinite(q).all()
            and np.isfinite(qd).all()
            and np.isfinite(effort).all()
            and outputs_finite(out)
        ):
            # finite but so large that energies or forces overflow: back to the last published state
            self._recover(*self._published_state)
            return
        self._published_state = (self.sim.q_f.copy(), self.sim.qd_f.copy())
        o = self.model_order
        sample = np.concatenate(
            (
                q,
                qd,
                effort,
                q[o],
                qd[o],
                out["qdd"][o],
                out["Q"][o],
                out["Q_e"],
                [out[k] for k in ENERGY_FIELDS],
            )
        )
        messages = self._packers[frame].messages(stamp.sec, stamp.nanosec, sample)
        self.js_pub.publish(messages[0])
        self.counts["published"] += 1
        self.last = (stamp, q, qd, out)
        if self.gt_pubs is not None:
            for publisher, message in zip(self.gt_pubs, messages[1:]):
                publisher.publish(message)

    def _make_packer(self, frame: str) -> PackedMessages:
        """joint_states and the ground truth for one frame_id, serialized from one sample vector:
        q, q̇, effort (system order), then q, q̇, q̈, Q in model order (free joints first), Q_e and the
        seven energy values."""
        n, n_f = self.system.n, len(self.free_names)
        names = list(self.system.coordinate_names)
        q, qd, effort = slice(0, n), slice(n, 2 * n), slice(2 * n, 3 * n)
        mq, mqd, mqdd, mQ = (slice(k * n, (k + 1) * n) for k in (3, 4, 5, 6))
        n_e = n - n_f
        servo = (slice(3 * n + n_f, 4 * n), slice(4 * n + n_f, 5 * n), slice(7 * n, 7 * n + n_e))
        energy = slice(7 * n + n_e, 7 * n + n_e + len(ENERGY_FIELDS))

        def joint_states(stamp, s):
            msg = JointState(name=names, position=s[q].tolist(), velocity=s[qd].tolist())
            msg.header.stamp, msg.header.frame_id, msg.effort = stamp, frame, s[effort].tolist()
            return msg

        builders = [joint_states]
        if self.gt_pubs is not None:
            joints, servo_names = self.model_joints, self.servo_names
            builders += [
                lambda st, s: driving_force_msg(st, frame, servo_names, *(s[i] for i in servo)),
                lambda st, s: prediction_msg(st, frame, joints, s[mq], s[mqd], s[mqdd], s[mQ], n_f),
                lambda st, s: energy_values_msg(st, s[energy], frame),
            ]
        return PackedMessages(builders, energy.stop)

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
            kept = kept[started[-1] :]
        self._sources = kept + [(start, fn)]

    # -- inputs ---------------------------------------------------------------------------------
    def _bad_command(self, topic: str, detail: str) -> None:
        self.counts["invalid_command"] += 1
        warn_throttled(self, topic, f"{topic} rejected: {detail}")

    @guarded("servo_commands")
    def _on_trajectory(self, raw: bytes) -> None:
        size = trajectory_size(raw)
        limit = self.values["max_command_points"]
        if size is not None and size[1] > limit:
            return self._bad_command(
                "servo_commands", f"{size[1]} points, more than max_command_points ({limit})"
            )
        if size is None and len(raw) > 256 * limit:
            return self._bad_command(
                "servo_commands", f"{len(raw)} bytes, more than max_command_points can need"
            )
        try:
            msg = deserialize_message(raw, JointTrajectory)
        except Exception as exc:  # noqa: BLE001 - rclpy raises several types for bytes it cannot read
            return self._bad_command("servo_commands", f"not a JointTrajectory ({type(exc).__name__})")
        base_ns = stamp_ns(msg.header.stamp) or self.sim_time_ns()
        try:
            plan = servo_plan(msg, self.servo_names, lambda ns: self._to_sim_s(base_ns + ns))
        except ValueError as exc:
            return self._bad_command("servo_commands", str(exc))
        self.counts["commands"] += 1
        self._set_source(lambda t: plan_state(plan, t), start=float(plan.times[0]))

    def _read_array(self, topic: str, raw: bytes, size: int):
        if len(raw) > MAX_ARRAY_COMMAND_BYTES:
            return self._bad_command(topic, f"{len(raw)} bytes for {size} values")
        try:
            data = np.asarray(deserialize_message(raw, Float64MultiArray).data, dtype=float)
        except Exception as exc:  # noqa: BLE001 - rclpy raises several types for bytes it cannot read
            return self._bad_command(topic, f"not a Float64MultiArray ({type(exc).__name__})")
        if data.size != size or not np.all(np.isfinite(data)):
            return self._bad_command(
                topic, f"need {size} finite values, got {np.array2string(data, threshold=8)}"
            )
        return data

    @guarded("servo_commands")
    def _on_array(self, raw: bytes) -> None:
        data = self._read_array("servo_commands", raw, len(self.servo_names))
        if data is None:
            return
        beyond = command_bound_problem(data)
        if beyond:
            return self._bad_command("servo_commands", beyond)
        t = self.sim.t
        current = self._sources[-1][1]
        if not isinstance(current, CriticallyDampedServo):
            q_e, qd_e, _ = self.servo_source(t)
            current = CriticallyDampedServo(q_e, qd_e, t, self.values["servo_bandwidth"])
            self._set_source(current, start=t)
        current.command(t, data)
        self.counts["commands"] += 1

    @guarded("effort_commands")
    def _on_effort(self, raw: bytes) -> None:
        data = self._read_array("effort_commands", raw, len(self.effort_joints))
        if data is None:
            return
        Q_f = self.sim.Q_f.copy()
        Q_f[self.effort_cols] = data
        self.sim.Q_f = Q_f
        self.last_effort_time = time.monotonic()

    @guarded("servo_plan")
    def _publish_plan(self) -> None:
        """Upcoming points of the current servo motion, with accelerations (stamp = now)."""
        if self.wall_start is None:
            return  # stamps start with the first step
        horizon, dt = self.values["plan_horizon_s"], self.values["plan_dt_s"]
        t0 = self.sim.t
        msg = JointTrajectory()
        msg.header.stamp = ns_to_stamp(self.sim_time_ns(t0))
        msg.header.frame_id = self.values["frame_id"]
        msg.joint_names = list(self.servo_names)
        for i in range(int(round(horizon / dt)) + 1):
            q, qd, qdd = self.servo_source(t0 + i * dt)
            pt = JointTrajectoryPoint(
                positions=[float(v) for v in q],
                velocities=[float(v) for v in qd],
                accelerations=[float(v) for v in qdd],
            )
            pt.time_from_start = seconds_to_duration(i * dt)
            msg.points.append(pt)
        self.plan_pub.publish(msg)

    def achieved_rate_hz(self, window: dict) -> float:
        return window["published"] / window["window_s"] if window["window_s"] > 0 else 0.0

    @guarded("diagnostics")
    def _publish_diagnostics(self) -> None:
        """The rate the simulator achieves, its counts over the last 5 periods, and a level: ERROR on
        callback errors, WARN on rejected commands, non-finite states or a rate below 90 % of rate_hz."""
        window = self.window.update(self.counts)
        rate, wanted = self.achieved_rate_hz(window), self.values["rate_hz"]
        bad = {k: window[k] for k in ("invalid_command", "non_finite_state") if window[k]}
        if window["internal_error"]:
            level, message = (
                DiagnosticStatus.ERROR,
                f"{window['internal_error']} callback errors (see the log)",
            )
        elif bad:
            level, message = DiagnosticStatus.WARN, ", ".join(f"{k} {v}" for k, v in bad.items())
        elif window["window_s"] > 0 and rate < 0.9 * wanted:
            level = DiagnosticStatus.WARN
            message = (
                f"publishing {rate:.0f} Hz of rate_hz {wanted:.0f}: this machine does not keep up "
                f"({window['skipped_publishes']} steps integrated without publishing)"
            )
        else:
            level, message = DiagnosticStatus.OK, f"{rate:.0f} Hz"
        values = dict(self.counts, achieved_rate_hz=rate, rate_hz=wanted)
        values.update({f"window_{k}": v for k, v in window.items()})
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [
            diagnostic_status(
                status_name(self), getattr(self.system, "name", "system"), level, message, values
            )
        ]
        self.diagnostics_pub.publish(msg)


def main(argv=None) -> int:
    return node_main("sim", SimNode, argv)


if __name__ == "__main__":
    sys.exit(main())
