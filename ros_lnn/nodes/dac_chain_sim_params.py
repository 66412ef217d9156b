"""The parameters of ``dac_chain_sim``: name, default, description."""

from __future__ import annotations

PARAMETERS: tuple[tuple[str, object, str], ...] = (  # name, default, description
    ("robot_description", "", "URDF of the arm; empty = model_path"),
    ("model_path", "", "URDF/YAML; empty = the shipped config/dac_chain.urdf"),
    ("joint_names", [], "joint order of effort_commands and joint_states; empty = the model's moving joints"),
    ("initial_positions", [], "initial joint angles (joint_names order); empty = zeros"),
    ("gravity", [0.0, 0.0, -9.81], "gravity [m/s²]"),
    ("rate_hz", 500.0, "joint_states rate; one RK4 step per period"),
    (
        "lockstep",
        False,
        "one step per effort command, simulated time on /clock (controller with use_sim_time) instead of "
        "wall time",
    ),
    ("lockstep_timeout_s", 0.05, "lockstep: wall time after which a missing command steps anyway [s]"),
    ("command_timeout_s", 0.2, "commands older than this count as zero"),
    (
        "hold_until_command",
        False,
        "hold the arm still until the first effort command arrives, as a robot keeps its brakes "
        "on until its controller runs",
    ),
    (
        "disturbance",
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        "constant wrench on the last body (force, moment) [N, N m]",
    ),
    (
        "friction_viscous",
        [],
        "viscous joint friction d (one, or per joint_names entry) [N m s/rad]; empty = none",
    ),
    (
        "friction_coulomb",
        [],
        "Coulomb joint friction c, as c tanh(q̇ / friction_coulomb_velocity) [N m]; empty = none",
    ),
    ("friction_coulomb_velocity", 0.05, "velocity over which Coulomb friction turns over [rad/s]"),
    ("payload_mass", 0.0, "mass the description does not know, on payload_link [kg]"),
    (
        "payload_offset",
        [0.0, 0.0, 0.0],
        "payload centre of mass from the link's centre of mass, link axes [m]",
    ),
    (
        "payload_inertia",
        [0.0, 0.0, 0.0],
        "payload's principal moments of inertia about its centre, link axes [kg m²]",
    ),
    ("payload_link", "", "link carrying the payload; empty = the last link"),
    ("rotor_inertia", [], "reflected motor inertia (one, or per joint_names entry) [kg m²]; empty = none"),
)
