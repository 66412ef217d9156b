"""``dac_controller``: lifecycle node running the tensor-invariant DAC (seed 004) on a robot's joint states.

configure   build the multibody model from ``robot_description`` (URDF string) or ``model_path``
            (URDF/YAML; empty = the shipped config/dac_chain.urdf), the law and the effort map
activate    subscribe ``joint_states``, ``~/joint_trajectory`` (laws I/II), ``~/ee_target`` (law III);
            publish per joint state:
              ~/port_command          Float64MultiArray 6N: [f_1…f_N, m_1…m_N] (layout labels f,m /
                                      bodies / x,y,z): τ_c, plus E τ̂_res with a learned port
              ~/joint_effort_command  Float64MultiArray, efforts u = Gᵀ τ_c (+ τ̂_res) in
                                      ``joint_names`` order, clamped
            and, from timers, ~/markers (MarkerArray of the newest sample: body forces as arrows, end
            effector, target, obstacles) and /diagnostics
deactivate  subscriptions and timers stop; cleanup drops the model.

Safety policy (all documented in README):
  * nothing non-finite is ever published; a non-finite or wrong-sized input is rejected and counted;
  * stale joint states (none for ``state_timeout_s``): a watchdog publishes zero efforts and a zero port
    (the robot's own brakes/gravity hold take over), diagnostics ERROR, until fresh states arrive;
  * no target yet: hold the configuration found at the first joint state (end-effector pose for law III,
    joint positions for laws I/II); after a trajectory's last point: hold that point; with
    ``target_timeout_s`` > 0 a target not renewed in time is dropped and the arm holds where it is;
  * efforts are clamped to ``effort_limits`` (URDF limits by default); saturation shows in diagnostics;
  * learned port (``residual_model``): a model whose joints differ is refused at configure (one line);
    its correction is bounded by ``residual_limit``; a non-finite correction is dropped (the certain
    model's efforts go out), counted, and diagnostics WARN.
"""

from __future__ import annotations

import array
import math
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Point, PoseStamped
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from ..control.dac import LAWS, Gains
from ..control.pipeline import DacPipeline, PipelineOutput
from ..errors import ConfigError, RosLnnError
from . import compat
from .clocks import steady_timer
from .diagnostics import CountWindow, RateLatency, diagnostic_status, status_name, warn_throttled
from .lifecycle import LifecycleTeardown, configure_and_activate
from .params import CONFIGURE, LIVE, MAX_PATH, STARTUP, Param, ParameterTable
from .process import init_ros, run_node_process
from .qos import COMMAND_QOS, OVERRIDES, STREAM_QOS, input_qos, output_qos
from .serialized import SerializedTemplate
from .stamps import duration_ns, stamp_ns

if TYPE_CHECKING:
    from ..control.frames import FrameTable


def _obstacle_quadruples(values) -> str:
    values = list(values)
    if len(values) % 4:
        return f"has {len(values)} numbers; give x, y, z, radius per obstacle"
    if any(r <= 0 for r in values[3::4]):
        return "needs a positive radius (x, y, z, radius per obstacle)"
    return ""


def _not_all_zero(values) -> str:
    return "" if any(values) else "must not be all zero"


def _gains_hold(values: dict) -> str:
    try:
        Gains(**{field: values[name] for name, field in GAIN_PARAMETERS.items()}).validate()
    except ConfigError as exc:
        return str(exc)
    return ""


#: Longest robot_description taken (a URDF with its <ros2_control> block is tens of kB).
MAX_DESCRIPTION = 4 * 1024 * 1024

#: Parameters that set the law's gains, and the :class:`Gains` field each one sets.
GAIN_PARAMETERS = {
    "kd_linear": "kd_linear",
    "kd_angular": "kd_angular",
    "mass_weighted": "mass_weighted",
    "lambda_position": "lambda_position",
    "lambda_attitude": "lambda_attitude",
    "obstacle_gain": "obstacle_gain",
    "task_damping": "damping",
}

