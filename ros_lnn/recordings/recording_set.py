"""The recording set for train/test of different excitation, per system, built deterministically into
a directory: ``<dir>/<system>/<role>_<excitation>`` bags, ``<dir>/<system>/mapping.yaml`` (the bag
mapping that reads them) and ``<dir>/recordings.json`` (what was recorded; no ground truth).

* ``rotary_pendulum`` (500 Hz): trained on a STEP recording — the arm ramps in 0.3 s to 2 rev/s and
  holds that speed, the narrow excitation of a real step-response recording; tested on arm impulses
  and on a chirp.
* ``friction_crane`` (250 Hz): trained on a random multisine of the cart; tested on cart impulses and
  on a chirp.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..bags.mapping import BagMapping
from ..errors import DataError
from ..physics.friction import FrictionPlant, friction_crane
from ..physics.rotary_pendulum import quanser_rotary_pendulum
from .generator import RecordingSpec, RecordingTruth, bag_mapping, write_recording
from .profiles import ChirpProfile, ImpulseProfile, MultisineProfile, Profile, StepProfile
from .structural_fit import baseline_rows, equation_for, measured_motion

PLANTS: dict[str, Callable[[], FrictionPlant]] = {
    "rotary_pendulum": quanser_rotary_pendulum,
    "friction_crane": friction_crane,
}
#: Savitzky–Golay window (samples) of each system's mapping: ~30 ms at 500 Hz, ~70 ms at 250 Hz
SAVGOL_WINDOW = {"rotary_pendulum": 15, "friction_crane": 17}
MANIFEST = "recordings.json"


@dataclass(frozen=True)
class RecordingPlan:
    system: str
    role: str  # "train" or "test"
    excitation: str
    profile: Profile
    spec: RecordingSpec

    @property
    def name(self) -> str:
        return f"{self.role}_{self.excitation}"


def recording_plans(storage: str = "sqlite3") -> list:
    """The set's recordings, each with its own seed."""
    rotary = RecordingSpec(duration_s=5.0, rate_hz=500.0, storage=storage)
    crane = RecordingSpec(duration_s=8.0, rate_hz=250.0, storage=storage, velocity_noise=(5e-4, 2e-4))
    plans = {  # system: its recording spec, then (role, excitation, profile, seed) per recording
        "rotary_pendulum": (
            rotary,
            ("train", "step", StepProfile(speed=4 * np.pi, ramp_s=0.3, start_s=0.2), 11),
            ("test", "impulse", ImpulseProfile((6.0, -6.0), (0.3, 2.5), 0.2), 12),
            ("test", "chirp", ChirpProfile(0.3, 0.2, 2.5, 4.0), 13),
        ),
        "friction_crane": (
            crane,
            (
                "train",
                "multisine",
                MultisineProfile.random(21, band_hz=(0.2, 1.5), terms=6, peak_speed=1.0),
                21,
            ),
            ("test", "impulse", ImpulseProfile((1.0, -1.0, 1.0), (0.5, 3.0, 5.5), 0.6), 22),
            ("test", "chirp", ChirpProfile(0.15, 0.2, 1.5, 6.0), 23),
        ),
    }
    return [
        RecordingPlan(system, role, excitation, profile, replace(spec, seed=seed))
        for system, (spec, *recordings) in plans.items()
        for role, excitation, profile, seed in recordings
    ]


@dataclass
class Recording:
    plan: RecordingPlan
    truth: RecordingTruth

    @property
    def path(self) -> Path:
        return self.truth.path

    @property
    def name(self) -> str:
        return self.plan.name


@dataclass
class RecordingSet:
    directory: Path
    recordings: list
    mappings: dict = field(default_factory=dict)  # system -> mapping YAML path
    plants: dict = field(default_factory=dict)  # system -> FrictionPlant

    @property
    def systems(self) -> list:
        return list(dict.fromkeys(r.plan.system for r in self.recordings))

    def train(self, system: str) -> Recording:
        return next(r for r in self.recordings if r.plan.system == system and r.plan.role == "train")

    def tests(self, system: str) -> list:
        return [r for r in self.recordings if r.plan.system == system and r.plan.role == "test"]

    def mapping(self, system: str) -> BagMapping:
        return BagMapping.from_yaml(self.mappings[system])


