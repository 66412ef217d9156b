"""The parameters of ``dac_chain_sim`` (:mod:`.params`): its table. Every parameter is read once at
start-up (a live set is refused with the way to change it); a value that breaks its rule stops the
node with one line."""

from __future__ import annotations

from ..params import MAX_DESCRIPTION, MAX_PATH, STARTUP, Param, ParameterTable, vector3
from ..simulator_params import (
    COMMAND_TIMEOUT_PARAMETER,
    hold_until_command_parameter,
    initial_positions_parameter,
    lockstep_parameters,
)

PARAMETERS = ParameterTable(
    Param(
        "robot_description",
        "",
        "URDF of the arm; empty = model_path",
        STARTUP,
        max_length=MAX_DESCRIPTION,
    ),
    Param(
        "model_path",
        "",
        "URDF/YAML; empty = the shipped config/dac_chain.urdf",
        STARTUP,
        max_length=MAX_PATH,
    ),
    Param(
        "joint_names",
        [],
        "joint order of effort_commands and joint_states; empty = the model's moving joints",
        STARTUP,
        items=str,
        unique=True,
    ),
    initial_positions_parameter("initial joint angles (joint_names order); empty = zeros"),
    vector3("gravity", [0.0, 0.0, -9.81], "gravity [m/s²]", STARTUP),
    Param("rate_hz", 500.0, "joint_states rate; one RK4 step per period", STARTUP, ge=1.0, le=100000.0),
    *lockstep_parameters("step", ge=0.001),
    COMMAND_TIMEOUT_PARAMETER,
    hold_until_command_parameter(
        False,
        "hold the arm still until the first effort command that is not all zeros arrives, as a robot "
        "keeps its brakes on until its controller runs (a watchdog's zeros keep them on)",
    ),
    Param(
        "disturbance",
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        "constant wrench on the last body (force, moment) [N, N m]",
        STARTUP,
        size=(6,),
        ge=-1e6,
        le=1e6,
    ),
    Param(
        "friction_viscous",
        [],
        "viscous joint friction d (one, or per joint_names entry) [N m s/rad]; empty = none",
        STARTUP,
        items=float,
        ge=0.0,
        le=1e6,
    ),
    Param(
        "friction_coulomb",
        [],
        "Coulomb joint friction c, as c tanh(q̇ / friction_coulomb_velocity) [N m]; empty = none",
        STARTUP,
        items=float,
        ge=0.0,
        le=1e6,
    ),
    Param(
        "friction_coulomb_velocity",
        0.05,
        "velocity over which Coulomb friction turns over [rad/s]",
        STARTUP,
        gt=0.0,
        le=1e3,
    ),
    Param(
        "payload_mass",
        0.0,
        "mass the description does not know, on payload_link [kg]",
        STARTUP,
        ge=0.0,
        le=1e6,
    ),
    vector3(
        "payload_offset",
        [0.0, 0.0, 0.0],
        "payload centre of mass from the link's centre of mass, link axes [m]",
        STARTUP,
    ),
    vector3(
        "payload_inertia",
        [0.0, 0.0, 0.0],
        "payload's principal moments of inertia about its centre, link axes [kg m²]",
        STARTUP,
        ge=0.0,
        le=1e6,
    ),
    Param("payload_link", "", "link carrying the payload; empty = the last link", STARTUP),
    Param(
        "rotor_inertia",
        [],
        "reflected motor inertia (one, or per joint_names entry) [kg m²]; empty = none",
        STARTUP,
        items=float,
        ge=0.0,
        le=1e6,
    ),
)
