"""``servo_lnn``: lifecycle node that runs an exported ServoLNN on the joint-state stream.

configure   load the ONNX model + metadata, check it and every parameter (one error line when either
            does not fit; the node stays unconfigured); build the estimator step
            (:class:`ros_lnn.estimation.servo_estimator.ServoEstimator`)
activate    subscribe ``joint_states`` (+ ``servo_commands``), publish per input sample:
              ~/driving_force  sensor_msgs/JointState            servo joints, effort = Q_e
              ~/prediction     ros_lnn_msgs/DynamicsPrediction   q, q̇, q̈ (q̈_f predicted), Q
              ~/energy         ros_lnn_msgs/Energy               T, V, E, Ṫ, V̇, Ė, q̇ᵀQ
            (standard types where ros_lnn_msgs is not built: nodes/messages.py) and at lower rates
            ~/markers (MarkerArray), /diagnostics, ~/predicted_trajectory (optional)
deactivate  stop subscriptions (publishers stop publishing); cleanup drops the model.

The node parses, calls the estimator's step and publishes: joint states are read from their serialized
bytes by joint name (nodes/joint_state_reader.py), the three outputs are written into pre-serialized
messages by one gather (nodes/serialized.py). Every output carries the input joint state's stamp.
Every callback and transition catches what it meets: one log line, a count in /diagnostics, the node
keeps running and never publishes a non-finite number.
"""

from __future__ import annotations

import math
import os
import sys
import time
from array import array
from typing import TYPE_CHECKING

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Point
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..errors import RosLnnError
from ..estimation.servo_estimator import SKIP_REASONS, ServoEstimator
from ..files import open_output, output_file_problem
from . import compat
from .clocks import steady_timer
from .diagnostics import (
    CountWindow,
    RateLatency,
    diagnostic_status,
    guarded,
    input_status,
    report_error,
    status_name,
    warn_throttled,
)
from .joint_state_reader import NOT_REJECTED, READ_REASONS, JointStateReader, trajectory_size
from .lifecycle import LifecycleTeardown, configure_and_activate
from .messages import (
    ENERGY_TYPE,
    PREDICTION_TYPE,
    driving_force_msg,
    energy_values_msg,
    prediction_msg,
    report_interfaces,
)
from .params import CONFIGURE, MAX_PATH, STARTUP, Param, ParameterTable
from .process import init_ros, run_node_process
from .qos import COMMAND_QOS, OVERRIDES, STREAM_QOS, input_qos, output_qos
from .serialized import PackedMessages
from .stamps import duration_ns, seconds_to_duration

if TYPE_CHECKING:
    from rclpy.timer import Timer

    from ..inference.runtime import ServoLnnRuntime

COMMAND_TYPES = ("trajectory", "array", "none")
AXES = {
    "x": (1.0, 0.0, 0.0),
    "y": (0.0, 1.0, 0.0),
    "z": (0.0, 0.0, 1.0),
    "-x": (-1.0, 0.0, 0.0),
    "-y": (0.0, -1.0, 0.0),
    "-z": (0.0, 0.0, -1.0),
}
#: joint_states skipped, by reason (the reader's, the node's stamp checks, the estimator's).
INVALID_REASONS = READ_REASONS + ("stale", "future", "clock_not_started") + SKIP_REASONS
#: Other counts in /diagnostics.
COUNTED = (
    "processed",
    "received",
    "commands",
    "invalid_command",
    "stale_command",
    "velocity_estimated",
    "stream_restarts",
    "internal_error",
    "non_finite_marker",
)
#: Bigger array commands are refused before they are read.
MAX_ARRAY_COMMAND_BYTES = 4096


def _rollout_steps(values: dict) -> str:
    """Bound the rollouts' work: at most 500 RK4 steps each, 1 000 steps per second in all."""
    if values["rollout_horizon_s"] <= 0:
        return ""
    steps = values["rollout_horizon_s"] / values["rollout_dt_s"]
    if steps > 500:
        return "rollout_horizon_s / rollout_dt_s must be <= 500 steps (bounds the work of one rollout)"
    if steps * values["rollout_rate_hz"] > 1000:
        return (
            "rollout_horizon_s / rollout_dt_s * rollout_rate_hz must be <= 1000 steps per second (bounds the "
            "work of the rollouts)"
        )
    return ""


