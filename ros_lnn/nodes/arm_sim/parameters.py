"""The parameters of ``arm_sim`` (:mod:`.params`): its table. Every parameter is read once at start-up (a
live set is refused with the way to change it); a value that breaks its rule stops the node with one
line. The defaults are ``ros-lnn bench armcontrol``'s simulated Panda."""

from __future__ import annotations

from ..params import MAX_DESCRIPTION, STARTUP, Param, ParameterTable
from ..simulator_params import (
    COMMAND_TIMEOUT_PARAMETER,
    hold_until_command_parameter,
    initial_positions_parameter,
    lockstep_parameters,
)


def _noise(name: str, default: float, what: str) -> Param:
    return Param(name, default, what, STARTUP, ge=0.0, le=10.0)


PARAMETERS = ParameterTable(
    Param(
        "robot_description",
        "",
        "URDF of the arm (its text); empty = the shipped Panda, config/robots/panda/panda.urdf",
        STARTUP,
        max_length=MAX_DESCRIPTION,
    ),
    Param(
        "joints",
        [],
        "actuated joints, the order of effort_commands; empty = panda_joint1 … 7 (required with another "
        "robot_description); the URDF's other joints are locked at neutral",
        STARTUP,
        items=str,
        unique=True,
    ),
    Param(
        "true_model_seed",
        1,
        "seed of the true arm's inertial parameters drawn around the URDF's (perturb_*)",
        STARTUP,
        ge=0,
        le=2**31 - 1,
    ),
    Param(
        "perturb_mass",
        0.2,
        "true masses within ± this share of the URDF's (0 with the other two: the URDF's arm)",
        STARTUP,
        ge=0.0,
        le=0.9,
    ),
    Param("perturb_com_m", 0.02, "true centres of mass within ± this per axis [m]", STARTUP, ge=0.0, le=1.0),
    Param("perturb_inertia", 0.3, "true rotational inertias within ± this share", STARTUP, ge=0.0, le=0.9),
    Param(
        "friction_scale",
        1.0,
        "joint friction outside the models' law (viscous, Coulomb with a wide tanh, an offset, a position "
        "ripple; sized by the effort limits), times this; 0 = none",
        STARTUP,
        ge=0.0,
        le=100.0,
    ),
    _noise("noise_q", 1e-5, "position noise (standard deviation) [rad or m]"),
    _noise("noise_qd", 1e-3, "velocity noise [rad/s or m/s]"),
    _noise("noise_tau", 0.02, "torque sensor noise on the published effort [N m or N]"),
    Param("noise_seed", 0, "seed of the sensor noise", STARTUP, ge=0, le=2**31 - 1),
    initial_positions_parameter(
        "initial joint positions (joints order); empty = the middle of each joint's range"
    ),
    Param("rate_hz", 500.0, "joint_states rate: one control period per state", STARTUP, gt=0.0, le=10000.0),
    Param("substeps", 1, "RK4 steps per period", STARTUP, ge=1, le=1000),
    Param(
        "command_delay_steps",
        1,
        "periods between the state a command was computed from and the period it acts over (1: the next "
        "tick, as a robot's torque interface; 0: at once)",
        STARTUP,
        ge=0,
        le=100,
    ),
    COMMAND_TIMEOUT_PARAMETER,
    hold_until_command_parameter(
        True,
        "hold the arm still until the first effort command that is not all zeros arrives (its brakes on "
        "until the controller runs; a watchdog's zeros keep them on)",
    ),
    *lockstep_parameters("period", gt=0.0),
    Param("frame_id", "", "frame_id of joint_states", STARTUP),
)
