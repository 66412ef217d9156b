"""``ros-lnn bench realdata``: does a model trained on one robot recording hold on another?

For each system of the recording set (:mod:`ros_lnn.recordings`: a rotary pendulum trained on a STEP
recording — constant arm speed after a 0.3 s ramp — and a crane with friction trained on a
multisine; both tested on impulse and chirp recordings; joint states only, noise, quantisation,
jitter, a gap), in one run:

* ServoLNN trained on the training recording (``ros-lnn train --bag TRAIN --test-bag ...`` with the
  system's mapping plus the joint kinds: servo coordinate cyclic, pendulum continuous; dissipation on,
  the default for recordings without forces; the URDF prior from a URDF whose masses and lengths are
  off by 5–20 %, the way a CAD export is), its held-out q̈_f nMSE on each test recording against the
  Savitzky–Golay reference of the measured velocities, and its training time;
* the same with dissipation off, with the cyclic coordinate treated as an ordinary one, and without
  the URDF prior (ablations);
* the least-squares fit of the system's true structural equation on the same training recording
  (with and without its damping terms) and predicting zero (:mod:`ros_lnn.recordings.structural_fit`).

Goal: held-out nMSE ≤ 1e-3 and within 10× of the structural fit. ``--quick``: one system (rotary),
the full model and the no-prior ablation, short training (a smoke test).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

#: per system: the joint kinds of the bench's mapping, and the URDF's deliberate errors
KINDS = {
    "rotary_pendulum": {"arm_joint": "cyclic", "pendulum_joint": "continuous"},
    "friction_crane": {"cart_joint": "cyclic", "pendulum_joint": "continuous"},
}
URDF_ERROR = {"mass": 1.2, "length": 1.05, "arm": 0.95}
VARIANTS: dict[str, dict[str, Any]] = {
    "ServoLNN (dissipation, cyclic, URDF prior)": {},
    "  dissipation off": {"dissipation": "off"},
    "  cyclic off": {"cyclic": False},
    "  URDF prior off": {"urdf": False},
}
QUICK_VARIANTS = ("ServoLNN (dissipation, cyclic, URDF prior)", "  URDF prior off")
GOAL_NMSE = 1e-3


def rotary_urdf(system, error=URDF_ERROR) -> str:
    """The rotary pendulum as a URDF: a thin rod hinged at the tip of the spinning arm."""
    m, L, r = system.m_p * error["mass"], system.L_p * error["length"], system.r * error["arm"]
    J = system.J_arm * error["mass"]
    rod = m * L**2 / 12
    return f"""<robot name="rotary_pendulum">
  <link name="base"/>
  <joint name="arm_joint" type="continuous"><parent link="base"/><child link="arm"/>
    <axis xyz="0 0 1"/></joint>
  <link name="arm"><inertial><mass value="{0.05 * error["mass"]}"/>
    <inertia ixx="{J / 2}" ixy="0" ixz="0" iyy="{J / 2}" iyz="0" izz="{J}"/></inertial></link>
  <joint name="pendulum_joint" type="continuous"><parent link="arm"/><child link="pendulum"/>
    <origin xyz="{r} 0 0"/><axis xyz="1 0 0"/></joint>
  <link name="pendulum"><inertial><origin xyz="0 0 {-L / 2}"/><mass value="{m}"/>
    <inertia ixx="{rod}" ixy="0" ixz="0" iyy="{rod}" iyz="0" izz="0"/></inertial></link>
</robot>
"""


def crane_urdf(system, error=URDF_ERROR) -> str:
    """The crane as a URDF: a cart on a rail along x, a bob on a string (a point mass)."""
    m1, m2, L = system.m1 * error["mass"], system.m2 * error["mass"], system.L * error["length"]
    return f"""<robot name="friction_crane">
  <link name="rail"/>
  <joint name="cart_joint" type="prismatic"><parent link="rail"/><child link="cart"/>
    <axis xyz="1 0 0"/><limit lower="-100" upper="100" effort="100" velocity="10"/></joint>
  <link name="cart"><inertial><mass value="{m1}"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
  <joint name="pendulum_joint" type="continuous"><parent link="cart"/><child link="bob"/>
    <axis xyz="0 -1 0"/></joint>
  <link name="bob"><inertial><origin xyz="0 0 {-L}"/><mass value="{m2}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