# The parameter table (nodes/params.py). LIVE ones are taken by a running node (``ros2 param set``): the
# gains and the learned port's bound apply from the next joint state on, the marker scale at once.
# CONFIGURE ones are read at configure or activate and refused while the node is configured.
PARAMETERS = ParameterTable(
    Param(
        "robot_description",
        "",
        "URDF of the arm (string); empty = read model_path",
        CONFIGURE,
        max_length=MAX_DESCRIPTION,
    ),
    Param(
        "model_path",
        "",
        "URDF or multibody YAML file; empty = the shipped config/dac_chain.urdf",
        CONFIGURE,
        max_length=MAX_PATH,
    ),
    Param(
        "joint_names",
        [],
        "actuated joints in the order of ~/joint_effort_command; empty = the model's "
        "revolute and prismatic joints",
        CONFIGURE,
        items=str,
        unique=True,
    ),
    Param(
        "law",
        "end_effector",
        "control law: velocity (I), pose (II) or end_effector (III)",
        CONFIGURE,
        choices=tuple(LAWS),
    ),
    Param("ee_link", "tool0", "end-effector link for law III (empty = CoM of the last body)", CONFIGURE),
    Param(
        "ee_attitude",
        False,
        "law III tracks the ~/ee_target orientation too (6-D task) instead of position only",
        CONFIGURE,
    ),
    Param(
        "gravity",
        [0.0, 0.0, -9.81],
        "gravity in the world frame [m/s²]",
        CONFIGURE,
        size=(3,),
        ge=-1e3,
        le=1e3,
    ),
    Param(
        "kd_linear",
        20.0,
        "K_d for linear velocity errors: a rate [1/s] (K_d = k 𝓜) with mass_weighted, else [N s/m]",
        LIVE,
        gt=0.0,
        le=1e6,
    ),
    Param(
        "kd_angular",
        20.0,
        "K_d for angular velocity errors: a rate [1/s] with mass_weighted, else [N m s]",
        LIVE,
        gt=0.0,
        le=1e6,
    ),
    Param(
        "mass_weighted",
        True,
        "K_d = k 𝓜 with kd_* as rates [1/s]; false: K_d = diag(kd_linear, kd_angular) [N s/m, N m s]",
        CONFIGURE,
    ),
    Param("lambda_position", 5.0, "Λ for position errors [1/s]", LIVE, gt=0.0, le=1e6),
    Param("lambda_attitude", 5.0, "Λ for attitude errors [1/s]", LIVE, gt=0.0, le=1e6),
    Param(
        "task_damping",
        0.05,
        "μ of the damped task inverse (robust near singular arm poses; 0 = exact)",
        LIVE,
        ge=0.0,
        le=1e3,
    ),
    Param(
        "obstacle_gain",
        1.0,
        "k_o: weight of the obstacle push in the null space of the task (law III; 0 = off)",
        LIVE,
        ge=0.0,
        le=1e6,
    ),
    Param(
        "circle_radius",
        0.0,
        "> 0: law III follows a built-in circle (demo) instead of ~/ee_target [m]",
        CONFIGURE,
        ge=0.0,
        le=1e3,
    ),
    Param(
        "circle_center",
        [0.45, 0.0, 0.0],
        "centre of the built-in circle [m]",
        CONFIGURE,
        size=(3,),
        ge=-1e3,
        le=1e3,
    ),
    Param(
        "circle_normal",
        [1.0, 0.0, 0.0],
        "normal of the circle's plane",
        CONFIGURE,
        size=(3,),
        ge=-1e3,
        le=1e3,
        check=_not_all_zero,
    ),
    Param("circle_period_s", 4.0, "period of the built-in circle [s]", CONFIGURE, gt=0.0, le=1e6),
    Param(
        "circle_phase", 0.0, "phase of the built-in circle at activation [rad]", CONFIGURE, ge=-1e6, le=1e6
    ),
    Param(
        "obstacles",
        [],
        "spherical obstacles in the world frame, flattened x, y, z, radius per obstacle",
        CONFIGURE,
        items=float,
        ge=-1e3,
        le=1e3,
        check=_obstacle_quadruples,
    ),
    Param(
        "obstacle_influence",
        0.1,
        "clearance below which the obstacle potential acts [m]",
        CONFIGURE,
        gt=0.0,
        le=1e3,
    ),
    Param("obstacle_eta", 5.0, "largest obstacle push η [N]", CONFIGURE, ge=0.0, le=1e6),
    Param(
        "residual_model",
        "",
        "learned port: ONNX model from `ros-lnn train --model dac_residual` (its "
        "joints must be joint_names); its τ̂_res(q, q̇, q̈_r) is added to the efforts; empty = certain model "
        "only",
        CONFIGURE,
        max_length=MAX_PATH,
    ),
    Param(
        "residual_limit",
        [],
        "bound on |τ̂_res| per joint (one number for all, or one per joint_names "
        "entry); empty = 1.5 × the largest |τ_res| of the model's training data (a quarter of the effort "
        "limits if not recorded)",
        LIVE,
        items=float,
        ge=0.0,
        le=1e6,
    ),
    Param(
        "effort_limits",
        [],
        "|effort| limits per joint_names entry; empty = URDF limits (default_effort_limit where none)",
        CONFIGURE,
        items=float,
        gt=0.0,
        le=1e9,
    ),
    Param("default_effort_limit", 50.0, "limit for joints without one [N m]", CONFIGURE, gt=0.0, le=1e9),
    Param(
        "input_queue_depth",
        1,
        "joint_states kept while the node is busy or descheduled (best effort); 1: a late "
        "step acts on the newest state, never on a backlog; deeper queues process each "
        "state in order, trading latency for completeness",
        CONFIGURE,
        ge=1,
        le=100000,
    ),
    Param(
        "state_timeout_s",
        0.1,
        "joint states older than this are stale: zero efforts are published",
        CONFIGURE,
        gt=0.0,
        le=3600.0,
    ),
    Param(
        "target_timeout_s",
        0.0,
        "> 0: an ~/ee_target or ~/joint_trajectory not renewed for this long is "
        "dropped and the arm holds where it is; 0 = targets never go stale",
        CONFIGURE,
        ge=0.0,
        le=1e6,
    ),
    Param("watchdog_period_s", 0.02, "how often the stale-state watchdog runs", CONFIGURE, ge=0.001, le=10.0),
    Param("frame_id", "world", "world frame of targets, obstacles and markers", CONFIGURE),
    Param(
        "target_frames",
        [],
        "frames ~/ee_target may also come in (fixed ones), each with its pose in "
        "frame_id in target_frame_poses",
        CONFIGURE,
        items=str,
        unique=True,
    ),
    Param(
        "target_frame_poses",
        [],
        "pose of each target_frames entry in frame_id: x, y, z, qx, qy, qz, qw per frame",
        CONFIGURE,
        items=float,
        ge=-1e6,
        le=1e6,
    ),
    Param(
        "use_tf",
        True,
        "look up other ~/ee_target frames in /tf and /tf_static through tf2_ros (where installed)",
        CONFIGURE,
    ),
    Param("publish_markers", True, "publish ~/markers", CONFIGURE),
    Param(
        "marker_period_s",
        0.1,
        "period of ~/markers (a timer publishes the newest sample's markers; 0 = off)",
        CONFIGURE,
        ge=0.001,
        le=3600.0,
        off=0.0,
    ),
    Param("force_scale", 0.02, "marker arrow length per newton [m/N]", LIVE, ge=0.0, le=1e3),
    Param(
        "diagnostics_period_s",
        1.0,
        "period of /diagnostics (its counts cover the last 5 periods)",
        CONFIGURE,
        ge=0.01,
        le=3600.0,
    ),
    Param(
        "workspace_margin",
        0.1,
        "~/ee_target farther than the arm's reach (URDF link lengths from the first joint) plus this is "
        "refused [m]",
        CONFIGURE,
        ge=0.0,
        le=100.0,
    ),
    Param(
        "saturation_timeout_s",
        2.0,
        "efforts at their limits without a break for this long is a fault: /diagnostics ERROR and "
        "fault_reaction [s]; 0 = off",
        CONFIGURE,
        ge=0.0,
        le=3600.0,
    ),
    Param(
        "task_error_limit",
        0.0,
        "law III: an end-effector error above this for fault_window_s is a fault [m]; 0 = off (a "
        "growing error is a fault either way)",
        CONFIGURE,
        ge=0.0,
        le=1e3,
    ),
    Param(
        "fault_window_s",
        2.0,
        "law III set points: a task error that grew at each tenth of this window (by more than 5 cm "
        "and 50 %) is a fault [s]",
        CONFIGURE,
        ge=0.1,
        le=3600.0,
    ),
    Param(
        "fault_reaction",
        "zero",
        "on a fault: zero (zero efforts, latched until the node is deactivated and activated again), "
        "hold (hold the current pose) or warn (diagnostics only)",
        CONFIGURE,
        choices=("zero", "hold", "warn"),
    ),
    Param("autostart", True, "configure and activate on start (main only)", STARTUP),
    rules=(_gains_hold,),
)
#: What the learned port did, counted per joint state (``residual_state`` of the effort command).
RESIDUAL_COUNTS = ("residual_clipped", "residual_non_finite")
REJECT_REASONS = (
    "bad_joint_state",
    "bad_target",
    "bad_trajectory",
    "non_finite_output",
    "stale_state",
    "stale_target",
    "duplicate_names",
    "old_stamp",
    "future_stamp",
    "step_error",
    "clock_not_started",
    "unused_input",
)
#: Longest ~/joint_trajectory taken: bounds the work one message can cause.
MAX_TRAJECTORY_POINTS = 10_000
#: A joint state stamped further ahead of the node's clock than this is refused (a clock error, not a state).
FUTURE_STAMP_TOLERANCE_S = 0.5


