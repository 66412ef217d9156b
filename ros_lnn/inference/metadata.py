"""Metadata of an exported model: the contract between the exporter (torch) and the runtime (numpy).

Stored in the ONNX file's ``metadata_props`` under the key ``ros_lnn`` as one JSON document.

Graph inputs (float32 unless ``dtype`` says otherwise; batch dimension ``batch`` dynamic), all in
*model order*: the coordinates are ``free_joints`` followed by ``servo_joints``.
    q      (batch, n)    generalised coordinates
    qd     (batch, n)    velocities
    qdd_e  (batch, n_e)  servo accelerations            (omitted when n_e == 0)
    Q_f    (batch, n_f)  generalised forces on free coordinates
Graph outputs: ``ros_lnn.physics.lagrangian.OUTPUT_NAMES`` (model order), shapes in ``OUTPUT_SHAPES``;
a model with a learned dissipation also ``Q_dissipative`` (then ``Q`` is the applied force and
``E_dot = q̇ᵀ Q + q̇ᵀ Q_dissipative``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..errors import ModelError

METADATA_KEY = "ros_lnn"
FORMAT_VERSION = 1

INPUT_NAMES = ("q", "qd", "qdd_e", "Q_f")
# Symbolic shapes: n, n_f, n_e; "" means per-sample scalar.
OUTPUT_SHAPES = {
    "qdd": "n",
    "qdd_f": "n_f",
    "Q": "n",
    "Q_e": "n_e",
    "Q_inertial": "n",
    "Q_coriolis": "n",
    "Q_conservative": "n",
    "Q_ff_m": "n_f",
    "Q_fe_m": "n_f",
    "Q_ef_m": "n_e",
    "Q_ee_m": "n_e",
    "T": "",
    "V": "",
    "E": "",
    "T_dot": "",
    "V_dot": "",
    "E_dot": "",
    "W_dot": "n",
    "power": "",
    "M": "n,n",
    "Q_dissipative": "n",  # only models with a learned dissipation export it
}
OUTPUT_UNITS = {
    "qdd": "rad/s^2 or m/s^2 per coordinate",
    "Q": "N*m or N per coordinate",
    "T": "J",
    "V": "J",
    "E": "J",
    "T_dot": "W",
    "V_dot": "W",
    "E_dot": "W",
    "W_dot": "W",
    "power": "W",
    "M": "kg*m^2, kg*m or kg per entry",
    "Q_dissipative": "N*m or N per coordinate",
}


@dataclass
class ModelMetadata:
    family: str  # "servo_lnn" (DeLaN when servo_joints is empty), ...
    free_joints: list[str]
    servo_joints: list[str]
    coordinate_units: list[str]  # per coordinate in model order: "rad" or "m"
    dtype: str = "float32"
    system: str = ""  # e.g. "crane", "chain3"
    network: dict = field(default_factory=dict)  # widths, activation, epsilon, ...
    provenance: dict = field(default_factory=dict)  # data hashes, split, command, versions, date
    metrics: dict = field(default_factory=dict)  # validation metrics at export time
    format_version: int = FORMAT_VERSION
    package_version: str = ""

    @property
    def joints(self) -> list[str]:
        return list(self.free_joints) + list(self.servo_joints)

    @property
    def n(self) -> int:
        return len(self.free_joints) + len(self.servo_joints)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = "model") -> ModelMetadata:
        """Parse and type-check the metadata document; ModelError (one line) for anything that is not
        what the exporter writes. Keys this version does not know are ignored."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError, RecursionError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ModelError(f"{source}: metadata '{METADATA_KEY}' is not valid JSON ({first})") from None
        if not isinstance(data, dict):
            kinds = {list: "array", str: "string", type(None): "null", bool: "boolean"}
            kind = kinds.get(type(data), "number")
            raise ModelError(
                f"{source}: metadata '{METADATA_KEY}' is a JSON {kind}, not an object; "
                "re-export the model with ros-lnn export"
            )
        missing = [k for k in ("family", "free_joints", "servo_joints", "coordinate_units") if k not in data]
        if missing:
            raise ModelError(
                f"{source}: metadata lacks {', '.join(missing)}; re-export the model with ros-lnn export"
            )
        version = data.get("format_version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ModelError(f"{source}: metadata field format_version is {version!r}, not an integer")
        if version > FORMAT_VERSION:
            raise ModelError(
                f"{source}: metadata format {version} is newer than this ros_lnn "
                f"understands ({FORMAT_VERSION}); update ros_lnn"
            )
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for name, value in known.items():
            problem = _field_problem(name, value)
            if problem:
                raise ModelError(
                    f"{source}: metadata field {name} {problem}; re-export the model with ros-lnn export"
                )
        joints = list(known["free_joints"]) + list(known["servo_joints"])
        repeated = sorted({j for j in joints if joints.count(j) > 1})
        if repeated:
            raise ModelError(f"{source}: metadata names joints {repeated} more than once")
        if len(known["coordinate_units"]) not in (0, len(joints)):
            raise ModelError(
                f"{source}: metadata has {len(known['coordinate_units'])} coordinate_units for "
                f"{len(joints)} joints"
            )
        return cls(**known)

    def check_joints(self, free_joints, servo_joints, source: str = "model") -> None:
        """Raise ModelError naming exactly what differs between the model and the configuration."""
        problems = []
        for role, have, want in (
            ("free", self.free_joints, list(free_joints)),
            ("servo", self.servo_joints, list(servo_joints)),
        ):
            if list(have) != want:
                extra = [j for j in want if j not in have]
                lacking = [j for j in have if j not in want]
                detail = []
                if extra:
                    detail.append(f"configured but not in model: {extra}")
                if lacking:
                    detail.append(f"in model but not configured: {lacking}")
                if not detail:
                    detail.append(f"order differs: model {list(have)}, configured {want}")
                problems.append(f"{role} joints " + "; ".join(detail))
        if problems:
            raise ModelError(f"{source} does not fit the configured joints: " + " | ".join(problems))


_STRING_LISTS = ("free_joints", "servo_joints", "coordinate_units")
_STRINGS = ("family", "dtype", "system", "package_version")
_OBJECTS = ("network", "provenance", "metrics")


def _field_problem(name: str, value) -> str:
    """Why ``value`` cannot be metadata field ``name`` ('' when it can)."""
    if name in _STRING_LISTS:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            return f"is {_short(value)}, not a list of non-empty strings"
    elif name in _STRINGS:
        if not isinstance(value, str):
            return f"is {_short(value)}, not a string"
    elif name in _OBJECTS:
        if not isinstance(value, dict):
            return f"is {_short(value)}, not an object"
    return ""


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
