"""The parameters of ``sim`` (:mod:`.params`): its table, the rules tied to its parameters and the
reference system they describe."""

from __future__ import annotations

from ..input_params import MAX_COMMAND_POINTS_PARAMETER, diagnostics_period_parameter
from ..params import STARTUP, Param, ParameterTable


def _chain_lists(values: dict) -> str:
    if values["system"] != "chain":
        return ""
    n = len(values["chain_joints"])
    bad = [k for k in ("kinds", "masses", "lengths", "inertias") if len(values[f"chain_{k}"]) != n]
    if bad:
        return (
            f"parameters chain_{', chain_'.join(bad)} need {n} entries, one per joint in chain_joints "
            f"{values['chain_joints']}"
        )
    unknown = [j for j in values["chain_servo_joints"] if j not in values["chain_joints"]]
    return f"chain_servo_joints {unknown} are not in chain_joints" if unknown else ""


def _plan_points(values: dict) -> str:
    if values["plan_horizon_s"] / values["plan_dt_s"] > 1000:
        return "plan_horizon_s / plan_dt_s must be <= 1000 points (bounds the work of one ~/servo_plan)"
    return ""


#: Most RK4 steps per simulated second (rate_hz × substeps): a step of the 3-link chain takes ≈ 1.6 ms
#: on a loaded 2-core VM, so more than this is work the simulator could never keep up with.
MAX_STEPS_PER_S = 20_000


def _steps_per_second(values: dict) -> str:
    steps = values["rate_hz"] * values["substeps"]
    if steps > MAX_STEPS_PER_S:
        return (
            f"rate_hz × substeps must be <= {MAX_STEPS_PER_S} RK4 steps per simulated second, got {steps:g}"
        )
    return ""


def _sweep(values: dict) -> str:
    return (
        "sweep_f_low must not exceed sweep_f_high" if values["sweep_f_low"] > values["sweep_f_high"] else ""
    )