def shipped_model_path() -> Path:
    """The demo arm's shipped URDF, config/dac_chain.urdf (:mod:`ros_lnn.shipped`)."""
    from ..shipped import shipped_path

    return shipped_path("config", "dac_chain.urdf")


def port_layout(body_names) -> list:
    n = len(body_names)
    return [
        MultiArrayDimension(label="f,m", size=2, stride=6 * n),
        MultiArrayDimension(label=",".join(body_names), size=n, stride=3 * n),
        MultiArrayDimension(label="x,y,z", size=3, stride=3),
    ]


def array_msg(values, layout) -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.dim = layout
    msg.data = float_array(values)
    return msg


def float_array(values) -> array.array:
    """``array('d')``: the message field takes it as is (a list is checked element by element)."""
    return array.array("d", np.ascontiguousarray(values, dtype=float).tobytes())


class DacControllerNode(LifecycleTeardown, LifecycleNode):
    _configured_attribute = "pipeline"
    _io_attributes = ("_marker_sample",)

    def __init__(self, node_name: str = "dac_controller", **kwargs):
        super().__init__(node_name, **kwargs)
        self.counts = {}
        self.pipeline: DacPipeline | None = None
        self.values = PARAMETERS.attach(
            self,
            configured=lambda: self.pipeline is not None,
            extra_check=self._residual_limit_problem,
            on_change=self._apply_parameters,
        )
        self.last_error = ""
        self.stale, self.fault, self._fault_time = False, "", -math.inf
        self._subs, self._timers, self._pubs = [], [], {}
        self.counts.update(
            dict.fromkeys(
                REJECT_REASONS
                + RESIDUAL_COUNTS
                + ("processed", "saturated", "singular_damped", "internal_error", "fault"),
                0,
            )
        )
        self.window = CountWindow()
        self.residual = None  # the learned port's runtime (residual_model)
        self._residual_fault_time = self._singular_time = -math.inf
        self._tf_buffer = self._tf_listener = None
        self._tf_available = False
        self._frames: FrameTable | None = None
        self.stats = RateLatency()
        self.cpu_times: deque[float] = deque(
            maxlen=self.stats.latencies.maxlen
        )  # callback thread CPU per processed sample [s]
        self._marker_sample: tuple[PipelineOutput, np.ndarray] | None = None

    def p(self, name):
        return self.values[name]

    # -- parameters -----------------------------------------------------------------------------
    def _residual_limit_problem(self, values: dict) -> str:
        """A running node's residual_limit has one number, or one per joint."""
        limit = values.get("residual_limit") or []
        if self.pipeline is not None and len(limit) not in (0, 1, len(self.pipeline.joint_names)):
            return f"residual_limit needs one number, or one per joint {self.pipeline.joint_names}"
        return ""

    def _apply_parameters(self, names) -> None:
        """After a set: new gains reach the law from the next joint state on."""
        gains = [n for n in names if n in GAIN_PARAMETERS]
        if gains and self.pipeline is not None:
            self.pipeline.set_gains(self.gains_from_parameters())
            self.get_logger().info("gains set: " + ", ".join(f"{n} {self.p(n)}" for n in gains))
        if "residual_limit" in names and self.pipeline is not None and self.residual:
            self.pipeline.set_residual(self.residual, self.residual_limit(self.pipeline))

    def check_all_parameters(self) -> None:
        """ConfigError naming the first parameter (or rule) that does not hold."""
        problems = PARAMETERS.problems(PARAMETERS.read(self))
        if problems:
            raise ConfigError(problems[0])

    # -- lifecycle ------------------------------------------------------------------------------
    def build_pipeline(self) -> DacPipeline:
        from ..physics.multibody_build import load_model
        from ..physics.multibody_urdf import model_from_urdf

        self.check_all_parameters()

        gravity = [float(g) for g in self.p("gravity")]
        if self.p("robot_description"):
            model = model_from_urdf(
                self.p("robot_description"), "parameter robot_description", gravity=gravity
            )
        else:
            path = Path(self.p("model_path")) if self.p("model_path") else shipped_model_path()
            model = load_model(path)
            model.gravity = np.asarray(gravity, float)
        numbers = [float(v) for v in self.p("obstacles")]
        if len(numbers) % 4:
            raise ConfigError(
                f"parameter obstacles has {len(numbers)} numbers; give x, y, z, radius per obstacle"
            )
        obstacles = [(numbers[i : i + 3], numbers[i + 3]) for i in range(0, len(numbers), 4)]
        names = self.p("joint_names") or None
        limits = [float(v) for v in self.p("effort_limits")] or None
        if limits is None:  # every joint that takes an effort (revolute, prismatic), in the pipeline's order
            names_eff = names or [j.name for j in model.joints if j.kind in ("revolute", "prismatic")]
            urdf = {j.name: j.effort_limit for j in model.joints}
            default = float(self.p("default_effort_limit"))
            limits = [urdf[j] if np.isfinite(urdf.get(j, np.inf)) else default for j in names_eff]
        pipeline = DacPipeline(
            model,
            law=self.p("law"),
            gains=self.gains_from_parameters(),
            joint_names=names,
            ee_link=self.p("ee_link") or None,
            ee_attitude=bool(self.p("ee_attitude")),
            obstacles=obstacles,
            obstacle_influence=float(self.p("obstacle_influence")),
            obstacle_eta=float(self.p("obstacle_eta")),
            effort_limits=limits,
        )
        from ..control.frames import FrameTable

        self._frames = FrameTable(self.p("target_frames"), self.p("target_frame_poses"))
        self.residual = None
        if self.p("residual_model"):
            self.residual = self.load_residual(pipeline)
            pipeline.set_residual(self.residual, self.residual_limit(pipeline))
        return pipeline

    def load_residual(self, pipeline: DacPipeline):
        """The learned port (ONNX Runtime); ModelError (configure fails, one line) when its joints differ."""
        from ..inference.residual import ResidualRuntime

        path = Path(self.p("residual_model")).expanduser()
        runtime = ResidualRuntime(path, pipeline.joint_names)
        trained_on = runtime.certain_model.get("name")
        if trained_on and trained_on != pipeline.model.name:
            self.get_logger().warning(
                f"residual_model {path.name} was trained against the certain model "
                f"'{trained_on}', this controller runs '{pipeline.model.name}'"
            )
        return runtime

    def residual_limit(self, pipeline: DacPipeline) -> np.ndarray:
        """``residual_limit`` per joint (empty: 1.5 × the training data's largest |τ_res|, else a quarter
        of the effort limits): a learned part is not trusted beyond what it was trained on."""
        values = [float(v) for v in self.p("residual_limit")]
        n = len(pipeline.joint_names)
        if not values:
            seen = self.residual.trained_max if self.residual is not None else None
            return 1.5 * seen if seen is not None else 0.25 * pipeline.efforts.limits
        if len(values) not in (1, n):
            raise ConfigError(
                f"parameter residual_limit has {len(values)} values; give one, or one per "
                "joint "
                f"{pipeline.joint_names}"
            )
        return np.broadcast_to(np.asarray(values), (n,)).copy()

    def gains_from_parameters(self, changed: dict | None = None) -> Gains:
        """The law's gains from the parameters (``changed``: values about to be set, by name), by keyword."""
        values = {name: self.p(name) for name in GAIN_PARAMETERS} | (changed or {})
        return Gains(**{field: values[name] for name, field in GAIN_PARAMETERS.items()})

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
            "port": self.create_lifecycle_publisher(
                Float64MultiArray, "~/port_command", output_qos(STREAM_QOS), qos_overriding_options=OVERRIDES
            ),
            "effort": self.create_lifecycle_publisher(
                Float64MultiArray,
                "~/joint_effort_command",
                output_qos(STREAM_QOS),
                qos_overriding_options=OVERRIDES,
            ),
            "diagnostics": self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS),
        }
        if self.p("publish_markers"):
            self._pubs["markers"] = self.create_lifecycle_publisher(
                MarkerArray, "~/markers", output_qos(COMMAND_QOS), qos_overriding_options=OVERRIDES
            )
        model = self.pipeline.model
        self._port_layout = port_layout(model.body_names)
        self._effort_layout = [
            MultiArrayDimension(
                label=",".join(self.pipeline.joint_names),
                size=len(self.pipeline.joint_names),
                stride=len(self.pipeline.joint_names),
            )
        ]
        # per sample only the numbers change: publish serialized copies of the two layouts
        n_port, n_eff = 6 * model.n_bodies, len(self.pipeline.joint_names)
        port_t = SerializedTemplate(
            lambda _, v: array_msg(v, self._port_layout), (n_port,), stamp_format=None
        )
        effort_t = SerializedTemplate(
            lambda _, v: array_msg(v, self._effort_layout), (n_eff,), stamp_format=None
        )
        self._templates = (port_t, effort_t) if port_t.ok and effort_t.ok else None
        self._zero_commands = (np.zeros(n_port), np.zeros(n_eff))
        from ..control.monitor import reach_bound

        self._workspace = reach_bound(
            self.pipeline.pinocchio.pin, self.pipeline.pinocchio.frame_ids["end_effector"]
        )
        self.get_logger().info(
            f"configured: model '{model.name}' ({model.n_bodies} bodies), law {self.p('law')}, "
            f"joints {self.pipeline.joint_names}"
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
        from ..control.monitor import FaultMonitor

        self._monitor = FaultMonitor(
            float(self.p("saturation_timeout_s")),
            float(self.p("task_error_limit")),
            float(self.p("fault_window_s")),
        )
        self.fault, self._fault_time = "", -math.inf
        self._reaction = self.p("fault_reaction")
        self._unused_logged: set[str] = set()
        self.last_state_time: float | None = None
        self.last_target_time: float | None = None
        self.stale = False
        self.last_output: PipelineOutput | None = None
        self._target_timeout = float(self.p("target_timeout_s"))  # read once: the message path stays lean
        self._state_timeout = float(self.p("state_timeout_s"))
        # (joint_states names, their indices of joint_names)
        self._name_order: tuple[list[str] | None, np.ndarray | None] = (None, None)
        self._start_tf()
        assert self.pipeline is not None  # activate follows a successful configure
        self.pipeline.hold()
        self.window.start(self.counts)
        if float(self.p("circle_radius")) > 0:
            from ..control.pipeline import circle_path

            t0 = self._now_s()
            path = circle_path(
                self.p("circle_center"),
                float(self.p("circle_radius")),
                float(self.p("circle_period_s")),
                self.p("circle_normal"),
                float(self.p("circle_phase")),
            )
            self.pipeline.set_ee_path(lambda t: path(t - t0))
        self.get_logger().info("activated")
        return super().on_activate(state)

    def _input_qos(self):
        return input_qos(self.p("input_queue_depth"))

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._drop_io()
        self._tf_buffer = self._tf_listener = None
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
            quat = [o.w, o.x, o.y, o.z] if (o.w or o.x or o.y or o.z) else None
            if frame and frame != self.p("frame_id"):
                position, quat = self._to_world(frame, position, quat)
            reason = self._outside_workspace(position)
            if reason:
                return self._reject("bad_target", reason)
            self.pipeline.set_ee_target(position, quat)
            self.last_target_time = time.monotonic()
        except LookupError as exc:
            self._reject("bad_target", str(exc))
        except (RosLnnError, ValueError, ArithmeticError) as exc:
            self._reject("bad_target", f"~/ee_target: {exc}")

    def _outside_workspace(self, position) -> str:
        """Why a world-frame target position is refused ('' when it is taken)."""
        p = np.asarray(position, float)
        if not np.all(np.isfinite(p)):
            return "~/ee_target: position must be finite"
        if self._workspace is None:
            return ""
        centre, radius = self._workspace
        with np.errstate(over="ignore"):
            distance = float(np.linalg.norm(p - centre))
        limit = radius + float(self.p("workspace_margin"))
        if distance > limit:
            return (
                f"~/ee_target {p.round(3).tolist()} is {distance:.3g} m from the arm's first joint, beyond "
                f"its reach {radius:.3g} m + workspace_margin"
            )
        return ""

    def _to_world(self, frame: str, position, quat):
        """A target given in ``frame`` in the world frame ``frame_id``: the fixed frames of the
        ``target_frames`` table first, then tf2 (where tf2_ros is installed and ``use_tf`` is set)."""
        assert self._frames is not None  # built by configure with the pipeline
        if frame in self._frames:
            return self._frames.to_world(frame, position, quat)
        world = self.p("frame_id")
        if self._tf_buffer is None:
            raise LookupError(
                f"~/ee_target in frame '{frame}': no transform to '{world}'; add '{frame}' to "
                "target_frames/target_frame_poses"
                + ("" if self._tf_available else " (tf2_ros is not installed here)")
            )
        from rclpy.time import Time

        from ..control.frames import to_world

        try:
            tf = self._tf_buffer.lookup_transform(world, frame, Time()).transform
        except Exception as exc:  # noqa: BLE001 - tf2's Lookup/Connectivity/Extrapolation exceptions
            raise LookupError(
                f"~/ee_target in frame '{frame}': tf2 has no transform to '{world}' ({type(exc).__name__})"
            ) from None
        t, r = tf.translation, tf.rotation
        return to_world([t.x, t.y, t.z], [r.w, r.x, r.y, r.z], position, quat)

    def _start_tf(self) -> None:
        """tf2_ros's buffer and listener (/tf, /tf_static) where tf2_ros is installed and ``use_tf``."""
        self._tf_buffer = self._tf_listener = None
        try:
            import tf2_ros  # type: ignore[import-not-found,import-untyped]  # optional, untyped where installed
        except ImportError:
            self._tf_available = False
            return
        self._tf_available = True
        if self.p("use_tf"):
            self._tf_buffer = tf2_ros.Buffer()
            self._tf_listener = tf2_ros.TransformListener(self._tf_buffer, self)

    def _unused(self, topic: str, why: str) -> None:
        """An input the running law does not use: counted, logged once per activation."""
        self.counts["unused_input"] += 1
        if topic not in self._unused_logged:
            self._unused_logged.add(topic)
            self.get_logger().warning(f"{topic} ignored: {why} (counted as unused_input; logged once)")

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        assert self.pipeline is not None  # subscriptions live from activate to deactivate
        if self.pipeline.law == "end_effector":
            return self._unused("~/joint_trajectory", "law end_effector (III) follows ~/ee_target")
        names = list(msg.joint_names)
        missing = [j for j in self.pipeline.joint_names if j not in names]
        if missing or not msg.points:
            return self._reject("bad_trajectory", f"~/joint_trajectory lacks joints {missing} or points")
        if len(set(names)) != len(names):
            return self._reject("bad_trajectory", f"~/joint_trajectory names a joint twice: {names}")
        if len(msg.points) > MAX_TRAJECTORY_POINTS:
            return self._reject(
                "bad_trajectory",
                f"~/joint_trajectory has {len(msg.points)} points; at most "
                f"{MAX_TRAJECTORY_POINTS} are taken (send it in pieces)",
            )
        idx = [names.index(j) for j in self.pipeline.joint_names]
        start = stamp_ns(msg.header.stamp) * 1e-9 or self._now_s()
        try:
            times = np.array([start + duration_ns(pt.time_from_start) * 1e-9 for pt in msg.points])
            pos = np.array([[pt.positions[i] for i in idx] for pt in msg.points], float)
            vel = None
            if all(len(pt.velocities) == len(names) for pt in msg.points):
                vel = np.array([[pt.velocities[i] for i in idx] for pt in msg.points], float)
            self.pipeline.set_joint_trajectory(times, pos, vel)
            self.last_target_time = time.monotonic()
        except (RosLnnError, IndexError, ValueError, OverflowError, TypeError) as exc:
            self._reject("bad_trajectory", f"~/joint_trajectory: {exc}")

    def _on_joint_state(self, msg: JointState) -> None:
        assert self.pipeline is not None  # subscriptions live from activate to deactivate
        t0, c0 = time.perf_counter(), time.thread_time()
        self.stats.arrive()
        names = msg.name
        stamp = stamp_ns(msg.header.stamp)
        now = self.get_clock().now().nanoseconds
        if now == 0:  # use_sim_time and no /clock yet: no age can be judged, so no effort is trusted
            self.counts["clock_not_started"] += 1
            warn_throttled(
                self,
                "clock_not_started",
                "use_sim_time is set and no /clock arrived yet: zero efforts until the clock runs",
            )
            return self._publish_commands(*self._zero_commands)
        if stamp:  # an unstamped message (0) is taken as now
            age = now - stamp
            if age > self._state_timeout * 1e9:  # the README's promise: old states give zero efforts
                self.counts["old_stamp"] += 1
                warn_throttled(
                    self,
                    "old_stamp",
                    f"joint_states stamped {age * 1e-9:.3g} s ago (> state_timeout_s): zero efforts",
                )
                return self._publish_commands(*self._zero_commands)
            if -age > FUTURE_STAMP_TOLERANCE_S * 1e9:
                return self._reject(
                    "future_stamp",
                    f"joint_states stamped {-age * 1e-9:.3g} s ahead of this "
                    "node's clock (check the clocks / use_sim_time)",
                )
        try:
            cached_names, idx = self._name_order
            if names != cached_names:  # the usual case sends the same names every time: index them once
                listed = list(names)
                if len(set(listed)) != len(listed):
                    self._name_order = (None, None)
                    return self._reject("duplicate_names", f"joint_states names a joint twice: {listed}")
                idx = np.array([listed.index(j) for j in self.pipeline.joint_names], dtype=np.intp)
                self._name_order = (listed, idx)
            assert idx is not None  # cached with the names it was built for
            q = np.asarray(msg.position, dtype=float).take(idx)
            qd = np.asarray(msg.velocity, dtype=float).take(idx) if len(msg.velocity) == len(names) else None
        except (ValueError, IndexError):
            return self._reject(
                "bad_joint_state", f"joint_states must name {self.pipeline.joint_names} with positions"
            )
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
            out = pipeline.step(q, qd, self._now_s() if pipeline.needs_clock else 0.0)
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
        if state != "off":
            port = self._learned_port(out, port, state)
        if not math.isfinite(
            float(port.sum()) + float(effort.sum())
        ):  # NaN/inf anywhere (or a sum past 1e308)
            self._reject("non_finite_output", "the law produced a non-finite command; zero efforts sent")
            port, effort = np.zeros_like(port), np.zeros_like(effort)
        self.last_state_time = time.monotonic()
        self.stale = False
        if not self.fault or self._reaction != "zero":
            saturated = bool(out.efforts.saturated.any())
            set_point = self.pipeline.law == "end_effector" and not self.pipeline.needs_clock
            error = float(np.linalg.norm(out.result.task_error)) if set_point else math.nan
            cause = self._monitor.update(self.last_state_time, saturated, error)
            if cause:
                self._trip(cause, q)
        if self.fault and self._reaction == "zero":
            port, effort = self._zero_commands
        self.counts["processed"] += 1
        self.counts["saturated"] += int(out.efforts.saturated.any())
        self.last_output = out
        self._publish_commands(port, effort)
        self._marker_sample = (out, port)  # published by the marker timer
        self.stats.latency(time.perf_counter() - t0)
        self.cpu_times.append(time.thread_time() - c0)

    def _trip(self, cause: str, q) -> None:
        """A fault: counted, one error line, /diagnostics ERROR with the cause, and fault_reaction."""
        assert self.pipeline is not None  # called from _on_joint_state
        self.counts["fault"] += 1
        self.fault, self._fault_time = cause, time.monotonic()
        action = {
            "zero": "zero efforts until the node is deactivated and activated again",
            "hold": "holding the current pose",
            "warn": "control goes on (fault_reaction warn)",
        }[self._reaction]
        self.get_logger().error(f"fault: {cause}: {action}")
        if self._reaction == "hold":
            self.pipeline.hold(q)
            self._monitor.reset()

    def _learned_port(self, out, port, state: str):
        """The published port with the learned part ``E τ̂_res`` (so that ``Gᵀ port = u`` before the limits);
        a non-finite τ̂_res was dropped (model-only command): counted and warned."""
        if state == "non_finite":
            self.counts["residual_non_finite"] += 1
            self._residual_fault_time = time.monotonic()
            warn_throttled(
                self,
                "residual_non_finite",
                "learned port gave a non-finite correction: model-only efforts sent",
            )
            return port
        if state == "clipped":
            self.counts["residual_clipped"] += 1
        from ..physics.multibody_pin import effort_port

        assert self.pipeline is not None  # called from _on_joint_state
        residual = np.zeros(len(self.pipeline.pinocchio.joint_names))
        residual[:] = self.pipeline.model_order(out.efforts.residual_part)
        return port + effort_port(out.data, residual)

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
        frame, stamp = self.p("frame_id"), self.get_clock().now().to_msg()
        assert self.pipeline is not None  # the marker timer lives from activate to deactivate
        model = self.pipeline.model
        n = model.n_bodies
        scale = float(self.p("force_scale"))
        markers = []

        def marker(mid, ns, kind, rgba):
            m = Marker()
            m.header.frame_id, m.header.stamp = frame, stamp
            m.ns, m.id, m.type, m.action = ns, mid, kind, Marker.ADD
            m.color.r, m.color.g, m.color.b, m.color.a = rgba
            m.pose.orientation.w = 1.0
            return m

        for i in range(n):
            m = marker(i, "body_force", Marker.ARROW, (0.9, 0.3, 0.1, 1.0))
            a, f = out.data.r[i], port[3 * i : 3 * i + 3]
            m.points = [
                Point(x=float(a[0]), y=float(a[1]), z=float(a[2])),
                Point(
                    x=float(a[0] + scale * f[0]), y=float(a[1] + scale * f[1]), z=float(a[2] + scale * f[2])
                ),
            ]
            m.scale.x, m.scale.y, m.scale.z = 0.01, 0.02, 0.03
            markers.append(m)
        for k, (pos, rgba, ns) in enumerate(
            [
                (out.ee_position, (0.1, 0.8, 0.1, 1.0), "end_effector"),
                (out.target_position, (0.1, 0.3, 0.9, 0.8), "target"),
            ]
        ):
            if pos is None:
                continue
            m = marker(k, ns, Marker.SPHERE, rgba)
            m.pose.position = Point(x=float(pos[0]), y=float(pos[1]), z=float(pos[2]))
            m.scale.x = m.scale.y = m.scale.z = 0.03
            markers.append(m)
        field = self.pipeline.controller.obstacles
        for k, obs in enumerate(field.obstacles if field is not None else ()):
            m = marker(k, "obstacle", Marker.SPHERE, (0.8, 0.1, 0.1, 0.6))
            m.pose.position = Point(x=float(obs.center[0]), y=float(obs.center[1]), z=float(obs.center[2]))
            m.scale.x = m.scale.y = m.scale.z = 2 * float(obs.radius)
            markers.append(m)
        return MarkerArray(markers=markers)

    def diagnostics_values(self) -> dict:
        values = dict(self.stats.summary())
        values.update(self.counts)
        out = self.last_output
        if out is not None:
            values.update(
                lyapunov=out.result.lyapunov,
                saturation_ratio=out.efforts.saturation_ratio,
                task_error=float(np.linalg.norm(out.result.task_error)),
                obstacle_potential=out.result.obstacle_potential,
            )
        values["stale"] = self.stale
        values["fault_cause"] = self.fault
        values["residual_model"] = self.residual.path.name if self.residual is not None else ""
        return values

    def _publish_diagnostics(self) -> None:
        values = self.diagnostics_values()
        recent = time.monotonic() - self._fault_time < max(5.0, 5 * float(self.p("diagnostics_period_s")))
        if self.fault and (self._reaction == "zero" or recent):
            latched = (
                " (zero efforts, latched: deactivate and activate to reset)"
                if self._reaction == "zero"
                else ""
            )
            level, message = DiagnosticStatus.ERROR, f"fault: {self.fault}{latched}"
        elif self.stale:
            level, message = DiagnosticStatus.ERROR, "joint_states stale: zero efforts"
        elif self.last_output is None:
            level, message = DiagnosticStatus.WARN, "waiting for joint_states"
        elif time.monotonic() - self._singular_time < max(2.0, float(self.p("diagnostics_period_s"))):
            level, message = DiagnosticStatus.WARN, "singular task configuration: damped task inverse"
        elif time.monotonic() - self._residual_fault_time < max(2.0, float(self.p("diagnostics_period_s"))):
            level, message = DiagnosticStatus.WARN, "learned port non-finite: model-only efforts"
        elif self.last_output.efforts.saturated.any():
            level, message = DiagnosticStatus.WARN, "effort limits reached"
        else:
            level, message = DiagnosticStatus.OK, "tracking"
        window = self.window.update(self.counts)
        values.update({f"window_{k}": v for k, v in window.items()})
        rejected = {k: window[k] for k in REJECT_REASONS + ("internal_error",) if window.get(k)}
        if rejected and level == DiagnosticStatus.OK:
            level = DiagnosticStatus.WARN
            message = f"rejected in the last {window['window_s']:.0f} s: " + ", ".join(
                f"{k} {v}" for k, v in rejected.items()
            )
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        assert self.pipeline is not None  # the diagnostics timer lives from activate to deactivate
        msg.status = [diagnostic_status(status_name(self), self.pipeline.model.name, level, message, values)]
        self._pubs["diagnostics"].publish(msg)


def start(node: DacControllerNode) -> bool:
    """configure + activate; False (with the error already logged) when configure fails."""
    return configure_and_activate(node, lambda: node.pipeline is not None)


def main(argv=None) -> int:
    """The node process. Executor: rclpy's EventsExecutor unless ROS_LNN_EXECUTOR=single (less CPU per
    joint state; the lifecycle through services works with it, as for servo_lnn)."""
    init_ros(argv if argv is not None else sys.argv)
    return run_node_process(DacControllerNode(), compat.autostart_or_stay_unconfigured(start))


if __name__ == "__main__":
    sys.exit(main())