def mapping_yaml(mapping: dict, comment: str = "") -> str:
    """A ``bag:`` section in the layout of config/bag_mapping_*.yaml."""
    lines = [f"# {line}" for line in comment.splitlines()] + ["bag:"]
    for key, value in mapping.items():
        if isinstance(value, list):
            text = "[" + ", ".join(value) + "]"
        elif isinstance(value, str):
            text = value if value else "''"
        else:
            text = str(value)
        lines.append(f"  {key}: {text}")
    return "\n".join(lines) + "\n"


def build_recording_set(directory, *, storage: str = "sqlite3", systems=None) -> RecordingSet:
    """Write the set's bags (deterministic: fixed seeds) into ``directory`` (created; must not hold
    the bags already). ``systems``: a subset of the set's systems. Returns the truth of each bag."""
    directory = Path(directory)
    plans = [p for p in recording_plans(storage) if systems is None or p.system in systems]
    if not plans:
        raise DataError(f"no recordings for systems {systems}; choose from {', '.join(PLANTS)}")
    out = RecordingSet(directory, [])
    for plan in plans:
        plant: FrictionPlant = out.plants.setdefault(plan.system, PLANTS[plan.system]())
        (directory / plan.system).mkdir(parents=True, exist_ok=True)
        truth = write_recording(directory / plan.system / plan.name, plant, plan.profile, plan.spec)
        out.recordings.append(Recording(plan, truth))
        if plan.role == "train":
            path = directory / plan.system / "mapping.yaml"
            path.write_text(
                mapping_yaml(
                    bag_mapping(truth, savgol_window=SAVGOL_WINDOW[plan.system]),
                    f"Bag mapping of the {plan.system} recordings (joint states only).",
                )
            )
            out.mappings[plan.system] = path
    manifest = {
        "recordings": [
            {
                "system": r.plan.system,
                "role": r.plan.role,
                "excitation": r.plan.excitation,
                **r.truth.manifest(),
                "path": str(r.path.relative_to(directory)),
            }
            for r in out.recordings
        ],
        "mappings": {k: str(v.relative_to(directory)) for k, v in out.mappings.items()},
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return out


def structural_baselines(recordings: RecordingSet, system: str) -> list:
    """Baseline rows (structural fit with / without damping, zero) of one system: fitted on its
    training recording's measured data, scored on each test recording's (keys: recording names)."""
    mapping = recordings.mapping(system)
    train = measured_motion(recordings.train(system).path, mapping)
    tests = {r.name: measured_motion(r.path, mapping) for r in recordings.tests(system)}
    return baseline_rows(equation_for(recordings.plants[system]), train, tests)


def format_baselines(system: str, train_name: str, rows: list) -> str:
    """The rows as a plain-text table (q̈_f nMSE)."""
    tests = list(rows[0]["test_nmse"])
    head = f"{system}: fit on {train_name}; q̈_f nMSE"
    cols = ["baseline".ljust(24), "train".rjust(9)] + [t.rjust(14) for t in tests]
    lines = [head, " ".join(cols)]
    for row in rows:
        lines.append(
            " ".join(
                [row["baseline"].ljust(24), f"{row['train_nmse']:9.2e}"]
                + [f"{row['test_nmse'][t]:14.2e}" for t in tests]
            )
        )
    return "\n".join(lines)


__all__ = [
    "RecordingPlan",
    "Recording",
    "RecordingSet",
    "recording_plans",
    "build_recording_set",
    "structural_baselines",
    "format_baselines",
    "mapping_yaml",
    "PLANTS",
    "SAVGOL_WINDOW",
]
