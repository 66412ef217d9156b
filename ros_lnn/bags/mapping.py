"""Which topics and joints of a bag make the dataset: the ``bag:`` section of a config YAML, with
overrides (the command line's). One mapping class, :class:`BagMapping`, for both flows:

- a system with free (unactuated) joints (the crane, the Furuta pendulum, ...): ``free_joints``,
  ``servo_joints`` and the keys of the servo commands and efforts;
- a fully actuated arm (:mod:`ros_lnn.arm`): the section lists ``actuated_joints``, and the arm's keys
  (:class:`ArmKeys`: the driven joints and how their efforts are recorded) are the mapping's part
  ``arm``, read through the mapping (``mapping.actuated_joints``, ``mapping.gains()``).

The keys both flows share (:data:`SHARED_KEYS`: ``joint_states_topic``, ``stamps``, ``gap_factor``,
``robot_description``) are the mapping's own and checked once, with the same messages in both.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError

#: Kinds of joint a mapping may declare (``joint_kinds``).
JOINT_KINDS = ("revolute", "continuous", "prismatic", "cyclic")

SERVO_TYPES = {
    "auto": "auto",
    "JointTrajectory": "trajectory_msgs/msg/JointTrajectory",
    "Float64MultiArray": "std_msgs/msg/Float64MultiArray",
}

EFFORT_SOURCES = ("joint_states", "motor_current")
EFFORT_FIELDS = ("effort", "position", "velocity")
#: The keys both flows share: the mapping's own fields, checked once (:meth:`BagMapping._check_shared`).
SHARED_KEYS = ("joint_states_topic", "stamps", "gap_factor", "robot_description")
#: The arm flow's keys in the order its models store them (``mapping`` in an arm model's metadata).
ARM_FLOW_KEYS = (
    "actuated_joints",
    "joint_states_topic",
    "effort",
    "effort_scale",
    "effort_topic",
    "effort_field",
    "stamps",
    "filter_cutoff_hz",
    "coulomb_velocity",
    "gap_factor",
    "robot_description",
    "physically_consistent",
    "friction_memory",
)


@dataclass(frozen=True)
class ArmKeys:
    """The arm's part of the ``bag:`` section (a fully actuated arm)::

    actuated_joints: [j1, j2, ...]   # required: the driven joints, in the model's order
    effort: joint_states             # joint_states: efforts are joint torques [N·m] / forces [N]
                                     # motor_current: efforts are motor currents [A] × effort_scale
    effort_scale: {j1: 0.105, ...}   # drive gain per joint (N·m/A); joints not listed: 1.0
    effort_topic: ""                 # "" = the joint_states topic; else a JointState topic
    effort_field: effort             # which JointState field holds the effort (effort|position|velocity)
    filter_cutoff_hz: 0              # 0 = 10 Hz, capped at 0.4 × Nyquist (ros_lnn.arm.signals)
    coulomb_velocity: 0.02           # rad/s: the Coulomb term's tanh width
    physically_consistent: true      # every identified body a real mass distribution (false: plain LS)
    friction_memory: auto            # auto: stop operators per joint, kept where they help; off
    """

    actuated_joints: tuple = ()
    effort: str = "joint_states"
    effort_scale: dict = field(default_factory=dict)
    effort_topic: str = ""
    effort_field: str = "effort"
    filter_cutoff_hz: float = 0.0
    coulomb_velocity: float = 0.02
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
        if not isinstance(self.effort_topic, str):
            raise ConfigError(f"effort_topic = {self.effort_topic!r}: give a string")
        if self.effort not in EFFORT_SOURCES:
            raise ConfigError(f"effort = {self.effort!r}: one of {', '.join(EFFORT_SOURCES)}")
        if self.effort_field not in EFFORT_FIELDS:
            raise ConfigError(f"effort_field = {self.effort_field!r}: one of {', '.join(EFFORT_FIELDS)}")
        if not isinstance(self.physically_consistent, bool):
            raise ConfigError(f"physically_consistent = {self.physically_consistent!r}: true or false")
        if self.friction_memory not in ("auto", "off"):
            raise ConfigError(f"friction_memory = {self.friction_memory!r}: auto or off")
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
        for key, lo, hi in (("filter_cutoff_hz", 0.0, 1e4), ("coulomb_velocity", 1e-5, 10.0)):
            _check_range(key, getattr(self, key), lo, hi)

    def gains(self) -> list[float]:
        """Per actuated joint the factor from the recorded effort to joint torque."""
        if self.effort != "motor_current":
            return [1.0] * len(self.actuated_joints)
        return [float(self.effort_scale.get(j, 1.0)) for j in self.actuated_joints]


ARM_KEYS = tuple(f.name for f in fields(ArmKeys))


def _check_range(key: str, value, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi):
        raise ConfigError(f"{key} = {value!r}: give a number in [{lo:g}, {hi:g}]")


@dataclass(frozen=True, init=False)
class BagMapping:
    """Every field with its default; a config's ``bag:`` section may set any of them. With
    ``actuated_joints`` (or ``arm=ArmKeys(...)``) the mapping is an arm's: its part :attr:`arm` holds the
    arm's keys, which the mapping reads through (``mapping.effort_scale``), and the keys of free and servo
    joints do not apply."""

    joint_states_topic: str = "/joint_states"
    #: servo command topic ("" = none); its accelerations are used as q̈_e when present
    servo_topic: str = "/servo_commands"
    #: auto (from the bag) | JointTrajectory | Float64MultiArray (data = [q_e..., q̇_e..., q̈_e...])
    servo_type: str = "auto"
    free_joints: tuple = ()
    servo_joints: tuple = ()
    #: joint names in array order, for JointState messages whose ``name`` is empty
    joint_order: tuple = ()
    #: measured Q_e: "joint_states" (effort of the servo joints), "none", or a topic
    #: (JointState effort, or Float64MultiArray with one entry per servo joint)
    servo_effort: str = "joint_states"
    #: Q_f: "zero" (free joints unactuated), "joint_states", "none" (unknown), or a topic as above
    free_effort: str = "zero"
    #: exact values written by 'ros-lnn simulate --bag' ("" = none); used for evaluation only
    ground_truth_topic: str = "/ground_truth"
    #: header | receive (bag time); header falls back to receive, with a warning, when stamps are zero
    stamps: str = "header"
    #: a stamp step longer than gap_factor × the median step splits the recording into trials
    gap_factor: float = 5.0
    #: trials with fewer samples are dropped (reported)
    min_samples: int = 50
    #: largest |Δt − median Δt| / median Δt above which a trial is resampled to a uniform grid
    #: (cubic spline through the samples; a missing sample or rate jitter triggers it)
    jitter_tolerance: float = 0.01
    #: rate of the uniform grid when resampling (0 = the median rate)
    rate_hz: float = 0.0
    savgol_window: int = 11
    savgol_order: int = 3
    #: share of trials held out for validation (split by trial, seeded)
    val_fraction: float = 0.25
    #: by_trial: validation cut from the recordings (in-distribution); by_bag: with several bags the
    #: last one is the test recording and the one before it (three or more) the validation recording
    split: str = "by_trial"
    seed: int = 0
    #: the robot's name, written into the model's metadata
    system: str = ""
    #: per joint: revolute (rad, the default), continuous (rad, wraps: enters the network as sin/cos),
    #: prismatic (m), cyclic (the Lagrangian does not depend on it: not a network input at all)
    joint_kinds: dict = field(default_factory=dict)
    #: shorthand for joint_kinds entries "cyclic"
    cyclic_joints: tuple = ()
    #: URDF file of the robot ("" = none): its rigid-body model becomes the prior (gray box); an arm's
    #: rigid body
    robot_description: str = ""
    #: the arm's part (None: a system with free joints)
    arm: ArmKeys | None = None

    def __init__(self, arm: ArmKeys | None = None, **values):
        arm_values = {key: values.pop(key) for key in ARM_KEYS if key in values}
        if arm_values:  # the arm's keys given flat (a config's section, or over an arm part: replace)
            arm = replace(arm, **arm_values) if arm is not None else ArmKeys(**arm_values)
        own: tuple[Field, ...] = fields(self)
        for f in own:
            if f.name == "arm":
                continue
            default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc,operator]
            object.__setattr__(self, f.name, values.pop(f.name, default))
        if values:
            raise TypeError(f"BagMapping got unexpected keyword argument(s) {', '.join(sorted(values))}")
        object.__setattr__(self, "arm", arm)
        self._check_shared()
        if arm is None:
            self._check_free_joints()

    def __getattr__(self, name: str):
        """The arm's keys, read through the mapping (only called for what the mapping itself lacks)."""
        arm = self.__dict__.get("arm")
        if arm is not None and name in ARM_KEYS + ("gains",):
            return getattr(arm, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def is_arm(self) -> bool:
        return self.arm is not None

    def _check_shared(self) -> None:
        """The keys both flows share: one check, one message each."""
        for key in ("joint_states_topic", "robot_description"):
            if not isinstance(getattr(self, key), str):
                raise ConfigError(f"bag.{key} = {_short(getattr(self, key))}: must be a text value")
        if self.stamps not in ("header", "receive"):
            raise ConfigError(f"bag.stamps '{self.stamps}': choose header or receive")
        if self.arm is not None:  # the arm's recordings were always held to it
            _check_range("bag.gap_factor", self.gap_factor, 1.5, 1e6)

    def _check_free_joints(self) -> None:
        for key in ("free_joints", "servo_joints", "joint_order", "cyclic_joints"):
            value = getattr(self, key)
            value = [value] if isinstance(value, str) else value or ()
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(
                    f"bag.{key} = {getattr(self, key)!r}: give a joint name or a list of joint names"
                )
            object.__setattr__(self, key, tuple(value))
        if self.servo_type not in SERVO_TYPES and self.servo_type not in SERVO_TYPES.values():
            raise ConfigError(f"bag.servo_type '{self.servo_type}': choose one of {', '.join(SERVO_TYPES)}")
        if not self.free_joints:
            raise ConfigError("bag.free_joints is empty: name the free (unactuated) joints")
        if set(self.free_joints) & set(self.servo_joints):
            raise ConfigError(
                f"joints {sorted(set(self.free_joints) & set(self.servo_joints))} are listed "
                "as both free and servo"
            )
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(f"bag.val_fraction {self.val_fraction} must be in [0, 1)")
        if self.split not in ("by_trial", "by_bag"):
            raise ConfigError(f"bag.split '{self.split}': choose by_trial or by_bag")
        if not isinstance(self.joint_kinds, dict):
            raise ConfigError(f"bag.joint_kinds must map joint names to kinds, got {self.joint_kinds!r}")
        kinds = {**dict.fromkeys(self.cyclic_joints, "cyclic"), **dict(self.joint_kinds)}
        joints = set(self.free_joints) | set(self.servo_joints)
        for joint, kind in kinds.items():
            if joint not in joints:
                raise ConfigError(
                    f"bag.joint_kinds/cyclic_joints: '{joint}' is neither a free nor a servo "
                    f"joint "
                    f"({', '.join(sorted(joints))})"
                )
            if kind not in JOINT_KINDS:
                raise ConfigError(
                    f"bag.joint_kinds: '{joint}: {kind}': choose one of {', '.join(JOINT_KINDS)}"
                )
        object.__setattr__(self, "joint_kinds", kinds)

    def kind(self, joint: str) -> str:
        """The joint's kind (:data:`JOINT_KINDS`); revolute when the mapping says nothing."""
        return self.joint_kinds.get(joint, "revolute")

    def unit(self, joint: str) -> str:
        return "m" if self.kind(joint) == "prismatic" else "rad"

    @property
    def servo_msgtype(self) -> str:
        return SERVO_TYPES.get(self.servo_type, self.servo_type)

    def describe(self) -> str:
        """One line: an arm's joints and where its efforts come from; else the free and servo joints."""
        if self.arm is None:
            return f"free joints {list(self.free_joints)}, servo joints {list(self.servo_joints)}"
        source = self.arm.effort_topic or self.joint_states_topic
        if self.arm.effort == "motor_current":
            unit = f"motor current × drive gain ({', '.join(f'{g:g}' for g in self.arm.gains())} N·m/A)"
        else:
            unit = "measured joint torque"
        n = len(self.arm.actuated_joints)
        return f"{n} actuated joints; effort = {source}.{self.arm.effort_field}: {unit}"

    def arm_dict(self) -> dict:
        """An arm mapping's keys, flat, in :data:`ARM_FLOW_KEYS` order (what an arm model stores)."""
        if self.arm is None:
            raise ConfigError("not an arm mapping: it lists no actuated_joints")
        return {key: getattr(self.arm if key in ARM_KEYS else self, key) for key in ARM_FLOW_KEYS}

    @staticmethod
    def known_keys(arm: bool) -> dict[str, Field]:
        """The keys a section may set: the shared ones and those of its flow (an arm's, or free joints')."""
        own = {f.name: f for f in fields(BagMapping) if f.name != "arm"}
        if not arm:
            return own
        return {**{k: own[k] for k in SHARED_KEYS}, **{f.name: f for f in fields(ArmKeys)}}

    @classmethod
    def from_dict(cls, values: dict, source: str = "mapping") -> BagMapping:
        if not isinstance(values, dict):
            raise ConfigError(
                f"{source}: the bag mapping must be a YAML mapping, got {type(values).__name__}"
            )
        known = cls.known_keys("actuated_joints" in values)
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(
                f"{source}: unknown bag setting(s) {', '.join(unknown)} (known: {', '.join(known)})"
            )
        typed: dict[str, Any] = {}
        for key, value in values.items():
            default = known[key].default
            if default is MISSING:  # dict fields
                default = known[key].default_factory()  # type: ignore[misc,operator]
            reason = _value_problem(value, default)
            if reason:
                raise ConfigError(f"{source}: bag.{key} = {_short(value)}: {reason}")
            try:
                typed[key] = (
                    type(default)(value)
                    if isinstance(default, (int, float)) and value is not None
                    else ({} if value is None and isinstance(default, dict) else value)
                )
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{source}: bag.{key} = {value!r} is not a {type(default).__name__}"
                ) from None
            if typed[key] is None and isinstance(default, str):
                typed[key] = ""
        return cls(**typed)

    @classmethod
    def from_yaml(cls, path, overrides: dict | None = None) -> BagMapping:
        """Read the ``bag:`` section of ``path`` (an arm's may be called ``arm:``; the whole file when it
        has neither)."""
        path = Path(path)
        doc, section = config_section(path)
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: expected a 'bag:' mapping")
        urdf = section.get("robot_description")
        if urdf and isinstance(urdf, str) and not Path(urdf).is_absolute():  # relative to the config
            section = {**section, "robot_description": str(path.parent / urdf)}
        known = set(cls.known_keys(False)) | set(ARM_KEYS)
        if not {"bag", "arm"} & set(doc) and not set(section) & known:
            raise ConfigError(
                f"{path}: no 'bag:' section (topics and joints of the recording); "
                "see config/bag_mapping_crane.yaml"
            )
        return cls.from_dict({**section, **(overrides or {})}, str(path))

    def with_overrides(self, **overrides) -> BagMapping:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def config_section(path) -> tuple[dict, Any]:
    """``(the config, its mapping section)``: its ``arm:`` section, else its ``bag:`` section, else the
    whole file."""
    from ..files import load_yaml

    doc = load_yaml(path, "config") or {}
    if not isinstance(doc, dict):
        return {}, None
    for key in ("arm", "bag"):
        if isinstance(doc.get(key), dict):
            return doc, doc[key]
    return doc, doc.get("bag", doc)


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _value_problem(value, default) -> str:
    """Why a YAML value cannot stand for a setting with this default ('' when it can)."""
    if value is None:
        return ""
    if isinstance(default, str):
        return "" if isinstance(value, str) else "must be a text value"
    if isinstance(default, bool):
        return "" if isinstance(value, bool) else "must be true or false"
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a {'whole ' if isinstance(default, int) else ''}number"
        if not math.isfinite(value):
            return "must be finite"
        if isinstance(default, int) and value != int(value):
            return "must be a whole number"
        return ""
    if isinstance(default, dict):
        return "" if isinstance(value, dict) else "must be a mapping"
    if isinstance(default, tuple):
        if isinstance(value, str):
            return ""
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            return "give a joint name or a list of joint names"
    return ""


CRANE = dict(free_joints=("pendulum_joint",), servo_joints=("cart_joint",), system="crane")


def mapping_from_options(config=None, overrides: dict | None = None) -> BagMapping:
    """The mapping of ``config`` (a YAML path; default: the crane) with ``overrides`` applied."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if config:
        return BagMapping.from_yaml(config, overrides)
    return BagMapping.from_dict({**CRANE, **overrides}, "command line")


__all__ = [
    "ArmKeys",
    "BagMapping",
    "mapping_from_options",
    "CRANE",
    "SERVO_TYPES",
    "JOINT_KINDS",
    "EFFORT_SOURCES",
    "EFFORT_FIELDS",
]
