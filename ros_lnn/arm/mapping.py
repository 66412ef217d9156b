"""How a fully actuated arm's recording maps onto the model: the ``bag:`` (or ``arm:``) section of a
config YAML, read by the one mapping class of every recording, :class:`ros_lnn.bags.mapping.BagMapping`,
whose part :class:`~ros_lnn.bags.mapping.ArmKeys` holds the arm's keys. Every key and its default::

    actuated_joints: [j1, j2, ...]   # required: the driven joints, in the model's order
    joint_states_topic: /joint_states
    effort: joint_states             # joint_states: efforts are joint torques [N·m] / forces [N]
                                     # motor_current: efforts are motor currents [A] × effort_scale
    effort_scale: {j1: 0.105, ...}   # drive gain per joint (N·m/A); joints not listed: 1.0
    effort_topic: ""                 # "" = the joint_states topic; else a JointState topic
    effort_field: effort             # which JointState field holds the effort (effort|position|velocity)
    stamps: header                   # header | receive (bag time)
    filter_cutoff_hz: 0              # 0 = 10 Hz, capped at 0.4 × Nyquist (ros_lnn.arm.signals)
    coulomb_velocity: 0.02           # rad/s: the Coulomb term's tanh width
    gap_factor: 5.0                  # a stamp step > gap_factor × the median step splits a recording
    robot_description: ""            # the URDF (or --urdf); relative: to the config
    physically_consistent: true      # every identified body a real mass distribution (false: plain LS)
    friction_memory: auto            # auto: stop operators per joint, kept where they help; off

``ArmMapping(actuated_joints=[...], ...)`` is a :class:`BagMapping` with its arm part.
"""

from __future__ import annotations

from typing import Any

from ..bags.mapping import EFFORT_FIELDS, EFFORT_SOURCES, ArmKeys, BagMapping, config_section
from ..errors import ConfigError

#: The arm flow's mapping: the one mapping class, with the arm's keys (``actuated_joints``) as its part.
ArmMapping = BagMapping


def read_config(path) -> Any:
    from ..files import load_yaml

    return load_yaml(path, "arm mapping")


def arm_section(path) -> dict:
    """The arm keys of a config: its ``arm:`` section, else its ``bag:`` section, else the top level."""
    _, section = config_section(path)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: expected a YAML mapping with a bag: section")
    return section


def is_arm_config(path) -> bool:
    """Whether a config declares ``actuated_joints`` (the arm flow)."""
    try:
        return "actuated_joints" in arm_section(path)
    except ConfigError:
        return False


__all__ = [
    "ArmKeys",
    "ArmMapping",
    "EFFORT_FIELDS",
    "EFFORT_SOURCES",
    "arm_section",
    "is_arm_config",
    "read_config",
]
