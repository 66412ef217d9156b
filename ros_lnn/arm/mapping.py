"""How a fully actuated arm's recording maps onto the model: the ``bag:`` (or ``arm:``) section of a
config YAML. Every key and its default::

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
    robot_description: ""            # the URDF (or --urdf)
    physically_consistent: true      # every identified body a real mass distribution (false: plain LS)
    friction_memory: auto            # auto: stop operators per joint, kept where validation helps; off
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ConfigError

EFFORT_SOURCES = ("joint_states", "motor_current")
EFFORT_FIELDS = ("effort", "position", "velocity")


@dataclass(frozen=True)
class ArmMapping:
    actuated_joints: tuple = ()
    joint_states_topic: str = "/joint_states"
    effort: str = "joint_states"
    effort_scale: dict = field(default_factory=dict)
    effort_topic: str = ""
    effort_field: str = "effort"
    stamps: str = "header"
    filter_cutoff_hz: float = 0.0
    coulomb_velocity: float = 0.02
    gap_factor: float = 5.0
    robot_description: str = ""
    physically_consistent: bool = True
    friction_memory: str = "auto"

    def __post_init__(self):
        joints = self.actuated_joints
        joints = [joints] if isinstance(joints, str) else joints
        if (
            not isinstance(joints, (list, tuple))
            or not joints
            or not all(isinstance(j, str) and j for j in joints)
        ):
            raise ConfigError(
                f"actuated_joints = {self.actuated_joints!r}: give the list of driven joint names"
            )
        if len(set(joints)) != len(joints):
            raise ConfigError(f"actuated_joints lists a joint twice: {list(joints)}")
        object.__setattr__(self, "actuated_joints", tuple(joints))
        for key in ("joint_states_topic", "effort_topic", "robot_description"):
            if not isinstance(getattr(self, key), str):
                raise ConfigError(f"{key} = {getattr(self, key)!r}: give a string")
        if self.effort not in EFFORT_SOURCES:
            raise ConfigError(f"effort = {self.effort!r}: one of {', '.join(EFFORT_SOURCES)}")
        if self.effort_field not in EFFORT_FIELDS:
            raise ConfigError(f"effort_field = {self.effort_field!r}: one of {', '.join(EFFORT_FIELDS)}")
        if not isinstance(self.physically_consistent, bool):
            raise ConfigError(f"physically_consistent = {self.physically_consistent!r}: true or false")
        if self.friction_memory not in ("auto", "off"):
            raise ConfigError(f"friction_memory = {self.friction_memory!r}: auto or off")
        if self.stamps not in ("header", "receive"):
            raise ConfigError(f"stamps = {self.stamps!r}: header or receive")
        scale = self.effort_scale or {}
        if not isinstance(scale, dict):
            raise ConfigError(f"effort_scale = {scale!r}: give a mapping joint: gain")
        for joint, gain in scale.items():
            if joint not in self.actuated_joints:
                raise ConfigError(f"effort_scale names {joint!r}, which is not an actuated joint")
            if (
                isinstance(gain, bool)
                or not isinstance(gain, (int, float))
                or not math.isfinite(gain)
                or gain == 0
            ):
                raise ConfigError(f"effort_scale.{joint} = {gain!r}: give a finite, non-zero gain (N·m/A)")
        if scale and self.effort != "motor_current":
            raise ConfigError(
                "effort_scale is given but effort is not motor_current; set effort: motor_current"
            )
        for key, lo, hi in (
            ("filter_cutoff_hz", 0.0, 1e4),
            ("coulomb_velocity", 1e-5, 10.0),
            ("gap_factor", 1.5, 1e6),
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi):
                raise ConfigError(f"{key} = {value!r}: give a number in [{lo:g}, {hi:g}]")

    def gains(self) -> list[float]:
        """Per actuated joint the factor from the recorded effort to joint torque."""
        if self.effort != "motor_current":
            return [1.0] * len(self.actuated_joints)
        return [float(self.effort_scale.get(j, 1.0)) for j in self.actuated_joints]

    def describe(self) -> str:
        source = self.effort_topic or self.joint_states_topic
        if self.effort == "motor_current":
            unit = f"motor current × drive gain ({', '.join(f'{g:g}' for g in self.gains())} N·m/A)"
        else:
            unit = "measured joint torque"
        return f"{len(self.actuated_joints)} actuated joints; effort = {source}.{self.effort_field}: {unit}"

    @classmethod
    def from_dict(cls, values: dict, source: str = "mapping") -> ArmMapping:
        if not isinstance(values, dict):
            raise ConfigError(
                f"{source}: the arm mapping must be a YAML mapping, got {type(values).__name__}"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown arm mapping key(s) {unknown}; known: {sorted(known)}")
        return cls(**values)

    @classmethod
    def from_yaml(cls, path, overrides: dict | None = None) -> ArmMapping:
        values = dict(arm_section(path))
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls.from_dict(values, str(path))


def read_config(path) -> Any:
    from ..files import load_yaml

    return load_yaml(path, "arm mapping")


def arm_section(path) -> dict:
    """The arm keys of a config: its ``arm:`` section, else its ``bag:`` section, else the top level."""
    doc = read_config(path)
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a YAML mapping with a bag: section")
    for key in ("arm", "bag"):
        if isinstance(doc.get(key), dict):
            return doc[key]
    return doc


def is_arm_config(path) -> bool:
    """Whether a config declares ``actuated_joints`` (the arm flow)."""
    try:
        return "actuated_joints" in arm_section(path)
    except ConfigError:
        return False