def latency_log_problem(value: str) -> str:
    """``latency_log``: empty (off), or a regular file, new or existing, in a directory that exists."""
    if not value:
        return ""
    problem = output_file_problem(value)
    return f"'{value}' {problem}" if problem else ""


PARAMETERS = ParameterTable(
    Param(
        "model_path",
        "",
        "ONNX model: a file, a file name in share/ros_lnn/models, or empty = the shipped "
        "crane_servo_lnn.onnx",
        CONFIGURE,
        max_length=MAX_PATH,
    ),
    Param(
        "free_joints",
        [],
        "free (unactuated) joint names in model order; empty = as in the model metadata",
        CONFIGURE,
        items=str,
        unique=True,
    ),
    Param(
        "servo_joints",
        [],
        "servo (position-driven) joint names in model order; empty = as in the model metadata",
        CONFIGURE,
        items=str,
        unique=True,
    ),
    Param("model_threads", 1, "ONNX Runtime intra-op threads", CONFIGURE, ge=1, le=64),
    Param(
        "servo_command_type",
        "trajectory",
        "servo_commands message type: trajectory (JointTrajectory), array (Float64MultiArray of n_e "
        "positions, 2 n_e positions+velocities or 3 n_e positions+velocities+accelerations, servo_joints "
        "order) or none",
        CONFIGURE,
        choices=COMMAND_TYPES,
    ),
    Param(
        "qdd_filter_window",
        9,
        "samples in the causal polynomial fit that estimates servo accelerations "
        "(degree 2 on velocities; degree 3 on positions when a stream has no velocities)",
        CONFIGURE,
        ge=3,
        le=1000,
    ),
    Param(
        "input_queue_depth",
        100,
        "joint_states subscription depth (best effort, keep last): samples held "
        "while the node is briefly descheduled, processed in order afterwards (100 = 0.1 s at 1 kHz)",
        CONFIGURE,
        ge=1,
        le=100000,
    ),
    Param(
        "command_timeout_s",
        0.5,
        "a servo command is stale this long after its last point (trajectory) or "
        "after the joint state it took effect at (array); stale commands are ignored and q̈_e is estimated",
        ge=0.0,
        le=3600.0,
    ),
    Param(
        "max_input_age_s",
        1.0,
        "joint states stamped more than this before or after the node clock are "
        "skipped (stale / future); 0 = no check",
        ge=0.0,
        le=3600.0,
    ),
    Param(
        "max_command_points",
        2000,
        "a servo trajectory with more points is refused before it is read "
        "(bounds the work one message can cause)",
        ge=1,
        le=1000000,
    ),
    Param(
        "input_timeout_s",
        1.0,
        "no joint_states for this long: /diagnostics ERROR (stale)",
        ge=0.01,
        le=3600.0,
    ),
    Param(
        "free_joint_forces",
        [],
        "Q_f on the free joints when joint_states carries no finite efforts for them; empty = zeros",
        items=float,
    ),
    Param("frame_id", "", "frame_id of the outputs; empty = the input's frame_id"),
    Param(
        "diagnostics_period_s",
        1.0,
        "period of /diagnostics (its counts cover the last 5 periods)",
        CONFIGURE,
        ge=0.01,
        le=3600.0,
    ),
    Param(
        "publish_markers",
        True,
        "publish ~/markers (force arrows at the servo joints, energy text)",
        CONFIGURE,
    ),
    Param(
        "marker_rate_hz",
        30.0,
        "rate of ~/markers (a timer publishes the newest sample's markers)",
        ge=0.1,
        le=1000.0,
        off=0.0,
    ),
    Param("marker_frame", "world", "frame of the energy text (and of arrows without a marker_frames entry)"),
    Param(
        "marker_frames",
        [],
        "per servo joint: the TF frame its force arrow is drawn in; empty = marker_frame",
        items=str,
    ),
    Param(
        "marker_axes",
        [],
        "per servo joint: the joint axis in that frame (default 'x')",
        items=str,
        choices=tuple(AXES),
    ),
    Param("force_scale", 0.05, "arrow length per unit force (m/N or m/(N m))", ge=0.0, le=100.0),
    Param(
        "rollout_horizon_s",
        0.0,
        "horizon of ~/predicted_trajectory over the servo plan; 0 = off",
        ge=0.0,
        le=10.0,
    ),
    Param("rollout_dt_s", 0.01, "RK4 step of the rollout", ge=1e-4, le=1.0),
    Param("rollout_rate_hz", 10.0, "rate limit of ~/predicted_trajectory", ge=0.1, le=100.0, off=0.0),
    Param(
        "latency_log",
        "",
        "benchmarks: at shutdown, write every processed sample's in-node latency (s, wall "
        "clock), the callback thread's CPU time for it and for its model call (s), and the counters to this "
        "file, in .npz format, under exactly this name (a regular file, new or existing, in a directory that "
        "exists); empty = off",
        CONFIGURE,
        max_length=MAX_PATH,
        check=latency_log_problem,
    ),
    Param(
        "autostart",
        False,
        "configure and activate at start-up (for ros2 run / launch without a lifecycle manager)",
        STARTUP,
    ),
    rules=(_rollout_steps,),
)