PARAMETERS = ParameterTable(
    Param("system", "crane", "reference system: crane or chain", STARTUP, choices=("crane", "chain")),
    Param("crane_m1", 0.45, "crane: cart mass (kg)", STARTUP, gt=0.0, le=1e6),
    Param("crane_m2", 0.13, "crane: bob mass (kg)", STARTUP, gt=0.0, le=1e6),
    Param("crane_length", 1.5, "crane: string length (m)", STARTUP, ge=0.01, le=1e3),
    Param("gravity", 9.8, "gravitational acceleration (m/s^2)", STARTUP, ge=-1e3, le=1e3),
    Param(
        "chain_joints",
        ["joint_1", "joint_2", "joint_3"],
        "chain: joint names, base to tip",
        STARTUP,
        unique=True,
    ),
    Param(
        "chain_kinds",
        ["revolute", "revolute", "revolute"],
        "chain: revolute or prismatic, per joint",
        STARTUP,
        choices=("revolute", "prismatic"),
    ),
    Param("chain_masses", [1.0, 1.0, 1.0], "chain: link masses (kg)", STARTUP, gt=0.0, le=1e6),
    Param("chain_lengths", [1.0, 1.0, 1.0], "chain: link lengths (m)", STARTUP, ge=0.01, le=1e3),
    Param(
        "chain_inertias",
        [0.0, 0.0, 0.0],
        "chain: link inertias about the centre of mass (kg m^2); mass at the tip",
        STARTUP,
        ge=0.0,
        le=1e6,
    ),
    Param(
        "chain_servo_joints",
        ["joint_1"],
        "chain: which joints are servo (position-driven); the rest are free",
        STARTUP,
        unique=True,
    ),
    Param(
        "rate_hz",
        500.0,
        "joint_states publish rate (Hz); one fixed step (or substeps) per publish",
        STARTUP,
        ge=1.0,
        le=10000.0,
    ),
    Param("substeps", 1, "RK4 steps per publish", STARTUP, ge=1, le=1000),
    Param("real_time_factor", 1.0, "simulated seconds per wall second", STARTUP, ge=0.01, le=100.0),
    Param(
        "initial_positions",
        [],
        "free joints' initial positions (free-joint order); empty = 0.3 rad/m each",
        STARTUP,
        items=float,
        ge=-1e3,
        le=1e3,
    ),
    Param(
        "initial_velocities",
        [],
        "free joints' initial velocities; empty = zeros",
        STARTUP,
        items=float,
        ge=-1e3,
        le=1e3,
    ),
    Param(
        "excitation",
        "multisine",
        "built-in servo motion until a command arrives: multisine, sweep or hold",
        STARTUP,
        choices=("multisine", "sweep", "hold"),
    ),
    Param(
        "excitation_amplitude",
        [0.1, 0.08, 0.05],
        "multisine: amplitude per frequency; sweep: first entry",
        STARTUP,
        ge=-1e3,
        le=1e3,
    ),
    Param(
        "excitation_frequencies_hz", [0.2, 0.45, 0.8], "multisine frequencies (Hz)", STARTUP, ge=0.0, le=1e3
    ),
    Param("sweep_f_low", 0.1, "sweep: lowest frequency (Hz)", STARTUP, ge=0.0, le=1e3),
    Param("sweep_f_high", 1.0, "sweep: highest frequency (Hz)", STARTUP, ge=0.0, le=1e3),
    Param("sweep_period_s", 20.0, "sweep: period of the frequency swing (s)", STARTUP, ge=0.1, le=1e6),
    Param(
        "servo_offset",
        [],
        "servo joints' rest positions; empty = zeros",
        STARTUP,
        items=float,
        ge=-1e3,
        le=1e3,
    ),
    Param(
        "servo_command_type",
        "trajectory",
        "servo_commands type: trajectory, array (positions) or none",
        STARTUP,
        choices=("trajectory", "array", "none"),
    ),
    Param(
        "servo_bandwidth", 20.0, "array commands: critically damped servo bandwidth (rad/s)", gt=0.0, le=1e4
    ),
    MAX_COMMAND_POINTS_PARAMETER,
    Param(
        "effort_joints",
        [],
        "joint names of effort_commands entries; empty = the free joints in order",
        STARTUP,
        items=str,
        unique=True,
    ),
    Param(
        "effort_timeout_s",
        0.5,
        "applied efforts fall back to zero this long after the last effort command; 0 = hold",
        ge=0.0,
        le=3600.0,
    ),
    Param("publish_clock", False, "publish /clock (simulated time from 0) and stamp with it", STARTUP),
    Param("publish_ground_truth", True, "publish ~/ground_truth/{driving_force,prediction,energy}", STARTUP),
    Param(
        "plan_horizon_s",
        0.5,
        "~/servo_plan horizon (upcoming excitation points with accelerations); 0 = off",
        ge=0.0,
        le=60.0,
    ),
    Param("plan_dt_s", 0.02, "~/servo_plan point spacing (s)", ge=1e-3, le=10.0),
    Param("plan_rate_hz", 20.0, "~/servo_plan publish rate (Hz)", STARTUP, ge=0.1, le=1000.0, off=0.0),
    Param("frame_id", "", "frame_id of joint_states and ground truth"),
    diagnostics_period_parameter(STARTUP),
    rules=(_chain_lists, _plan_points, _sweep, _steps_per_second),
)


def build_system(values: dict):
    kind = values["system"]
    if kind == "crane":
        from ...physics.crane import Crane

        return Crane(values["crane_m1"], values["crane_m2"], values["crane_length"], values["gravity"])
    from ...physics.chain import Link, PlanarChain

    joints = values["chain_joints"]
    links = [
        Link(
            j,
            values["chain_kinds"][i],
            values["chain_masses"][i],
            values["chain_lengths"][i],
            None,
            values["chain_inertias"][i],
        )
        for i, j in enumerate(joints)
    ]
    return PlanarChain(links, values["chain_servo_joints"], values["gravity"])
