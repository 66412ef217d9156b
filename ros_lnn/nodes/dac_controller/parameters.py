"""The parameters of ``dac_controller`` (:mod:`.params`): its table, the rules tied to its parameters
and the gains they set. LIVE ones are taken by a running node (``ros2 param set``): the gains and the
learned port's bound apply from the next joint state on, the marker scale at once. CONFIGURE ones are
read at configure or activate and refused while the node is configured."""

from __future__ import annotations

from ...control.dac import LAWS, Gains
from ...control.joint_laws import JOINT_LAWS
from ...errors import ConfigError
from ..input_params import MERGE_WINDOW_PARAMETER, diagnostics_period_parameter, input_queue_parameter
from ..model_params import MODEL_LIMIT_PARAMETERS
from ..params import CONFIGURE, LIVE, MAX_PATH, STARTUP, Param, ParameterTable, vector3
from ..robot_description import description_parameters


def _obstacle_quadruples(values) -> str:
    values = list(values)
    if len(values) % 4:
        return f"has {len(values)} numbers; give x, y, z, radius per obstacle"
    if any(r <= 0 for r in values[3::4]):
        return "needs a positive radius (x, y, z, radius per obstacle)"
    return ""


def _limit_pairs(values) -> str:
    values = list(values)
    if len(values) % 2:
        return f"has {len(values)} numbers; give lower, upper per joint"
    if any(not lo < hi for lo, hi in zip(values[0::2], values[1::2])):
        return "needs lower < upper in each pair (lower, upper per joint)"
    return ""


def _not_all_zero(values) -> str:
    return "" if any(values) else "must not be all zero"


def _gains_hold(values: dict) -> str:
    try:
        Gains(**{field: values[name] for name, field in GAIN_PARAMETERS.items()}).validate()
    except ConfigError as exc:
        return str(exc)
    return ""


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

