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

import sys
import time
from array import array
from typing import TYPE_CHECKING

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from ...errors import RosLnnError
from ...estimation.servo_estimator import ServoEstimator
from .. import compat, lifecycle
from ..clocks import steady_timer
from ..diagnostics import (
    CountWindow,
    RateLatency,
    guarded,
    report_error,
    warn_throttled,
)
from ..intake import InputLock
from ..joint_state_reader import NOT_REJECTED, JointStateReader, merge_window_ns, trajectory_size
from ..lifecycle import LifecycleTeardown, configure_and_activate
from ..messages import (
    ENERGY_TYPE,
    PREDICTION_TYPE,
    report_interfaces,
)
from ..params import ParameterValues
from ..process import node_main
from ..qos import COMMAND_QOS, output_publisher
from ..serialized import PackedMessages, PackersByFrame
from ..trajectory_command import command_bound_problem
from .messages import output_builders, plan_arrays, rollout_msg, servo_markers
from .parameters import PARAMETERS, resolve_model_path
from .report import COUNTED, INVALID_REASONS, servo_diagnostics, servo_values, write_latency_log

if TYPE_CHECKING:
    from rclpy.timer import Timer

    from ...inference.runtime import ServoLnnRuntime

#: Bigger array commands are refused before they are read.
MAX_ARRAY_COMMAND_BYTES = 4096
#: joint_states per wake-up of the intake thread (ROS_LNN_EXECUTOR intake: nodes/intake.py).
INTAKE_BATCH = 10


def _accept(parameters):
    from rcl_interfaces.msg import SetParametersResult

    return SetParametersResult(successful=True)


class ServoLnnNode(ParameterValues, LifecycleTeardown, LifecycleNode):
    _configured_attribute = "runtime"
    _io_attributes = ("_marker_timer",)

    def __init__(self, node_name: str = "servo_lnn", **kwargs):
        super().__init__(node_name, **kwargs)
        self.runtime: ServoLnnRuntime | None = None
        self.estimator: ServoEstimator | None = None
        self.last_error = ""
        self._subs, self._timers, self._pubs = [], [], {}
        self.input_lock = InputLock()  # the joint_states path against timers and commands
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
        from ...inference.runtime import ServoLnnRuntime
        from ..model_params import model_limits

        PARAMETERS.check(self)
        v = self.values
        path = resolve_model_path(v["model_path"])
        runtime = ServoLnnRuntime(
            path,
            v["free_joints"] or None,
            v["servo_joints"] or None,
            threads=v["model_threads"],
            limits=model_limits(v),
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
        self.reader = JointStateReader(
            runtime.joints,
            runtime.n_f,
            state=self.estimator.joint_state,
            merge_window_ns=merge_window_ns(v["joint_state_merge_window_s"]),
        )
        self._packers = PackersByFrame(self._make_packer)
        self._marker_timer: Timer | None = None
        self._marker_stamp: tuple[int, int] | None = None
        self._rollout_due = 0.0
        self._latency_path = v["latency_log"]
        report_interfaces(self.get_logger())
        pub = self.create_lifecycle_publisher
        self._pubs = {
            "driving_force": output_publisher(pub, JointState, "~/driving_force"),
            "prediction": output_publisher(pub, PREDICTION_TYPE, "~/prediction"),
            "energy": output_publisher(pub, ENERGY_TYPE, "~/energy"),
            "diagnostics": pub(DiagnosticArray, "/diagnostics", COMMAND_QOS),
            "predicted_trajectory": output_publisher(
                pub, JointTrajectory, "~/predicted_trajectory", COMMAND_QOS
            ),
        }
        if v["publish_markers"]:
            self._pubs["markers"] = output_publisher(pub, MarkerArray, "~/markers", COMMAND_QOS)

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        if not lifecycle.activate_io(self, self._open_io):
            return TransitionCallbackReturn.FAILURE
        return super().on_activate(state)

    def _open_io(self) -> None:
        v = self.values
        # one message at a time through the estimator: short batches keep the node's lock (its timers,
        # and the services behind them) free every few ms under a flood
        lifecycle.subscribe_joint_states(self, v["input_queue_depth"], batch_limit=INTAKE_BATCH)
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
        lifecycle.restart_input(self)
        self._sim_time = bool(self.get_parameter("use_sim_time").value)

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

    def _dropped_parts(self) -> None:
        """Parts of a split joint state that found no partner in the merge window: missing_joint."""
        assert self.reader.merge is not None  # called when merging
        detail = self.reader.merge.detail
        self.counts["missing_joint"] += self.reader.take_dropped()
        warn_throttled(self, "missing_joint", f"joint_states part dropped (missing_joint): {detail}")

    def _on_joint_states(self, raws: list) -> None:
        for raw in raws:
            self._on_joint_state(raw)

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
        if reader.merge is not None and reader.merge.dropped:
            self._dropped_parts()
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
        force, prediction, energy = self._packers[frame].messages(sec, nanosec, sample)
        pubs = self._pubs
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
        return PackedMessages(output_builders(est, frame), est.size)

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
        try:
            plan = plan_arrays(msg, est.servo_joints, lambda: self.get_clock().now().nanoseconds)
            if plan is None:
                est.cancel_plan()  # an empty trajectory cancels the plan (as in ros2_control)
                return
            est.set_plan(*plan)
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
        with np.errstate(invalid="ignore"):
            beyond = command_bound_problem(*data.reshape(-1, n_e))
        if beyond:
            return self._bad_command(beyond)
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
        return servo_markers(stamp, est, self.values)

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
        msg = rollout_msg(stamp, self.values["frame_id"], self.estimator.joints, rollout)
        if msg is None:
            self.counts["non_finite_output"] += 1
            return
        self._pubs["predicted_trajectory"].publish(msg)

    def diagnostics_values(self) -> dict:
        return servo_values(self)

    @guarded("diagnostics")
    def _publish_diagnostics(self) -> None:
        self._pubs["diagnostics"].publish(servo_diagnostics(self))


def start(node: ServoLnnNode) -> bool:
    """configure + activate; False (with the error already logged) when configure fails."""
    return configure_and_activate(node, lambda: node.runtime is not None)


def main(argv=None) -> int:
    """The node process, on the executor of ROS_LNN_EXECUTOR (default ``intake``: joint_states on a
    thread of their own, the rest on the SingleThreadedExecutor; nodes/process.py)."""
    return node_main(
        "servo_lnn",
        ServoLnnNode,
        argv,
        compat.autostart_or_stay_unconfigured(start),
        on_exit=write_latency_log,
    )


if __name__ == "__main__":
    sys.exit(main())
