"""The parameters of ``effort_observer`` (:mod:`.params`): its table and the rules tied to its
parameters."""

from __future__ import annotations

from ..input_params import (
    INPUT_TIMEOUT_PARAMETER,
    MERGE_WINDOW_PARAMETER,
    diagnostics_period_parameter,
    input_queue_parameter,
)
from ..model_params import MODEL_LIMIT_PARAMETERS, MODEL_THREADS_PARAMETER
from ..params import CONFIGURE, MAX_PATH, STARTUP, Param, ParameterTable
from ..robot_description import description_parameters


def _gain_count(values: dict) -> str:
    return "" if len(values["gains"]) >= 1 else "gains needs 1 value (every joint) or one per joint"


PARAMETERS = ParameterTable(
    Param(
        "model_path",
        "",
        "arm model (.onnx from ros-lnn train with an arm config); empty = the URDF-nominal dynamics of "
        "robot_description",
        CONFIGURE,
        max_length=MAX_PATH,
    ),
    *description_parameters(
        "the kinematics of the wrench, and the dynamics when model_path is empty; with an arm model, "
        "checked against the model's URDF. Empty: the robot_description topic (transient local), else "
        "the URDF in the arm model"
    ),
    Param(
        "urdf",
        "",
        "deprecated: a URDF file, read as robot_description when that is empty (set robot_description, "
        "or publish it, instead)",
        CONFIGURE,
        max_length=MAX_PATH,
    ),
    Param(
        "joints",
        [],
        "actuated joints in order; empty = the model's (required with the URDF-nominal dynamics)",
        CONFIGURE,
        items=str,
        unique=True,
    ),
    Param(
        "method",
        "momentum",
        "momentum (De Luca, no q̈) or direct (τ̂ with filtered q̈ − τ)",
        CONFIGURE,
        choices=("momentum", "direct"),
    ),
    Param(
        "gains",
        [50.0],
        "observer gain K per joint (1/s): one value for every joint, or one per joint",
        CONFIGURE,
        gt=0.0,
        le=10000.0,
    ),
    Param(
        "effort_timing",
        "sampled",
        "what the effort of a joint state is (momentum method): sampled = the torque at its stamp (torque "
        "sensors, motor currents); held_until_stamp = the effort the joints held over the step that ended "
        "at its stamp (a simulator's applied effort: dac_chain_sim, arm_sim, Gazebo); held_from_stamp = "
        "the command held from its stamp on. The wrong one shows each effort step Δτ as a one-sample "
        "τ_ext of (1 − e^(−K Δt)) Δτ / 2",
        CONFIGURE,
        choices=("sampled", "held_until_stamp", "held_from_stamp"),
    ),
    Param(
        "qdd_filter_window",
        9,
        "samples of the causal fit that estimates q̈ (τ̂ and the direct method)",
        CONFIGURE,
        ge=3,
        le=1000,
    ),
    Param(
        "effort_gains",
        [],
        "per joint the factor from the effort field to joint torque (motor current "
        "× drive gain, N·m/A); empty = the model's mapping (1 for joint torques)",
        CONFIGURE,
        items=float,
        ge=-1e6,
        le=1e6,
    ),
    Param(
        "thresholds",
        "",
        "thresholds YAML of ros-lnn calibrate-observer; empty = no collision detection",
        CONFIGURE,
    ),
    Param(
        "collision_hold_s",
        2.0,
        "/diagnostics stays WARN this long after a collision ended",
        ge=0.0,
        le=3600.0,
    ),
    Param(
        "friction_state_start",
        "measured",
        "a model with friction memory: its state at start and after a restart — measured (the torque "
        "the model leaves unexplained at the first joint state is the friction the joints hold; start "
        "without contact) or neutral (no held friction)",
        CONFIGURE,
        choices=("measured", "neutral"),
    ),
    Param(
        "output_rate_hz",
        100.0,
        "rate of ~/model_effort, ~/external_effort and ~/external_wrench (Hz, chosen by the inputs' "
        "stamps; 0 = every joint state); every joint state is still observed and checked for "
        "collisions, and ~/collision goes out at the state it begins",
        ge=0.0,
        le=100000.0,
    ),
    Param("wrench_frame", "", "URDF frame of ~/external_wrench; empty = not published", CONFIGURE),
    Param("wrench_damping", 0.01, "damping λ of the Jacobian's pseudo-inverse", CONFIGURE, ge=0.0, le=10.0),
    MODEL_THREADS_PARAMETER,
    *MODEL_LIMIT_PARAMETERS,
    MERGE_WINDOW_PARAMETER,
    input_queue_parameter(
        100,
        "joint_states subscription depth (best effort, keep last)",
    ),
    Param(
        "input_batch_period_s",
        0.002,
        "the joint_states intake thread takes what queued at most once per this period (s; a state "
        "after a quiet spell at once): a few states per ONNX call at 1 kHz, at most this much more "
        "latency; 0 = at every arrival (the intake: ROS_LNN_EXECUTOR intake, the default)",
        CONFIGURE,
        ge=0.0,
        le=0.1,
    ),
    INPUT_TIMEOUT_PARAMETER,
    Param(
        "restart_gap_s",
        0.1,
        "a step between two joint states' stamps longer than this restarts the observer's integration at "
        "the later one (r from 0, counted in restarts): over a gap (lost messages, a stalled driver) the "
        "trapezoid is no estimate of the momentum's change. A persistent contact shows again within 3/K",
        ge=0.001,
        le=3600.0,
    ),
    diagnostics_period_parameter(CONFIGURE, "period of /diagnostics"),
    Param(
        "autostart",
        False,
        "configure and activate at start-up (ros2 run / launch without a lifecycle manager)",
        STARTUP,
    ),
    rules=(_gain_count,),
)
