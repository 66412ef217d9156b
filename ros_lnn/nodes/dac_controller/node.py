"""``dac_controller``: lifecycle node running the tensor-invariant DAC (seed 004) on a robot's joint states.

configure   build the certain model (:func:`.build.controller_model`: an arm model's
            identified rigid body with its friction and residual, a URDF from ``robot_description``
            (parameter, else the topic, transient local) or ``model_path`` (URDF/YAML), else the shipped
            config/dac_chain.urdf), the law and the effort map
activate    subscribe ``joint_states``, ``~/joint_trajectory`` (laws I/II, feedforward_pd), ``~/ee_target``
            (law III);
            publish per joint state:
              ~/port_command          Float64MultiArray 6N: [f_1…f_N, m_1…m_N] (layout labels f,m /
                                      bodies / x,y,z): τ_c, plus E τ̂_res with a learned port
              ~/joint_effort_command  Float64MultiArray, efforts u = Gᵀ τ_c (+ τ̂_res) in
                                      ``joint_names`` order, clamped
            and, from timers, ~/markers (MarkerArray of the newest sample: body forces as arrows, end
            effector, target, obstacles) and /diagnostics
deactivate  subscriptions and timers stop; cleanup drops the model.

Safety policy (all documented in docs/nodes.md):
  * nothing non-finite is ever published; a non-finite or wrong-sized input is rejected and counted;
  * stale joint states (none for ``state_timeout_s``): a watchdog publishes zero efforts and a zero port
    (the robot's own brakes/gravity hold take over), diagnostics ERROR, until fresh states arrive;
  * no target yet: hold the configuration found at the first joint state (end-effector pose for law III,
    joint positions for laws I/II); after a trajectory's last point: hold that point; with
    ``target_timeout_s`` > 0 a target not renewed in time is dropped and the arm holds where it is;
  * efforts are clamped to ``effort_limits`` (URDF limits by default); saturation shows in diagnostics;
  * joint position and velocity limits (URDF, or ``position_limits`` / ``velocity_limits``): soft limits
    brake before them (:mod:`ros_lnn.control.joint_limits`); a violation (a position beyond a hard
    limit, a velocity beyond ``limit_velocity_tolerance`` × its limit) is a protective stop, latched
    until the node is deactivated and activated again, /diagnostics ERROR naming the joint: a zero port
    and efforts that brake every joint to rest inside its soft limits and hold it against gravity
    (``limit_reaction: brake``, :mod:`ros_lnn.control.protective_stop`), or zero efforts (``zero``);
    ``fault_reaction: brake`` stops the same way on a fault;
  * learned port (``residual_model``): a model whose joints differ is refused at configure (one line);
    its correction is bounded by ``residual_limit``; a non-finite correction is dropped (the certain
    model's efforts go out), counted, and diagnostics WARN;
  * an arm model whose friction and residual give a non-finite torque: zero efforts and port, counted
    (``model_non_finite``), one error line per activation, diagnostics WARN.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from ...control.pipeline import DacPipeline, PipelineOutput
from ...errors import RosLnnError
from .. import compat
from ..clocks import steady_timer
from ..diagnostics import CountWindow, RateLatency, warn_throttled
from ..lifecycle import LifecycleTeardown, configure_and_activate
from ..params import ParameterValues
from ..process import node_main
from ..qos import COMMAND_QOS, input_qos, output_publisher
from ..robot_description import RobotDescription
from ..stamps import stamp_ns
from .build import (
    built_in_circle,
    controller_model,
    fault_monitor,
    load_residual,
    make_pipeline,
    residual_limit,
)
from .diagnostics import (
    REJECT_REASONS,
    RESIDUAL_COUNTS,
    controller_diagnostics,
    controller_values,
)
from .faults import LATCHED_REACTIONS, FaultReactions
from .inputs import (
    JointOrder,
    TargetFrames,
    orientation_problem,
    outside_workspace,
    stamp_problem,
    trajectory_arrays,
    trajectory_problem,
)
from .messages import array_msg, command_templates, effort_layout, marker_array, port_layout
from .parameters import GAIN_PARAMETERS, PARAMETERS, gains_from_values

__all__ = ["DacControllerNode", "main", "start"]


class DacControllerNode(FaultReactions, ParameterValues, LifecycleTeardown, LifecycleNode):
    _configured_attribute = "pipeline"
    _io_attributes = ("_marker_sample",)

    def __init__(self, node_name: str = "dac_controller", **kwargs):
        super().__init__(node_name, **kwargs)
        self.counts = {}
        self.pipeline: DacPipeline | None = None
        self.values = PARAMETERS.attach(
            self,
            configured=lambda: self.pipeline is not None,
            extra_check=self._per_joint_problem,
            on_change=self._apply_parameters,
        )
        self.description = RobotDescription(self)
        self.last_error = ""
        self.stale, self.fault, self._fault_time = False, "", -math.inf
        self.limit_violation = ""  # the latched joint limit violation ('' when none)
        self._soft_limit_time, self.soft_limited_joints = -math.inf, ""
        self._subs, self._timers, self._pubs = [], [], {}
        self.counts.update(
            dict.fromkeys(
                REJECT_REASONS
                + RESIDUAL_COUNTS
                + (
                    "processed",
                    "saturated",
                    "singular_damped",
                    "internal_error",
                    "fault",
                    "limit_soft",
                    "limit_violation",
                    "partial",
                    "other_joints",
                    "model_non_finite",
                    "parameter_refused",
                ),
                0,
            )
        )
        self.window = CountWindow()
        self.residual = None  # the learned port's runtime (residual_model)
        self._residual_fault_time = self._singular_time = self._model_fault_time = -math.inf
        self._model_fault_logged = False
        self._targets = TargetFrames()  # target_frames and tf2
        self.stats = RateLatency()
        self.cpu_times: deque[float] = deque(
            maxlen=self.stats.latencies.maxlen
        )  # callback thread CPU per processed sample [s]
        self._marker_sample: tuple[PipelineOutput, np.ndarray] | None = None

    # -- parameters -----------------------------------------------------------------------------
    def _per_joint_problem(self, values: dict) -> str:
        """A running node's residual_limit, joint_kp and joint_kd have one number, or one per joint."""
        if self.pipeline is None:
            return ""
        names = self.pipeline.joint_names
        for name, allowed in (("residual_limit", (0, 1)), ("joint_kp", (1,)), ("joint_kd", (1,))):
            if name in values and len(values[name] or []) not in (*allowed, len(names)):
                return f"{name} needs one number, or one per joint {names}"
        return ""

    def _apply_parameters(self, names) -> None:
        """After a set: new gains reach the law from the next joint state on."""
        gains = [n for n in names if n in GAIN_PARAMETERS]
        if gains and self.pipeline is not None:
            self.pipeline.set_gains(gains_from_values(self.values))
            self.get_logger().info("gains set: " + ", ".join(f"{n} {self.p(n)}" for n in gains))
        if "residual_limit" in names and self.pipeline is not None and self.residual:
            self.pipeline.set_residual(self.residual, self.residual_limit(self.pipeline))
        if {"joint_kp", "joint_kd"} & set(names) and self.pipeline is not None:
            self.pipeline.set_joint_gains(self.p("joint_kp"), self.p("joint_kd"))

    def check_all_parameters(self) -> None:
        """ConfigError naming the first parameter (or rule) that does not hold."""
        PARAMETERS.check(self)

    # -- lifecycle ------------------------------------------------------------------------------
    def build_pipeline(self) -> DacPipeline:
        from ...control.frames import FrameTable
        from ..model_params import model_limits

        self.check_all_parameters()
        limits = model_limits(self.values)

        def description():
            timeout = float(self.p("robot_description_timeout_s"))
            return self.description.take(self.p("robot_description"), timeout)

        logger = self.get_logger()
        model, compensation, self.described = controller_model(self.values, description, logger, limits)
        pipeline = make_pipeline(model, self.values, compensation)
        self._targets.table = FrameTable(self.p("target_frames"), self.p("target_frame_poses"))
        self.residual = None
        if self.p("residual_model"):
            self.residual = load_residual(self.p("residual_model"), pipeline, self.get_logger(), limits)
            pipeline.set_residual(self.residual, self.residual_limit(pipeline))
        return pipeline

    def residual_limit(self, pipeline: DacPipeline) -> np.ndarray:
        return residual_limit(self.p("residual_limit"), pipeline, self.residual)

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.pipeline = self.build_pipeline()
        except Exception as exc:  # noqa: BLE001 - configure says why in one line whatever failed
            self.pipeline = None
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.last_error = text if isinstance(exc, RosLnnError) else f"{type(exc).__name__}: {text}"
            self.get_logger().error(f"configure failed: {self.last_error}")
            return TransitionCallbackReturn.FAILURE
        self._pubs = {
            "port": output_publisher(self.create_lifecycle_publisher, Float64MultiArray, "~/port_command"),
            "effort": output_publisher(
                self.create_lifecycle_publisher, Float64MultiArray, "~/joint_effort_command"
            ),
            "diagnostics": self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS),
        }
        if self.p("publish_markers"):
            self._pubs["markers"] = output_publisher(
                self.create_lifecycle_publisher, MarkerArray, "~/markers", COMMAND_QOS
            )
        model = self.pipeline.model
        self._port_layout = port_layout(model.body_names)
        self._effort_layout = effort_layout(self.pipeline.joint_names)
        n_port, n_eff = 6 * model.n_bodies, len(self.pipeline.joint_names)
        self._templates = command_templates(self._port_layout, self._effort_layout)
        self._zero_commands = (np.zeros(n_port), np.zeros(n_eff))
        from ...control.monitor import reach_bound

        self._workspace = reach_bound(
            self.pipeline.pinocchio.pin, self.pipeline.pinocchio.frame_ids["end_effector"]
        )
        self.get_logger().info(
            f"configured: {self.described}: model '{model.name}' ({model.n_bodies} bodies), law "
            f"{self.p('law')}, joints {self.pipeline.joint_names}"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self._subs = [
            self.create_subscription(JointState, "joint_states", self._on_joint_state, self._input_qos()),
            self.create_subscription(JointTrajectory, "~/joint_trajectory", self._on_trajectory, COMMAND_QOS),
            self.create_subscription(PoseStamped, "~/ee_target", self._on_ee_target, COMMAND_QOS),
        ]
        # the stale-state watchdog and diagnostics on the steady clock: they must fire when /clock stops
        self._timers = [
            steady_timer(self, self.p("watchdog_period_s"), self._watchdog),
            steady_timer(self, self.p("diagnostics_period_s"), self._publish_diagnostics),
        ]
        if "markers" in self._pubs and float(self.p("marker_period_s")) > 0:
            # off the per-sample path: building and converting a MarkerArray costs more than a whole step
            self._timers.append(steady_timer(self, self.p("marker_period_s"), self._publish_markers))
        self._marker_sample = None
        self._monitor = fault_monitor(self.values)
        self.fault, self._fault_time = "", -math.inf
        self._reaction = self.p("fault_reaction")
        self._unused_logged: set[str] = set()
        self.last_state_time: float | None = None
        self.last_target_time: float | None = None
        self.stale = False
        self.last_output: PipelineOutput | None = None
        self._target_timeout = float(self.p("target_timeout_s"))  # read once: the message path stays lean
        self._state_timeout = float(self.p("state_timeout_s"))
        self._last_stamp = 0  # of the last joint state (ns): the protective stop's latency
        self._targets.start_tf(self, self.p("use_tf"))
        assert self.pipeline is not None  # activate follows a successful configure
        self._joint_order = JointOrder(self.pipeline.joint_names, float(self.p("joint_state_merge_window_s")))
        self.pipeline.hold()
        self.pipeline.reset_compensation()
        self._model_fault_logged = False
        if self.pipeline.joint_limits is not None:  # re-activation resets a latched limit violation
            self.pipeline.joint_limits.reset()
        if self.pipeline.protective_stop is not None:
            self.pipeline.protective_stop.reset()
        self.limit_violation = ""
        self.window.start(self.counts)
        if float(self.p("circle_radius")) > 0:
            self.pipeline.set_ee_path(built_in_circle(self.values, self._now_s()))
        self.get_logger().info("activated")
        return super().on_activate(state)

    def _input_qos(self):
        return input_qos(self.p("input_queue_depth"))

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._drop_io()
        self._targets.stop_tf()
        return super().on_deactivate(state)

    # -- inputs ---------------------------------------------------------------------------------
    def _reject(self, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        warn_throttled(self, reason, f"{reason}: {detail}")

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_ee_target(self, msg: PoseStamped) -> None:
        assert self.pipeline is not None  # subscriptions live from activate to deactivate
        if self.pipeline.law != "end_effector":
            return self._unused("~/ee_target", f"law {self.pipeline.law} follows ~/joint_trajectory")
        if float(self.p("circle_radius")) > 0:
            return self._unused("~/ee_target", "the built-in circle (circle_radius > 0) is followed")
        frame = msg.header.frame_id
        p, o = msg.pose.position, msg.pose.orientation
        try:
            position = [p.x, p.y, p.z]
            given = [o.w, o.x, o.y, o.z]
            if self.pipeline.ee_attitude:  # the orientation is tracked: a unit quaternion or refused
                reason = orientation_problem(given)
                if reason:
                    return self._reject("bad_target", reason)
            # position only: the default (0, 0, 0, 0) is no orientation
            quat = given if self.pipeline.ee_attitude or any(given) else None
            if frame and frame != self.p("frame_id"):
                position, quat = self._targets.to_world(frame, self.p("frame_id"), position, quat)
            reason = outside_workspace(position, self._workspace, float(self.p("workspace_margin")))
            if reason:
                return self._reject("bad_target", reason)
            self.pipeline.set_ee_target(position, quat)
            self.last_target_time = time.monotonic()
        except LookupError as exc:
            self._reject("bad_target", str(exc))
        except (RosLnnError, ValueError, ArithmeticError) as exc:
            self._reject("bad_target", f"~/ee_target: {exc}")

    def _unused(self, topic: str, why: str) -> None:
        """An input the running law does not use: counted, logged once per activation."""
        self.counts["unused_input"] += 1
        if topic not in self._unused_logged:
            self._unused_logged.add(topic)
            self.get_logger().warning(f"{topic} ignored: {why} (counted as unused_input; logged once)")

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        assert self.pipeline is not None  # subscriptions live from activate to deactivate
        if self.pipeline.law in ("end_effector", "gravity_compensation"):
            follows = "follows ~/ee_target" if self.pipeline.law == "end_effector" else "follows no target"
            return self._unused("~/joint_trajectory", f"law {self.pipeline.law} {follows}")
        reason = trajectory_problem(msg, self.pipeline.joint_names)
        if reason:
            return self._reject("bad_trajectory", reason)
        start = stamp_ns(msg.header.stamp) * 1e-9 or self._now_s()
        try:
            self.pipeline.set_joint_trajectory(*trajectory_arrays(msg, self.pipeline.joint_names, start))
            self.last_target_time = time.monotonic()
        except (RosLnnError, IndexError, ValueError, OverflowError, TypeError) as exc:
            self._reject("bad_trajectory", f"~/joint_trajectory: {exc}")

    def _set_stop_latency(self, now_ns: int, stamp: int) -> None:
        """How late the protective stop acts on this state — its age plus the interval since the last
        one (the hold until the next command) — so a late loop brakes softer (:mod:`ros_lnn.control.
        protective_stop`); unknown for an unstamped state."""
        stop = self.pipeline.protective_stop if self.pipeline is not None else None
        last, self._last_stamp = self._last_stamp, stamp
        if stop is None:
            return
        if not stamp:
            stop.latency_s = 0.0
            return
        age = max(0, now_ns - stamp)
        interval = stamp - last if last and 0 < stamp - last < self._state_timeout * 1e9 else 0
        stop.latency_s = (age + interval) * 1e-9

    def _on_joint_state(self, msg: JointState) -> None:
        assert self.pipeline is not None  # subscriptions live from activate to deactivate
        t0, c0 = time.perf_counter(), time.thread_time()
        self.stats.arrive()
        names = msg.name
        stamp = stamp_ns(msg.header.stamp)
        now_ns = self.get_clock().now().nanoseconds
        reason, text = stamp_problem(now_ns, stamp, self._state_timeout)
        if reason == "future_stamp":
            return self._reject(reason, text)
        if reason:  # no age to judge, or too old: zero efforts
            self.counts[reason] += 1
            warn_throttled(self, reason, text)
            return self._publish_commands(*self._zero_commands)
        self._set_stop_latency(now_ns, stamp)
        reason, text, state_stamp, q, qd = self._joint_order.read(names, msg.position, msg.velocity, stamp)
        if reason in ("partial", "other_joints"):  # a part held for merging, or another device's joints
            self.counts[reason] += 1
            merge = self._joint_order.merge
            self.counts["missing_joint"] = merge.dropped if merge is not None else 0
            return None
        if reason:
            return self._reject(reason, text)
        timeout = self._target_timeout
        if (
            timeout > 0
            and self.last_target_time is not None
            and time.monotonic() - self.last_target_time > timeout
        ):
            warn_throttled(
                self, "stale_target", f"target not renewed for {timeout} s: holding the current pose"
            )
            self.counts["stale_target"] += 1
            self.last_target_time = None
            self.pipeline.hold(q)
        try:
            pipeline = self.pipeline
            # a trajectory is sampled at the time the state was measured (now for an unstamped one)
            t = (state_stamp * 1e-9 if state_stamp else self._now_s()) if pipeline.needs_clock else 0.0
            out = pipeline.step(q, qd, t)
        except RosLnnError as exc:
            return self._reject("bad_joint_state", str(exc))
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:  # never a dead process
            self._reject(
                "step_error", f"the law failed at this state ({type(exc).__name__}: {exc}); zero efforts"
            )
            return self._publish_commands(*self._zero_commands)
        if out.guarded:
            self.counts["singular_damped"] += 1
            self._singular_time = time.monotonic()
            warn_throttled(self, "singular", "singular task at this configuration: damped task inverse")
        port, effort = out.result.tau_c, out.efforts.effort
        state = out.efforts.residual_state
        if out.efforts.compensation_state == "non_finite":
            port = self._model_fault()
        elif state != "off" or out.efforts.compensation_part is not None:
            port = self._learned_port(out, port, state)
        if not math.isfinite(
            float(port.sum()) + float(effort.sum())
        ):  # NaN/inf anywhere (or a sum past 1e308)
            self._reject("non_finite_output", "the law produced a non-finite command; zero efforts sent")
            port, effort = np.zeros_like(port), np.zeros_like(effort)
        self.last_state_time = time.monotonic()
        self.stale = False
        latched = self.fault and self._reaction in LATCHED_REACTIONS
        if not latched:
            saturated = bool(out.efforts.saturated.any())
            set_point = self.pipeline.law == "end_effector" and not self.pipeline.needs_clock
            error = float(np.linalg.norm(out.result.task_error)) if set_point else math.nan
            cause = self._monitor.update(self.last_state_time, saturated, error)
            if cause:
                self._trip(cause, q)
                latched = self._reaction in LATCHED_REACTIONS
        if latched:
            port, effort = self._stopped(q, qd)
        if out.limits is not None:
            port, effort = self._joint_limits(out.limits, port, effort)
        self.counts["processed"] += 1
        self.counts["saturated"] += int(out.efforts.saturated.any())
        self.last_output = out
        self._publish_commands(port, effort)
        self._marker_sample = (out, port)  # published by the marker timer
        self.stats.latency(time.perf_counter() - t0)
        self.cpu_times.append(time.thread_time() - c0)

    def _publish_commands(self, port, effort) -> None:
        templates, pubs = self._templates, self._pubs
        if templates is not None:
            pubs["port"].publish(templates[0].fill(0, 0, port))
            pubs["effort"].publish(templates[1].fill(0, 0, effort))
        else:
            pubs["port"].publish(array_msg(port, self._port_layout))
            pubs["effort"].publish(array_msg(effort, self._effort_layout))

    def _publish_markers(self) -> None:
        sample, self._marker_sample = self._marker_sample, None
        if sample is not None and "markers" in self._pubs:
            self._pubs["markers"].publish(self._markers(*sample))

    def _watchdog(self) -> None:
        if self.last_state_time is None:
            return
        if time.monotonic() - self.last_state_time > self._state_timeout:
            if not self.stale:
                self.get_logger().warning("joint_states stale: publishing zero efforts until they resume")
            self.stale = True
            self.counts["stale_state"] += 1
            self._publish_commands(*self._zero_commands)

    # -- outputs --------------------------------------------------------------------------------
    def _markers(self, out, port) -> MarkerArray:
        assert self.pipeline is not None  # the marker timer lives from activate to deactivate
        return marker_array(
            out,
            port,
            self.pipeline.model.n_bodies,
            self.pipeline.controller.obstacles,
            self.p("frame_id"),
            self.get_clock().now().to_msg(),
            float(self.p("force_scale")),
        )

    def diagnostics_values(self) -> dict:
        return controller_values(self)

    def _publish_diagnostics(self) -> None:
        self._pubs["diagnostics"].publish(controller_diagnostics(self))


def start(node: DacControllerNode) -> bool:
    """configure + activate; False (with the error already logged) when configure fails."""
    return configure_and_activate(node, lambda: node.pipeline is not None)


def main(argv=None) -> int:
    """The node process. Executor: the SingleThreadedExecutor unless ROS_LNN_EXECUTOR=events
    (nodes/process.py: services answer under an input flood)."""
    return node_main("dac_controller", DacControllerNode, argv, compat.autostart_or_stay_unconfigured(start))


if __name__ == "__main__":
    sys.exit(main())