</robot>
"""


def write_urdf(folder: Path, system: str, plant) -> Path:
    text = rotary_urdf(plant.system) if system == "rotary_pendulum" else crane_urdf(plant.system)
    path = folder / f"{system}.urdf"
    path.write_text(text)
    return path


def held_out_nmse(model, bag, mapping) -> float:
    """q̈_f nMSE of ``model`` on every sample of a recording, against its measured (Savitzky–Golay) q̈_f."""
    from ros_lnn.bags.dataset import load_bag_dataset
    from ros_lnn.families.servo_lnn import evaluate
    from ros_lnn.training.data import model_order, reorder
    from ros_lnn.training.sources import stack

    ds = load_bag_dataset(bag, replace(mapping, val_fraction=0.0))
    samples = stack(ds.trials)
    order = model_order(ds.trials[0].coordinate_names, model.free_joints, model.servo_joints)
    return float(evaluate(model, reorder(samples, order))["qdd_f_nmse"])


def train_variant(recordings, system: str, urdf: Path, options: dict, work: Path, schedule: dict) -> dict:
    """Train one variant on the system's training recording; its held-out nMSE per test recording."""
    from ros_lnn.training.run import RunSpec, run

    train = recordings.train(system)
    kinds = dict(KINDS[system])
    if options.get("cyclic") is False:
        kinds = {j: k for j, k in kinds.items() if k != "cyclic"}
    overrides: dict[str, object] = {"joint_kinds": kinds}
    if options.get("urdf", True):
        overrides["robot_description"] = str(urdf)
    spec = RunSpec(
        bags=(str(train.path),),
        bag_config=str(recordings.mappings[system]),
        bag_mapping=overrides,
        dissipation=options.get("dissipation", "auto"),
        out=str(work / f"{system}_{len(list(work.iterdir()))}.pt"),
        report=False,
        dtype="float64",
        threads=1,
        **schedule,
    )
    start = time.perf_counter()
    result = run(spec, progress=lambda line: None)
    assert result is not None  # no torchrun here: this process is rank 0
    seconds = time.perf_counter() - start
    mapping = recordings.mapping(system)
    tests = {r.name: held_out_nmse(result.model, r.path, mapping) for r in recordings.tests(system)}
    return {"test_nmse": tests, "train_seconds": round(seconds, 1), "epochs": spec.epochs}


def bench_realdata(args) -> dict:
    import os

    from ros_lnn.recordings.recording_set import build_recording_set, structural_baselines

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    quick = bool(getattr(args, "quick", False))
    systems = ["rotary_pendulum"] if quick else ["rotary_pendulum", "friction_crane"]
    variants = {k: v for k, v in VARIANTS.items() if not quick or k in QUICK_VARIANTS}
    schedule: dict[str, Any] = {
        "epochs": 60 if quick else 800,
        "lr": 1e-3,
        "batch": 256,
        "hidden": (32,) if quick else (64,),
        "log_every": 10**6,
        "val_every": 10**6,
    }
    results: dict = {
        "systems": {},
        "schedule": {k: list(v) if isinstance(v, tuple) else v for k, v in schedule.items()},
        "urdf_error": URDF_ERROR,
        "goal_nmse": GOAL_NMSE,
    }
    with tempfile.TemporaryDirectory(prefix="ros_lnn_realdata_") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        recordings = build_recording_set(root / "recordings", systems=systems)
        print(
            f"recording set: {len(recordings.recordings)} bags in {time.perf_counter() - start:.0f} s "
            f"({', '.join(systems)}); training {schedule['epochs']} epochs, lr {schedule['lr']}, "
            f"batch {schedule['batch']}, hidden {list(schedule['hidden'])}, float64, 1 thread"
        )
        for system in systems:
            work = root / f"work_{system}"
            work.mkdir()
            urdf = write_urdf(root, system, recordings.plants[system])
            rows = []
            for label, options in variants.items():
                row = train_variant(recordings, system, urdf, options, work, schedule)
                rows.append({"model": label.strip(), **row})
            baselines = structural_baselines(recordings, system)
            for b in baselines:
                rows.append({"model": b["baseline"], "test_nmse": b["test_nmse"], "train_seconds": None})
            results["systems"][system] = {"trained_on": recordings.train(system).name, "rows": rows}
            print(format_table(system, recordings.train(system).name, rows, list(variants)))
    verdicts = goal_verdicts(results)
    for line in verdicts:
        print(line)
    results["verdicts"] = verdicts
    return results


def format_table(system: str, trained_on: str, rows: list, labels: list) -> str:
    tests = list(rows[0]["test_nmse"])
    lines = [
        f"{system}: trained on {trained_on}; held-out q̈_f nMSE (reference: Savitzky–Golay of the "
        "measured velocities)",
        " ".join(["model".ljust(44)] + [t.rjust(13) for t in tests] + ["train s".rjust(8)]),
    ]
    pretty = {label.strip(): label for label in labels}
    for row in rows:
        name = pretty.get(row["model"], row["model"])
        secs = "" if row["train_seconds"] is None else f"{row['train_seconds']:8.1f}"
        lines.append(" ".join([name.ljust(44)] + [f"{row['test_nmse'][t]:13.2e}" for t in tests] + [secs]))
    return "\n".join(lines)


def goal_verdicts(results: dict) -> list:
    """Per system and test recording: the full model against the goal (≤ 1e-3, within 10× of the
    structural fit)."""
    out = []
    for system, entry in results["systems"].items():
        rows = {r["model"]: r for r in entry["rows"]}
        full = rows[next(iter(VARIANTS)).strip()]
        structural = rows["structural"]
        for test, value in full["test_nmse"].items():
            ref = structural["test_nmse"][test]
            ok = value <= GOAL_NMSE and value <= 10 * ref
            out.append(
                f"{system} {test}: ServoLNN {value:.2e}, structural {ref:.2e} "
                f"({value / ref:.1f}x) -> {'goal met' if ok else 'goal NOT met'}"
            )
    return out


__all__ = ["bench_realdata", "rotary_urdf", "crane_urdf", "held_out_nmse", "format_table"]


if __name__ == "__main__":  # python -m ros_lnn_lab.bench.realdata [--quick]
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    bench_realdata(parser.parse_args())
