"""The parameters of ``servo_lnn`` (:mod:`.params`): its table, the rules tied to its parameters and
its ``model_path`` default."""

from __future__ import annotations

from ...files import output_file_problem
from .. import model_params
from ..input_params import (
    INPUT_TIMEOUT_PARAMETER,
    MAX_COMMAND_POINTS_PARAMETER,
    MERGE_WINDOW_PARAMETER,
    diagnostics_period_parameter,
    input_queue_parameter,
)
from ..model_params import MODEL_LIMIT_PARAMETERS, MODEL_THREADS_PARAMETER
from ..params import CONFIGURE, MAX_PATH, STARTUP, Param, ParameterTable

COMMAND_TYPES = ("trajectory", "array", "none")
AXES = {
    "x": (1.0, 0.0, 0.0),
    "y": (0.0, 1.0, 0.0),
    "z": (0.0, 0.0, 1.0),
    "-x": (-1.0, 0.0, 0.0),
    "-y": (0.0, -1.0, 0.0),
    "-z": (0.0, 0.0, -1.0),
}


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
    MODEL_THREADS_PARAMETER,
    *MODEL_LIMIT_PARAMETERS,
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
    MERGE_WINDOW_PARAMETER,
    input_queue_parameter(
        100,
        "joint_states subscription depth (best effort, keep last): samples held "
        "while the node is briefly descheduled, processed in order afterwards (100 = 0.1 s at 1 kHz)",
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
    MAX_COMMAND_POINTS_PARAMETER,
    INPUT_TIMEOUT_PARAMETER,
    Param(
        "free_joint_forces",
        [],
        "Q_f on the free joints when joint_states carries no finite efforts for them; empty = zeros "
        "[N or N m]",
        items=float,
        ge=-1e6,
        le=1e6,
    ),
    Param("frame_id", "", "frame_id of the outputs; empty = the input's frame_id"),
    diagnostics_period_parameter(CONFIGURE),
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


def resolve_model_path(value: str):
    """The model file of ``model_path`` (the nodes' one rule, :func:`.model_params.resolve_model_path`);
    empty: the shipped ``crane_servo_lnn.onnx``."""
    from ...inference.runtime import default_model_path

    return model_params.resolve_model_path(value, default_model_path)
