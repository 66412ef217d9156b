"""``servo_lnn``: lifecycle node that runs an exported ServoLNN on the joint-state stream.

configure   load the ONNX model + metadata, check it against ``free_joints``/``servo_joints``;
            a missing/corrupt model or a joint mismatch leaves the node unconfigured (one error line)
activate    subscribe ``joint_states`` (+ ``servo_commands``), publish per input sample:
              ~/driving_force  sensor_msgs/JointState      servo joints, effort = Q_e
              ~/prediction     trajectory_msgs/JointTrajectory  one point: q, q̇, q̈ (q̈_f predicted), effort = Q
              ~/energy         std_msgs/Float64MultiArray  T, V, E, Ṫ, V̇, Ė, q̇ᵀQ, stamp_sec, stamp_nanosec
            and at lower rates ~/markers (MarkerArray), /diagnostics, ~/predicted_trajectory (optional)
deactivate  stop subscriptions (publishers stop publishing); cleanup drops the model.

Every output carries the input joint state's stamp. q̈_e: the servo command's acceleration when a
fresh command carries one, otherwise estimated from the stream (ros_lnn.estimation.derivative).
"""
from __future__ import annotations

import sys
import time
from array import array

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Point
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..errors import RosLnnError
from ..estimation.derivative import CausalPolyDerivative
from ..estimation.rollout import rollout_free
from ..estimation.trajectory import ServoPlan, SplicedPlan
from .diagnostics import RateLatency, Throttle, diagnostic_status, warn_throttled
from .lifecycle import LifecycleTeardown, configure_and_activate
from .messages import ENERGY_LABELS, driving_force_msg, energy_values_msg, outputs_finite, prediction_msg
from .params import declare, param
from .process import init_ros, run_node_process
from .qos import COMMAND_QOS, SENSOR_QOS
from .serialized import SerializedTemplate
from .stamps import duration_ns, seconds_to_duration, stamp_ns
from . import compat

COMMAND_TYPES = ("trajectory", "array", "none")
AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0),
        "-x": (-1.0, 0.0, 0.0), "-y": (0.0, -1.0, 0.0), "-z": (0.0, 0.0, -1.0)}
#: Outputs published per sample, in the order they are gathered (energy: the first seven ~/energy entries).
PUBLISHED = ("Q_e", "qdd", "Q") + ENERGY_LABELS[:7]
INVALID_REASONS = ("non_finite", "missing_joint", "bad_size", "out_of_order", "stale", "non_finite_output",
                   "warming_up")

# name, default, description; (applied) "configure" = read on configure, "live" = may change any time
PARAMETERS = (
    ("model_path", "", "ONNX model: a file, a file name in share/ros_lnn/models, or empty = the shipped "
     "crane_servo_lnn.onnx", "configure"),
    ("free_joints", [], "free (unactuated) joint names in model order; empty = as in the model metadata",
     "configure"),
    ("servo_joints", [], "servo (position-driven) joint names in model order; empty = as in the model metadata",
     "configure"),
    ("model_threads", 1, "ONNX Runtime intra-op threads", "configure"),
    ("servo_command_type", "trajectory",
     "servo_commands message type: trajectory (JointTrajectory), array (Float64MultiArray of n_e positions, "
     "2 n_e positions+velocities or 3 n_e positions+velocities+accelerations, servo_joints order) or none",
     "configure"),
    ("qdd_filter_window", 9, "samples in the causal polynomial fit that estimates servo accelerations "
     "(degree 2 on velocities; degree 3 on positions when a stream has no velocities)", "configure"),
    ("input_queue_depth", 100, "joint_states subscription depth (best effort, keep last): samples held while "
     "the node is briefly descheduled, processed in order afterwards (100 = 0.1 s at 1 kHz)", "configure"),
    ("command_timeout_s", 0.5, "a servo command is stale this long after its last point (trajectory) or "
     "its receipt (array); stale commands are ignored and q̈_e is estimated", "live"),
    ("max_input_age_s", 1.0, "joint states older than this (node clock minus stamp) are skipped; 0 = no check",
     "live"),
    ("free_joint_forces", [], "Q_f on the free joints when joint_states carries no finite efforts for them; "
     "empty = zeros", "live"),
    ("frame_id", "", "frame_id of the outputs; empty = the input's frame_id", "live"),
    ("diagnostics_period_s", 1.0, "period of /diagnostics", "configure"),
    ("publish_markers", True, "publish ~/markers (force arrows at the servo joints, energy text)", "configure"),
    ("marker_rate_hz", 30.0, "rate of ~/markers (a timer publishes the newest sample's markers; 0 = none)", "live"),
    ("marker_frame", "world", "frame of the energy text (and of arrows without a marker_frames entry)", "live"),
    ("marker_frames", [], "per servo joint: the TF frame its force arrow is drawn in; empty = marker_frame",
     "live"),
    ("marker_axes", [], "per servo joint: the joint axis in that frame, 'x', 'y', 'z', '-x', '-y' or '-z' (default 'x')", "live"),
    ("force_scale", 0.05, "arrow length per unit force (m/N or m/(N m))", "live"),
    ("rollout_horizon_s", 0.0, "horizon of ~/predicted_trajectory over the servo plan; 0 = off", "live"),
    ("rollout_dt_s", 0.01, "RK4 step of the rollout", "live"),
    ("rollout_rate_hz", 10.0, "rate limit of ~/predicted_trajectory", "live"),
    ("latency_log", "", "benchmarks: at shutdown, write every processed sample's in-node latency (s, wall "
     "clock), the callback thread's CPU time for it (s) and the counters to this .npz file; empty = off",
     "configure"),
    ("autostart", False, "configure and activate at start-up (for ros2 run / launch without a lifecycle manager)",
     "configure"),
)