def _accept(parameters):
    from rcl_interfaces.msg import SetParametersResult

    return SetParametersResult(successful=True)


def resolve_model_path(value: str):
    """``model_path`` parameter: empty = the shipped model; a bare file name that is not a file here =
    a model installed in share/ros_lnn/models (or the source tree's models/); otherwise a path."""
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
        self.runtime: ServoLnnRuntime | None = None
        self.estimator: ServoEstimator | None = None
        self.last_error = ""
        self._subs, self._timers, self._pubs = [], [], {}
        self.counts = dict.fromkeys(INVALID_REASONS + COUNTED, 0)
        self.values = PARAMETERS.attach(
            self,
            configured=lambda: self.runtime is not None,
            extra_check=self._check_forces,
            on_change=self._parameters_changed,
        )
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        # use_sim_time switched live: the stamp checks follow it from the next joint state on
        compat.add_post_set_parameters_callback(self, self._sim_time_changed, _accept)
        self.stats = RateLatency()
        self._arrivals, self._latencies = self.stats.arrivals, self.stats.latencies
        self.window = CountWindow()
        self.last_input: float | None = None
        self._latency_path = ""
        self._latency_log, self._cpu_log, self._model_cpu_log = array("d"), array("d"), array("d")

    # -- parameters ---------------------------------------------------------------------------
    def _check_forces(self, values: dict) -> str:
        forces = values["free_joint_forces"]
        if self.runtime is not None and forces and len(forces) != self.runtime.n_f:
            return f"free_joint_forces needs {self.runtime.n_f} finite values for {self.runtime.free_joints}"
        return ""

    def _sim_time_changed(self, parameters) -> None:
        for parameter in parameters:
            if parameter.name == "use_sim_time" and isinstance(parameter.value, bool):
                self._sim_time = parameter.value

    def _parameters_changed(self, names) -> None:
        est = self.estimator
        if est is not None:
            est.command_timeout_s = self.values["command_timeout_s"]
            est.free_joint_forces = self.values["free_joint_forces"]
        if "marker_rate_hz" in names:
            self._set_marker_rate()

    def _set_marker_rate(self) -> None:
        timer = getattr(self, "_marker_timer", None)
        if timer is None:
            return
        rate = self.values["marker_rate_hz"]
        if rate <= 0:
            timer.cancel()
            return
        timer.timer_period_ns = int(round(1e9 / rate))
        if timer.is_canceled():
            timer.reset()

    def p(self, name):
        return self.values[name]

    # -- lifecycle ------------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as exc:  # noqa: BLE001 - configure must always say why it failed, whatever failed
            self.runtime = self.estimator = None
            for pub in self._pubs.values():
                self.destroy_lifecycle_publisher(pub)
            self._pubs = {}
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.last_error = text if isinstance(exc, RosLnnError) else f"{type(exc).__name__}: {text}"
            self.get_logger().error(f"configure failed: {self.last_error}")
            return TransitionCallbackReturn.FAILURE
        rt = self.runtime
        assert rt is not None  # _configure sets it or raises
        self.get_logger().info(
            f"configured: model {rt.model_id} ({rt.metadata.family}), free joints "
            f"{rt.free_joints}, servo joints {rt.servo_joints}"
        )
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        from ..inference.runtime import ServoLnnRuntime

        problems = PARAMETERS.problems(PARAMETERS.read(self))
        if problems:
            raise RosLnnError(problems[0])
        v = self.values
        path = resolve_model_path(v["model_path"])
        runtime = ServoLnnRuntime(
            path, v["free_joints"] or None, v["servo_joints"] or None, threads=v["model_threads"]
        )
        runtime.check_nominal()  # a model that is not finite at rest never runs
        forces = v["free_joint_forces"]
        if forces and len(forces) != runtime.n_f:
            raise RosLnnError(
                f"parameter free_joint_forces has {len(forces)} values, the model's free joints "
                f"{runtime.free_joints} need {runtime.n_f}"
            )
        self.estimator = ServoEstimator(
            runtime,
            qdd_filter_window=v["qdd_filter_window"],
            command_timeout_s=v["command_timeout_s"],
            free_joint_forces=forces,
            counts=self.counts,
        )
        self.estimator.profile = bool(v["latency_log"])
        self.runtime = runtime
        self.reader = JointStateReader(runtime.joints, runtime.n_f, state=self.estimator.joint_state)
        self._packers: dict = {}
        self._marker_timer: Timer | None = None
        self._marker_stamp: tuple[int, int] | None = None
        self._rollout_due = 0.0
        self._latency_path = v["latency_log"]
        report_interfaces(self.get_logger())
        pub = self.create_lifecycle_publisher
        self._pubs = {
            "driving_force": pub(
                JointState, "~/driving_force", output_qos(STREAM_QOS), qos_overriding_options=OVERRIDES
            ),
            "prediction": pub(
                PREDICTION_TYPE, "~/prediction", output_qos(STREAM_QOS), qos_overriding_options=OVERRIDES
            ),
            "energy": pub(ENERGY_TYPE, "~/energy", output_qos(STREAM_QOS), qos_overriding_options=OVERRIDES),
            "diagnostics": pub(DiagnosticArray, "/diagnostics", COMMAND_QOS),
            "predicted_trajectory": pub(
                JointTrajectory,
                "~/predicted_trajectory",
                output_qos(COMMAND_QOS),
                qos_overriding_options=OVERRIDES,
            ),
        }
        if v["publish_markers"]:
            self._pubs["markers"] = pub(
                MarkerArray, "~/markers", output_qos(COMMAND_QOS), qos_overriding_options=OVERRIDES
            )

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        try:
            v = self.values
            self._subs.append(
                self.create_subscription(
                    JointState,
                    "joint_states",
                    self._on_joint_state,
                    input_qos(v["input_queue_depth"]),
                    raw=True,
                )
            )
            kind = v["servo_command_type"]
            if kind == "trajectory":
                self._subs.append(
                    self.create_subscription(
                        JointTrajectory, "servo_commands", self._on_trajectory, COMMAND_QOS, raw=True
                    )
                )
            elif kind == "array":
                self._subs.append(
                    self.create_subscription(
                        Float64MultiArray, "servo_commands", self._on_array, COMMAND_QOS, raw=True
                    )
                )
            # on the steady clock: diagnostics (and their stale ERROR) go on when /clock stops
            self._timers.append(steady_timer(self, v["diagnostics_period_s"], self._publish_diagnostics))
            if "markers" in self._pubs:
                # Markers at marker_rate_hz from the newest sample, off the per-sample path (building and
                # converting a MarkerArray costs more than a whole sample's other outputs).
                self._marker_stamp = None
                self._marker_timer = self.create_timer(1.0, self._publish_markers)
                self._timers.append(self._marker_timer)
                self._set_marker_rate()
            assert self.estimator is not None  # activate follows a successful configure
            self.estimator.reset()
            self.last_input = None
            self.window.start(self.counts)
            self._sim_time = bool(self.get_parameter("use_sim_time").value)
        except Exception as exc:  # noqa: BLE001 - an activation that fails leaves the node inactive, with the reason
            self._drop_io()
            report_error(self, "activate", exc)
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info("activated")
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._drop_io()
        self.get_logger().info("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self.estimator = None
        return super().on_cleanup(state)

    # -- inputs ---------------------------------------------------------------------------------
    def _reject(self, reason: str, detail: str, counted: bool = False) -> None:
        if not counted:
            self.counts[reason] += 1
        if reason not in ("warming_up",) + NOT_REJECTED:
            warn_throttled(self, reason, f"joint_states skipped ({reason}): {detail}")

    def _on_joint_state(self, raw: bytes) -> None:
        try:
            self._process(raw)
        except Exception as exc:  # noqa: BLE001 - never into the executor: counted, logged, the stream goes on
            report_error(self, "joint_states", exc)

    def _process(self, raw: bytes) -> None:
        t_start = time.perf_counter()
        logging = self._latency_path
        cpu_start = time.thread_time() if logging else 0.0
        counts = self.counts
        counts["received"] += 1
        self._arrivals.append(t_start)
        self.last_input = t_start
        reader = self.reader
        reason = reader.read(raw)
        if reason:
            return self._reject(reason, reader.detail)
        ns = reader.stamp_ns
        # ROS time is the system clock unless use_sim_time (then /clock through the node's clock)
        now_ns = self.get_clock().now().nanoseconds if self._sim_time else time.time_ns()
        if ns == 0:
            ns = now_ns
        if now_ns == 0:  # use_sim_time and no /clock yet: an age cannot be judged, the output is held
            return self._reject(
                "clock_not_started", "use_sim_time is set and no /clock arrived yet: outputs held"
            )
        max_age = self.values["max_input_age_s"]
        if max_age > 0 and abs(now_ns - ns) > max_age * 1e9:
            if ns > now_ns:
                return self._reject(
                    "future",
                    f"stamp is {(ns - now_ns) * 1e-9:.3f} s ahead of the node clock "
                    f"(max_input_age_s {max_age})",
                )
            return self._reject(
                "stale", f"stamp is {(now_ns - ns) * 1e-9:.3f} s old (max_input_age_s {max_age})"
            )
        est = self.estimator
        assert est is not None  # subscriptions live from activate to deactivate
        sample = est.step_in_place(ns, reader.qd is not None, reader.effort_free)
        if sample is None:
            reason = est.skipped
            return self._reject(
                reason,
                "NaN or inf in the model joints' positions/velocities"
                if reason == "non_finite"
                else f"{reason} (estimator)",
                counted=True,
            )
        if est.command_state == "stale":
            warn_throttled(
                self,
                "stale_command",
                "servo command is stale (command_timeout_s); estimating q̈_e from joint_states",
            )
        frame = self.values["frame_id"] or reader.frame_id
        sec, nanosec = divmod(ns, 1_000_000_000)
        packer = self._packers.get(frame) or self._make_packer(frame)
        pubs = self._pubs
        if packer.ok:
            force, prediction, energy = packer.fill(sec, nanosec, sample)
        else:
            force, prediction, energy = (
                build(Time(sec=sec, nanosec=nanosec), sample) for build in packer.builders
            )
        pubs["driving_force"].publish(force)
        pubs["prediction"].publish(prediction)
        pubs["energy"].publish(energy)
        counts["processed"] += 1
        self._marker_stamp = (sec, nanosec)  # markers of est.last_sample, published by their timer
        if est.plan is not None and self.values["rollout_horizon_s"] > 0:
            self._maybe_publish_rollout(Time(sec=sec, nanosec=nanosec))
        t_end = time.perf_counter()
        latency = t_end - t_start
        self._latencies.append((t_end, latency))
        if logging:
            self._latency_log.append(latency)
            self._cpu_log.append(time.thread_time() - cpu_start)
            self._model_cpu_log.append(est.model_cpu_s)

    def _make_packer(self, frame: str) -> PackedMessages:
        """The three per-sample outputs for one frame_id, serialized from the estimator's sample vector."""
        est = self.estimator
        assert est is not None  # called from _process
        L = est.layout
        servo, joints, n_f = list(est.servo_joints), list(est.joints), est.n_f
        q_e, qd_e = slice(L["q"].start + n_f, L["q"].stop), slice(L["qd"].start + n_f, L["qd"].stop)
        builders = (
            lambda st, s: driving_force_msg(st, frame, servo, s[q_e], s[qd_e], s[L["Q_e"]]),
            lambda st, s: prediction_msg(
                st, frame, joints, s[L["q"]], s[L["qd"]], s[L["qdd"]], s[L["Q"]], n_f
            ),
            lambda st, s: energy_values_msg(st, s[L["energy"]], frame),
        )
        packer = PackedMessages(builders, est.size)
        if len(self._packers) >= 16:  # frame ids taken from the inputs: keep the cache small
            self._packers.clear()
        self._packers[frame] = packer
        return packer

    @guarded("servo_commands")
    def _on_trajectory(self, raw: bytes) -> None:
        size = trajectory_size(raw)
        limit = self.values["max_command_points"]
        if size is not None and size[1] > limit:
            return self._bad_command(f"{size[1]} points, more than max_command_points ({limit})")
        if size is None and len(raw) > 256 * limit:
            return self._bad_command(f"{len(raw)} bytes, more than max_command_points ({limit}) can need")
        try:
            msg = deserialize_message(raw, JointTrajectory)
        except Exception as exc:  # noqa: BLE001 - rclpy raises several types for bytes it cannot read
            return self._bad_command(f"not a JointTrajectory ({type(exc).__name__})")
        est = self.estimator
        assert est is not None  # subscriptions live from activate to deactivate
        names = list(msg.joint_names)
        if len(set(names)) != len(names):
            return self._bad_command(f"joint_names {names} repeat a name")
        missing = [j for j in est.servo_joints if j not in names]
        if missing:
            return self._bad_command(f"joint_names {names} lack servo joints {missing}")
        if not msg.points:
            est.cancel_plan()  # an empty trajectory cancels the plan (as in ros2_control)
            return
        cols = [names.index(j) for j in est.servo_joints]
        k = len(names)
        pts = msg.points
        if any(
            len(pt.positions) != k or len(pt.velocities) not in (0, k) or len(pt.accelerations) not in (0, k)
            for pt in pts
        ):
            return self._bad_command(
                "every point needs one position (and velocity/acceleration, if any) per joint"
            )
        base_ns = (
            msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            or self.get_clock().now().nanoseconds
        )
        times = [base_ns + duration_ns(pt.time_from_start) for pt in pts]
        has_v = all(len(pt.velocities) for pt in pts)
        has_a = has_v and all(len(pt.accelerations) for pt in pts)
        try:
            est.set_plan(
                times,
                np.array([pt.positions for pt in pts])[:, cols],
                np.array([pt.velocities for pt in pts])[:, cols] if has_v else None,
                np.array([pt.accelerations for pt in pts])[:, cols] if has_a else None,
            )
        except ValueError as exc:
            return self._bad_command(str(exc))
        self.counts["commands"] += 1

    @guarded("servo_commands")
    def _on_array(self, raw: bytes) -> None:
        assert self.estimator is not None  # subscriptions live from activate to deactivate
        if len(raw) > MAX_ARRAY_COMMAND_BYTES:
            return self._bad_command(
                f"{len(raw)} bytes; an array command of {self.estimator.n_e} servo joints is far smaller"
            )
        try:
            data = np.asarray(deserialize_message(raw, Float64MultiArray).data, dtype=float)
        except Exception as exc:  # noqa: BLE001 - rclpy raises several types for bytes it cannot read
            return self._bad_command(f"not a Float64MultiArray ({type(exc).__name__})")
        n_e = self.estimator.n_e
        if data.size not in (n_e, 2 * n_e, 3 * n_e) or n_e == 0:
            return self._bad_command(
                f"{data.size} values; expected {n_e}, {2 * n_e} or {3 * n_e} for "
                f"{self.estimator.servo_joints}"
            )
        try:
            self.estimator.set_command(data.reshape(-1, n_e))
        except ValueError:
            return self._bad_command("NaN or inf in the command")
        self.counts["commands"] += 1

    def _bad_command(self, detail: str) -> None:
        self.counts["invalid_command"] += 1
        warn_throttled(self, "command", f"servo_commands rejected: {detail}")

    # -- low-rate outputs -----------------------------------------------------------------------
    @guarded("markers")
    def _publish_markers(self) -> None:
        stamp, self._marker_stamp = self._marker_stamp, None
        if stamp is not None and "markers" in self._pubs:
            markers = self._markers(Time(sec=stamp[0], nanosec=stamp[1]), self.estimator)
            if markers is None:
                self.counts["non_finite_marker"] += 1
                return
            self._pubs["markers"].publish(markers)

    def _markers(self, stamp, est) -> MarkerArray | None:
        """Force arrows and the energy text of the newest sample; None if an arrow would not be finite."""
        sample, L = est.last_sample, est.layout
        frames, axes = self.values["marker_frames"], self.values["marker_axes"]
        base, scale = self.values["marker_frame"], self.values["force_scale"]
        markers = []
        Q_e = sample[L["Q_e"]]
        for i, joint in enumerate(est.servo_joints):
            m = Marker()
            m.header.stamp, m.header.frame_id = stamp, (frames[i] if i < len(frames) and frames[i] else base)
            m.ns, m.id, m.type, m.action = "driving_force", i, Marker.ARROW, Marker.ADD
            axis = AXES.get(axes[i] if i < len(axes) else "x", AXES["x"])
            length = scale * float(Q_e[i])
            if not math.isfinite(length):
                return None
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
        e = {name: float(sample[L[name]]) for name in ("T", "V", "E", "E_dot", "power")}
        text.text = (
            f"T {e['T']:.3f} J  V {e['V']:.3f} J  E {e['E']:.3f} J\n"
            f"dE/dt {e['E_dot']:.3f} W  qd.Q {e['power']:.3f} W\n"
            + "  ".join(f"Q_e[{j}] {float(v):.3f}" for j, v in zip(est.servo_joints, Q_e))
        )
        markers.append(text)
        return MarkerArray(markers=markers)

    def _maybe_publish_rollout(self, stamp) -> None:
        rate = self.values["rollout_rate_hz"]
        now = time.monotonic()
        if rate <= 0 or now < self._rollout_due:
            return
        self._rollout_due = now + 1.0 / rate
        assert self.estimator is not None  # called from _process
        try:
            rollout = self.estimator.predict_free_motion(
                self.values["rollout_horizon_s"], self.values["rollout_dt_s"]
            )
        except Exception as exc:  # noqa: BLE001 - a rollout is an extra: its failure never stops the per-sample path
            return report_error(self, "predicted_trajectory", exc)
        if rollout is None:
            return
        taus, positions, velocities, accelerations = rollout
        if not (
            np.isfinite(positions).all()
            and np.isfinite(velocities).all()
            and np.isfinite(accelerations).all()
        ):
            self.counts["non_finite_output"] += 1
            return
        msg = JointTrajectory()
        msg.header.stamp, msg.header.frame_id = stamp, self.values["frame_id"]
        msg.joint_names = list(self.estimator.joints)
        for tau, x, v, a in zip(taus, positions, velocities, accelerations):
            pt = JointTrajectoryPoint(positions=x.tolist(), velocities=v.tolist(), accelerations=a.tolist())
            pt.time_from_start = seconds_to_duration(tau)
            msg.points.append(pt)
        self._pubs["predicted_trajectory"].publish(msg)

    def diagnostics_values(self) -> dict:
        """Lifetime counts, the stream's rate and latencies over the last seconds, and the model."""
        summary = self.stats.summary()
        counts = dict(self.counts)
        values = {
            "input_rate_hz": summary["rate_hz"],
            "latency_median_us": summary["latency_median_us"],
            "latency_p99_us": summary["latency_p99_us"],
            "model_id": self.runtime.model_id if self.runtime else "",
            "skipped": sum(counts[k] for k in INVALID_REASONS),
        }
        values.update(counts)
        return values

    @guarded("diagnostics")
    def _publish_diagnostics(self) -> None:
        values = self.diagnostics_values()
        window = self.window.update(self.counts)
        rejected = tuple(r for r in INVALID_REASONS if r not in ("warming_up",) + NOT_REJECTED) + (
            "invalid_command",
        )
        level, message = input_status(window, rejected, self.last_input, self.values["input_timeout_s"])
        values.update(
            {f"window_{k}": v for k, v in window.items() if k in rejected + ("received", "processed")}
        )
        values["window_s"] = window["window_s"]
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [diagnostic_status(status_name(self), values["model_id"], level, message, values)]
        self._pubs["diagnostics"].publish(msg)


def write_latency_log(node: ServoLnnNode) -> None:
    """At shutdown, the benchmark log of ``latency_log`` (as configured): per sample the in-node latency,
    the callback's CPU time and the CPU time of its model call (the runtime's flat evaluation, timed in
    place); the counts; and ServoLnnRuntime.evaluate on the last sample, 2 000 calls back to back here
    in the same process (warm caches: a lower bound of the model's cost)."""
    path = node._latency_path
    if not path:
        return
    evaluate_cpu = array("d")
    est, runtime = node.estimator, node.runtime
    if est is not None and runtime is not None and node.counts["processed"]:
        L = est.layout
        sample = est.last_sample.copy()
        q, qd = sample[L["q"]], sample[L["qd"]]
        qdd_e, Q_f = sample[L["qdd"]][est.n_f :], sample[L["Q_f"]]
        for _ in range(2000):
            c = time.thread_time()
            runtime.evaluate(q, qd, qdd_e, Q_f)
            evaluate_cpu.append(time.thread_time() - c)
    try:
        problem = output_file_problem(path)
        if problem:
            raise RosLnnError(problem)
        with open_output(path) as f:
            np.savez(
                f,
                latency_s=np.frombuffer(node._latency_log, dtype=float),
                cpu_s=np.frombuffer(node._cpu_log, dtype=float),
                model_cpu_s=np.frombuffer(node._model_cpu_log, dtype=float),
                evaluate_cpu_s=np.frombuffer(evaluate_cpu, dtype=float),
                **{k: np.int64(v) for k, v in node.diagnostics_values().items() if isinstance(v, int)},
            )
    except OSError as exc:
        node.get_logger().error(f"latency_log: cannot write {path} ({exc.strerror or exc})")
    except RosLnnError as exc:
        node.get_logger().error(f"latency_log: {path} {exc}: nothing written")


def start(node: ServoLnnNode) -> bool:
    """configure + activate; False (with the error already logged) when configure fails."""
    return configure_and_activate(node, lambda: node.runtime is not None)


def main(argv=None) -> int:
    """The node process. Executor: rclpy's EventsExecutor unless ROS_LNN_EXECUTOR=single (it costs
    about a third less CPU per sample; its lifecycle use through services is tested)."""
    init_ros(argv if argv is not None else sys.argv)
    return run_node_process(
        ServoLnnNode(), compat.autostart_or_stay_unconfigured(start), on_exit=write_latency_log
    )


if __name__ == "__main__":
    sys.exit(main())