PARAMETERS = ParameterTable(
    *description_parameters(
        "the certain model (before a URDF or YAML model_path); with an arm model, its kinematics and "
        "limits, checked against the model's URDF. Empty, with model_path empty or an arm model: the "
        "robot_description topic (transient local)"
    ),
    Param(
        "model_path",
        "",
        "arm model (.onnx from ros-lnn train --urdf: its identified rigid body is the certain model, its "
        "friction and residual are added to the efforts), or a URDF or multibody YAML file; empty = "
        "robot_description, else the shipped config/dac_chain.urdf",
        CONFIGURE,
        max_length=MAX_PATH,
    ),
    Param(
        "joint_names",
        [],
        "actuated joints in the order of ~/joint_effort_command; empty = the model's "
        "revolute and prismatic joints (an arm model's joints, in its order: the only order it takes)",
        CONFIGURE,
        items=str,
        unique=True,
    ),
    Param(
        "law",
        "end_effector",
        "control law: velocity (I), pose (II), end_effector (III), feedforward_pd (the model's torque along "
        "~/joint_trajectory + joint_kp/joint_kd PD) or gravity_compensation (gravity + friction, joint_kd "
        "damping: hand guiding)",
        CONFIGURE,
        choices=tuple(LAWS) + JOINT_LAWS,
    ),
    Param(
        "joint_kp",
        [50.0],
        "feedforward_pd: K_p per joint (one for all, or one per joint_names entry) [N m/rad or N/m]",
        LIVE,
        items=float,
        ge=0.0,
        le=1e6,
    ),
    Param(
        "joint_kd",
        [1.0],
        "feedforward_pd: K_d; gravity_compensation: the damping (one for all, or one per joint_names "
        "entry) [N m s/rad or N s/m]",
        LIVE,
        items=float,
        ge=0.0,
        le=1e6,
    ),
    Param("ee_link", "tool0", "end-effector link for law III (empty = CoM of the last body)", CONFIGURE),
    Param(
        "ee_attitude",
        False,
        "law III tracks the ~/ee_target orientation too (6-D task) instead of position only",
        CONFIGURE,
    ),
    vector3("gravity", [0.0, 0.0, -9.81], "gravity in the world frame [m/s²]", CONFIGURE),
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
    vector3("circle_center", [0.45, 0.0, 0.0], "centre of the built-in circle [m]", CONFIGURE),
    vector3("circle_normal", [1.0, 0.0, 0.0], "normal of the circle's plane", CONFIGURE, check=_not_all_zero),
    Param("circle_period_s", 4.0, "period of the built-in circle [s]", CONFIGURE, ge=0.1, le=1e6),
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
    *MODEL_LIMIT_PARAMETERS,
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
        "enforce_joint_limits",
        True,
        "keep the joints within their position and velocity limits: soft limits brake before them, a "
        "violation stops the arm (limit_reaction; latched until the node is deactivated and activated "
        "again)",
        CONFIGURE,
    ),
    Param(
        "limit_reaction",
        "brake",
        "on a joint limit violation (latched until the node is deactivated and activated again): brake "
        "(a protective stop: every joint braked to rest at stop_rate within its effort limit, brought "
        "back inside its soft limits and held there against gravity) or zero (zero efforts: a moving "
        "joint coasts and a loaded link falls unless the drives' brakes hold it)",
        CONFIGURE,
        choices=("brake", "zero"),
    ),
    Param(
        "stop_rate",
        50.0,
        "protective stop (limit_reaction / fault_reaction brake): the joints' velocities decay at this "
        "rate, as fast as the effort limits allow, and at most 0.3 / the loop's latency (a joint "
        "state's age plus its interval: a late loop brakes softer, never faster than it can follow); "
        "the hold after rest is critically damped [1/s]",
        CONFIGURE,
        ge=1.0,
        le=1000.0,
    ),
    Param(
        "position_limits",
        [],
        "lower, upper per joint_names entry, flattened [rad or m]; empty = the URDF's <limit lower "
        "upper> (continuous joints and YAML models: none)",
        CONFIGURE,
        items=float,
        ge=-1e6,
        le=1e6,
        check=_limit_pairs,
    ),
    Param(
        "velocity_limits",
        [],
        "|velocity| limit per joint_names entry (one number for all, or one per joint) [rad/s or m/s]; "
        "empty = the URDF's <limit velocity> (none where 0 or absent)",
        CONFIGURE,
        items=float,
        gt=0.0,
        le=1e6,
    ),
    Param(
        "limit_margin",
        0.1,
        "soft position limits this far inside the hard ones (at most a quarter of a joint's range) "
        "[rad or m]",
        CONFIGURE,
        ge=0.0,
        le=100.0,
    ),
    Param(
        "limit_k_position",
        10.0,
        "soft limits: velocity allowed towards a soft limit per distance to it (k_p) [1/s]",
        CONFIGURE,
        gt=0.0,
        le=1e6,
    ),
    Param(
        "limit_damping",
        5.0,
        "soft limits: k_v = this × the joint's effort limit, the effort per velocity beyond the allowed "
        "one (full effort until 1/this below it) [s/rad or s/m]",
        CONFIGURE,
        gt=0.0,
        le=1e6,
    ),
    Param(
        "limit_velocity_tolerance",
        1.2,
        "a velocity beyond this times its limit is a violation: limit_reaction, latched",
        CONFIGURE,
        ge=1.0,
        le=100.0,
    ),
    Param(
        "limit_position_tolerance",
        0.0,
        "a position beyond a hard limit by more than this is a violation: limit_reaction, latched [rad or m]",
        CONFIGURE,
        ge=0.0,
        le=100.0,
    ),
    input_queue_parameter(
        1,
        "joint_states kept while the node is busy or descheduled (best effort); 1: a late "
        "step acts on the newest state, never on a backlog; deeper queues process each "
        "state in order, trading latency for completeness",
    ),
    MERGE_WINDOW_PARAMETER,
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
    diagnostics_period_parameter(CONFIGURE),
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
        "brake",
        "on a fault: brake (the protective stop of limit_reaction brake), zero (zero efforts) — both "
        "latched until the node is deactivated and activated again —, hold (hold the current pose) or "
        "warn (diagnostics only)",
        CONFIGURE,
        choices=("brake", "zero", "hold", "warn"),
    ),
    Param("autostart", True, "configure and activate on start (main only)", STARTUP),
    rules=(_gains_hold,),
)


def gains_from_values(values: dict, changed: dict | None = None) -> Gains:
    """The law's gains from the parameter values (``changed``: values about to be set, by name)."""
    values = {name: values[name] for name in GAIN_PARAMETERS} | (changed or {})
    return Gains(**{field: values[name] for name, field in GAIN_PARAMETERS.items()})