def resolve_model_path(value: str):
    """``model_path`` parameter: empty = the shipped model; a bare file name that is not a file here =
    a model installed in share/ros_lnn/models (or the source tree's models/); otherwise a path."""
    import os

    from ..inference.runtime import default_model_path

    if not value:
        return default_model_path()
    if not os.path.isfile(value) and os.sep not in value:
        return default_model_path(value)
    return value


class ServoLnnNode(LifecycleTeardown, LifecycleNode):
    _configured_attribute = "runtime"
    _io_attributes = ("_marker_timer",)

    def __init__(self, node_name: str = "servo_lnn", **kwargs):
        super().__init__(node_name, **kwargs)
        for name, default, description, _ in PARAMETERS:
            declare(self, name, default, f"{description} [applied: {_}]")
        self.add_on_set_parameters_callback(self._check_parameters)
        # Parameter values cached for the per-sample path (rclpy's get_parameter costs ~10 µs a call).
        self._values = {name: param(self, name) for name, *_ in PARAMETERS}
        compat.add_post_set_parameters_callback(self, self._cache_parameters, self._check_parameters)
        self.runtime = None
        self.last_error = ""
        self._subs, self._timers, self._pubs = [], [], {}
        self.counts = {k: 0 for k in INVALID_REASONS + ("processed", "received", "commands", "invalid_command",
                                                           "stale_command", "velocity_estimated")}
        self.stats = RateLatency()
        self._latency_log = array("d") if self.p("latency_log") else None
        self._cpu_log = array("d")

    # -- parameters ---------------------------------------------------------------------------
    def _check_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name == "servo_command_type" and p.value not in COMMAND_TYPES:
                return SetParametersResult(successful=False, reason=f"servo_command_type must be one of {COMMAND_TYPES}")
            if p.name in ("command_timeout_s", "max_input_age_s", "rollout_horizon_s", "force_scale") and \
                    p.type_ in (Parameter.Type.DOUBLE, Parameter.Type.INTEGER) and p.value < 0:
                return SetParametersResult(successful=False, reason=f"{p.name} must be >= 0")
            if p.name == "free_joint_forces" and self.runtime is not None:
                value = list(p.value)
                if value and (len(value) != self.runtime.n_f or not np.all(np.isfinite(value))):
                    return SetParametersResult(successful=False, reason=(
                        f"free_joint_forces needs {self.runtime.n_f} finite values for {self.runtime.free_joints}"))
        return SetParametersResult(successful=True)

    def _cache_parameters(self, params) -> None:
        for p in params:
            if p.name in self._values:
                self._values[p.name] = param(self, p.name)
            if p.name == "marker_rate_hz":
                self._set_marker_rate()

    def _set_marker_rate(self) -> None:
        timer = getattr(self, "_marker_timer", None)
        if timer is None:
            return
        rate = float(self.p("marker_rate_hz"))
        if rate <= 0:
            timer.cancel()
            return
        timer.timer_period_ns = int(round(1e9 / rate))
        if timer.is_canceled():
            timer.reset()

    def p(self, name):
        return self._values[name]

    # -- lifecycle ------------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        from ..inference.runtime import ServoLnnRuntime

        try:
            path = resolve_model_path(self.p("model_path"))
            free, servo = self.p("free_joints") or None, self.p("servo_joints") or None
            if self.p("servo_command_type") not in COMMAND_TYPES:
                raise RosLnnError(f"parameter servo_command_type must be one of {COMMAND_TYPES}")
            forces = self.p("free_joint_forces")
            self.runtime = ServoLnnRuntime(path, free, servo, threads=int(self.p("model_threads")))
            if forces and len(forces) != self.runtime.n_f:
                raise RosLnnError(f"parameter free_joint_forces has {len(forces)} values, the model's free joints "
                                  f"{self.runtime.free_joints} need {self.runtime.n_f}")
        except RosLnnError as exc:
            self.runtime = None
            self.last_error = str(exc)
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        rt = self.runtime
        self._index_cache = (None, None)
        self._servo = slice(rt.n_f, rt.n)
        self._zero_forces = np.zeros(rt.n_f)
        self._templates, self._gather = {}, None
        window = int(self.p("qdd_filter_window"))
        self.vel_filter = CausalPolyDerivative(window=window, degree=2, order=1)
        self.pos_filter = CausalPolyDerivative(window=max(window, 5), degree=3, order=2)
        self.plan, self.array_cmd = None, None
        self.origin_ns, self.last_stamp_ns = None, None
        self.rollout_throttle = Throttle(1.0)
        self._marker_timer, self._marker_sample = None, None
        self._pubs = {
            "driving_force": self.create_lifecycle_publisher(JointState, "~/driving_force", SENSOR_QOS),
            "prediction": self.create_lifecycle_publisher(JointTrajectory, "~/prediction", SENSOR_QOS),
            "energy": self.create_lifecycle_publisher(Float64MultiArray, "~/energy", SENSOR_QOS),
            "diagnostics": self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS),
            "predicted_trajectory": self.create_lifecycle_publisher(
                JointTrajectory, "~/predicted_trajectory", COMMAND_QOS),
        }
        if self.p("publish_markers"):
            self._pubs["markers"] = self.create_lifecycle_publisher(MarkerArray, "~/markers", COMMAND_QOS)
        self.get_logger().info(f"configured: model {rt.model_id} ({rt.metadata.family}), free joints "
                               f"{rt.free_joints}, servo joints {rt.servo_joints}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        input_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=max(1, int(self.p("input_queue_depth"))),
                               reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)
        self._subs.append(self.create_subscription(JointState, "joint_states", self._on_joint_state, input_qos))
        kind = self.p("servo_command_type")
        if kind == "trajectory":
            self._subs.append(self.create_subscription(JointTrajectory, "servo_commands", self._on_trajectory,
                                                       COMMAND_QOS))
        elif kind == "array":
            self._subs.append(self.create_subscription(Float64MultiArray, "servo_commands", self._on_array,
                                                       COMMAND_QOS))
        self._timers.append(self.create_timer(float(self.p("diagnostics_period_s")), self._publish_diagnostics))
        if "markers" in self._pubs:
            # Markers at marker_rate_hz from the newest sample, off the per-sample path (building and
            # converting a MarkerArray costs more than a whole sample's other outputs).
            self._marker_sample = None
            self._marker_timer = self.create_timer(1.0, self._publish_markers)
            self._timers.append(self._marker_timer)
            self._set_marker_rate()
        self.vel_filter.reset()
        self.pos_filter.reset()
        self.last_stamp_ns = None
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self.get_logger().info("activated")
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._drop_io()
        self.get_logger().info("deactivated")
        return super().on_deactivate(state)

    # -- inputs ---------------------------------------------------------------------------------
    def _reject(self, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        warn_throttled(self, reason, f"joint_states skipped ({reason}): {detail}")

    def _relative_s(self, ns: int) -> float:
        if self.origin_ns is None:
            self.origin_ns = ns
        return (ns - self.origin_ns) * 1e-9

    def _indices(self, names):
        cached_names, idx = self._index_cache
        if cached_names is not None and cached_names == names:
            return idx
        lookup = {name: i for i, name in enumerate(names)}
        missing = [j for j in self.runtime.joints if j not in lookup]
        idx = None if missing else np.array([lookup[j] for j in self.runtime.joints])
        self._index_cache = (list(names), idx)
        return idx

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        servo = self.runtime.servo_joints
        try:
            cols = [list(msg.joint_names).index(j) for j in servo]
        except ValueError:
            return self._bad_command(f"joint_names {list(msg.joint_names)} lack servo joints {servo}")
        if not msg.points:
            self.plan = None                     # an empty trajectory cancels the plan (as in ros2_control)
            return
        k = len(msg.joint_names)
        base_ns = stamp_ns(msg.header.stamp) or self.get_clock().now().nanoseconds
        try:
            times, pos, vel, acc = [], [], [], []
            for pt in msg.points:
                if len(pt.positions) != k or len(pt.velocities) not in (0, k) or len(pt.accelerations) not in (0, k):
                    raise ValueError("every point needs one position (and velocity/acceleration, if any) per joint")
                times.append(self._relative_s(base_ns + duration_ns(pt.time_from_start)))
                pos.append([pt.positions[c] for c in cols])
                vel.append([pt.velocities[c] for c in cols] if len(pt.velocities) else None)
                acc.append([pt.accelerations[c] for c in cols] if len(pt.accelerations) else None)
            has_v = all(v is not None for v in vel)
            has_a = has_v and all(a is not None for a in acc)
            plan = ServoPlan(times, pos, vel if has_v else None, acc if has_a else None)
            self.plan = SplicedPlan(self.plan, plan)
        except ValueError as exc:
            return self._bad_command(str(exc))
        self.array_cmd = None
        self.counts["commands"] += 1

    def _on_array(self, msg: Float64MultiArray) -> None:
        n_e = self.runtime.n_e
        data = np.asarray(msg.data, dtype=float)
        if data.size not in (n_e, 2 * n_e, 3 * n_e) or n_e == 0:
            return self._bad_command(f"{data.size} values; expected {n_e}, {2 * n_e} or {3 * n_e} for "
                                     f"{self.runtime.servo_joints}")
        if not np.all(np.isfinite(data)):
            return self._bad_command("NaN or inf in the command")
        self.array_cmd = (time.monotonic(), data.reshape(-1, n_e))
        self.plan = None
        self.counts["commands"] += 1

    def _bad_command(self, detail: str) -> None:
        self.counts["invalid_command"] += 1
        warn_throttled(self, "command", f"servo_commands rejected: {detail}")

    def _commanded_qdd_e(self, t: float):
        """Commanded servo acceleration at relative time t, or None (none/stale/not commanded)."""
        timeout = float(self.p("command_timeout_s"))
        if self.plan is not None:
            if t > self.plan.end_time + timeout:
                self.counts["stale_command"] += 1
                warn_throttled(self, "stale_command", "servo plan is stale (ended more than command_timeout_s "
                                                        "ago); estimating q̈_e from joint_states")
                return None
            sample = self.plan.sample(t)
            return sample.qdd if sample.commanded_acceleration else None
        if self.array_cmd is not None:
            received, data = self.array_cmd
            if time.monotonic() - received > timeout:
                self.counts["stale_command"] += 1
                warn_throttled(self, "stale_command", "servo array command is stale; estimating q̈_e "
                                                        "from joint_states")
                return None
            return data[2] if data.shape[0] == 3 else None
        return None

    def _on_joint_state(self, msg: JointState) -> None:
        t_start = time.perf_counter()
        log = self._latency_log
        cpu_start = time.thread_time() if log is not None else 0.0
        counts = self.counts
        counts["received"] += 1
        self.stats.arrive()
        rt = self.runtime
        values = self._values
        stamp_in = msg.header.stamp
        ns = stamp_in.sec * 1_000_000_000 + stamp_in.nanosec
        # ROS time is the system clock unless use_sim_time (then /clock through the node's clock)
        now_ns = self.get_clock().now().nanoseconds if self._sim_time else time.time_ns()
        if ns == 0:
            ns = now_ns
        max_age = float(values["max_input_age_s"])
        if max_age > 0 and now_ns > 0 and now_ns - ns > max_age * 1e9:
            return self._reject("stale", f"stamp is {(now_ns - ns) * 1e-9:.3f} s old (max_input_age_s {max_age})")
        if self.last_stamp_ns is not None and ns <= self.last_stamp_ns:
            return self._reject("out_of_order", f"stamp {ns * 1e-9:.6f} s is not after the last {self.last_stamp_ns * 1e-9:.6f} s")
        names = msg.name
        k = len(names)
        position, velocity, effort = msg.position, msg.velocity, msg.effort
        if len(position) != k or len(velocity) not in (0, k) or len(effort) not in (0, k):
            return self._reject("bad_size", f"{k} names, {len(position)} positions, {len(velocity)} "
                                            f"velocities, {len(effort)} efforts")
        idx = self._indices(names)
        if idx is None:
            return self._reject("missing_joint", f"model joints {rt.joints} not all in {list(names)}")
        q = np.asarray(position)[idx]
        qd = np.asarray(velocity)[idx] if len(velocity) else None
        if not np.isfinite(q).all() or (qd is not None and not np.isfinite(qd).all()):
            return self._reject("non_finite", "NaN or inf in positions/velocities of the model joints")
        t = self._relative_s(ns)
        servo = self._servo
        if qd is not None:
            self.pos_filter.reset()
            d = self.vel_filter.update(t, qd[servo])
            qdd_est = None if d is None else d[0]
        else:
            self.vel_filter.reset()
            d = self.pos_filter.update(t, q)
            counts["velocity_estimated"] += 1
            qd, qdd_est = (None, None) if d is None else (d[0], d[1][servo])
        self.last_stamp_ns = ns
        qdd_e = self._commanded_qdd_e(t) if (self.plan is not None or self.array_cmd is not None) else None
        if qdd_e is None:
            qdd_e = qdd_est
        if qdd_e is None or qd is None:
            counts["warming_up"] += 1
            return
        Q_f = None
        if len(effort):
            Q_f = np.asarray(effort)[idx[: rt.n_f]]
            if not np.isfinite(Q_f).all():
                Q_f = None
        if Q_f is None:
            forces = values["free_joint_forces"]
            Q_f = np.asarray(forces, dtype=float) if forces else self._zero_forces
        out = rt.evaluate(q, qd, qdd_e, Q_f)
        view = self._published(out)
        if view is None:
            return self._reject("non_finite_output", "the model returned NaN/inf for this state")
        frame = values["frame_id"] or msg.header.frame_id
        sec, nanosec = divmod(ns, 1_000_000_000)
        pubs = self._pubs
        templates = self._templates.get(frame) or self._make_templates(frame)
        q_e, qd_e = q[servo], qd[servo]
        if templates is not False:
            force, prediction, energy = templates
            pubs["driving_force"].publish(force.fill(sec, nanosec, q_e, qd_e, view["Q_e"]))
            pubs["prediction"].publish(prediction.fill(sec, nanosec, q, qd, view["qdd"], view["Q"]))
            pubs["energy"].publish(energy.fill(sec, nanosec, view["energy"]))
        else:
            stamp = Time(sec=sec, nanosec=nanosec)
            pubs["driving_force"].publish(driving_force_msg(stamp, frame, rt.servo_joints, q_e, qd_e, view["Q_e"]))
            pubs["prediction"].publish(prediction_msg(stamp, frame, rt.joints, q, qd, view["qdd"], view["Q"]))
            pubs["energy"].publish(energy_values_msg(stamp, view["energy"]))
        counts["processed"] += 1
        if "markers" in pubs:
            self._marker_sample = (sec, nanosec, out)      # published by the marker timer
        if self.plan is not None and float(values["rollout_horizon_s"]) > 0 and \
                self._due(self.rollout_throttle, "rollout_rate_hz"):
            self._publish_rollout(t, Time(sec=sec, nanosec=nanosec), q, qd)
        latency = time.perf_counter() - t_start
        self.stats.latency(latency)
        if log is not None:
            log.append(latency)
            self._cpu_log.append(time.thread_time() - cpu_start)

    def _published(self, out):
        """The published outputs (Q_e, qdd, Q, energy = T, V, E, Ṫ, V̇, Ė, q̇ᵀQ) as arrays, or None when
        any of them is NaN/inf. A SampleOutputs is read through one gather from its flat vector."""
        layout = getattr(out, "_layout", None)
        flat = getattr(out, "flat", None)
        if layout is not None and flat is not None:
            gather = self._gather
            if gather is None or gather[0] is not layout:
                spans = [layout[name][0] for name in PUBLISHED]
                index = np.concatenate([np.arange(sp.start, sp.stop) for sp in spans])
                bounds = np.cumsum([0] + [sp.stop - sp.start for sp in spans])
                gather = self._gather = (layout, index, bounds)
            values = flat[gather[1]]
            if not np.isfinite(values).all():
                return None
            b = gather[2]
            return {"Q_e": values[b[0]:b[1]], "qdd": values[b[1]:b[2]], "Q": values[b[2]:b[3]],
                    "energy": values[b[3]:]}
        if not outputs_finite(out) or not np.isfinite(out["Q_e"]).all():
            return None
        energy = np.array([float(out[k]) for k in ENERGY_LABELS[:7]])
        if not np.isfinite(energy).all():
            return None
        return {"Q_e": np.asarray(out["Q_e"], float), "qdd": np.asarray(out["qdd"], float),
                "Q": np.asarray(out["Q"], float), "energy": energy}

    def _make_templates(self, frame: str):
        """Serialized layouts of the three per-sample outputs for one frame_id (False: not usable)."""
        rt = self.runtime
        n, n_e = rt.n, rt.n_e
        servo, joints = list(rt.servo_joints), list(rt.joints)
        templates = (
            SerializedTemplate(lambda st, a, b, c: driving_force_msg(st, frame, servo, a, b, c), (n_e,) * 3),
            SerializedTemplate(lambda st, a, b, c, d: prediction_msg(st, frame, joints, a, b, c, d), (n,) * 4),
            SerializedTemplate(energy_values_msg, (7,), stamp_format="<dd"),
        )
        usable = templates if all(t.ok for t in templates) else False
        if len(self._templates) >= 16:            # frame ids taken from the inputs: keep the cache small
            self._templates.clear()
        self._templates[frame] = usable
        return usable

    def _due(self, throttle, rate_param: str) -> bool:
        rate = float(self.p(rate_param))
        if rate <= 0:
            return False
        throttle.period_s = 1.0 / rate
        return throttle()

    # -- low-rate outputs -----------------------------------------------------------------------
    def _publish_markers(self) -> None:
        sample, self._marker_sample = self._marker_sample, None
        if sample is not None and "markers" in self._pubs:
            sec, nanosec, out = sample
            self._pubs["markers"].publish(self._markers(Time(sec=sec, nanosec=nanosec), out))

    def _markers(self, stamp, out) -> MarkerArray:
        rt = self.runtime
        frames, axes = self.p("marker_frames"), self.p("marker_axes")
        base, scale = self.p("marker_frame"), float(self.p("force_scale"))
        markers = []
        for i, joint in enumerate(rt.servo_joints):
            m = Marker()
            m.header.stamp, m.header.frame_id = stamp, (frames[i] if i < len(frames) and frames[i] else base)
            m.ns, m.id, m.type, m.action = "driving_force", i, Marker.ARROW, Marker.ADD
            axis = AXES.get(axes[i] if i < len(axes) else "x", AXES["x"])
            length = scale * float(out["Q_e"][i])
            m.points = [Point(), Point(x=axis[0] * length, y=axis[1] * length, z=axis[2] * length)]
            m.scale.x, m.scale.y, m.scale.z = 0.02, 0.04, 0.06
            m.color.r, m.color.g, m.color.b, m.color.a = 0.9, 0.2, 0.1, 1.0
            m.text = joint
            markers.append(m)
        text = Marker()
        text.header.stamp, text.header.frame_id = stamp, base
        text.ns, text.id, text.type, text.action = "energy", 0, Marker.TEXT_VIEW_FACING, Marker.ADD
        text.pose.position.z = 0.5
        text.scale.z = 0.08
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        text.text = (f"T {float(out['T']):.3f} J  V {float(out['V']):.3f} J  E {float(out['E']):.3f} J\n"
                     f"dE/dt {float(out['E_dot']):.3f} W  qd.Q {float(out['power']):.3f} W\n"
                     + "  ".join(f"Q_e[{j}] {float(v):.3f}" for j, v in zip(rt.servo_joints, out["Q_e"])))
        markers.append(text)
        return MarkerArray(markers=markers)

    def _publish_rollout(self, t, stamp, q, qd) -> None:
        rt, plan = self.runtime, self.plan
        horizon = min(float(self.p("rollout_horizon_s")), max(plan.end_time - t, 0.0))
        dt = float(self.p("rollout_dt_s"))
        if horizon < dt:
            return
        nf = rt.n_f

        def accel(x, v, q_e, qd_e, qdd_e):
            return rt.evaluate(np.concatenate([x, q_e]), np.concatenate([v, qd_e]), qdd_e, np.zeros(nf))["qdd_f"]

        def servo(ts):
            s = plan.sample(ts)
            return s.q, s.qd, s.qdd

        taus, xs, vs, accs = rollout_free(accel, servo, t, q[:nf], qd[:nf], horizon, dt)
        msg = JointTrajectory()
        msg.header.stamp, msg.header.frame_id = stamp, self.p("frame_id")
        msg.joint_names = list(rt.joints)
        for tau, x, v, a in zip(taus, xs, vs, accs):
            s = plan.sample(t + tau)
            pt = JointTrajectoryPoint()
            pt.positions = [float(z) for z in np.concatenate([x, s.q])]
            pt.velocities = [float(z) for z in np.concatenate([v, s.qd])]
            pt.accelerations = [float(z) for z in np.concatenate([a, s.qdd])]
            pt.time_from_start = seconds_to_duration(tau)
            msg.points.append(pt)
        self._pubs["predicted_trajectory"].publish(msg)

    def diagnostics_values(self) -> dict:
        summary = self.stats.summary()
        values = {"input_rate_hz": summary["rate_hz"], "latency_median_us": summary["latency_median_us"],
                  "latency_p99_us": summary["latency_p99_us"],
                  "model_id": self.runtime.model_id if self.runtime else "",
                  "skipped": sum(self.counts[k] for k in INVALID_REASONS)}
        values.update(self.counts)
        return values

    def _publish_diagnostics(self) -> None:
        values = self.diagnostics_values()
        bad = values["skipped"] - values["warming_up"]
        level = DiagnosticStatus.OK if bad == 0 and values["invalid_command"] == 0 else DiagnosticStatus.WARN
        message = "ok" if level == DiagnosticStatus.OK else f"{bad} inputs skipped, {values['invalid_command']} commands rejected"
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [diagnostic_status(f"{self.get_name()}: servo_lnn estimator", values["model_id"], level,
                                          message, values)]
        self._pubs["diagnostics"].publish(msg)


def write_latency_log(node: ServoLnnNode) -> None:
    path = node.p("latency_log")
    if path and node._latency_log is not None:
        np.savez(path, latency_s=np.frombuffer(node._latency_log, dtype=float),
                 cpu_s=np.frombuffer(node._cpu_log, dtype=float),
                 **{k: np.int64(v) for k, v in node.counts.items()})


def start(node: ServoLnnNode) -> bool:
    """configure + activate; False (with the error already logged) when configure fails."""
    return configure_and_activate(node, lambda: node.runtime is not None)


def main(argv=None) -> int:
    """The node process. Executor: rclpy's EventsExecutor unless ROS_LNN_EXECUTOR=single (it costs
    about a third less CPU per sample; its lifecycle use through services is tested)."""
    init_ros(argv if argv is not None else sys.argv)
    return run_node_process(ServoLnnNode(), compat.autostart_or_stay_unconfigured(start),
                            on_exit=write_latency_log)


if __name__ == "__main__":
    sys.exit(main())
