"""``ros-lnn excite``: the designed trajectory respects the limits (checked on the written points
against the URDF read independently) and identifies better than random multisines of the same
limits — by the design criterion and on a generated recording that follows the file."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from ros_lnn.arm import identification as idn
from ros_lnn.arm.excitation import read_joint_trajectory
from ros_lnn.arm.fourier import Limits, random_multisine
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions
from ros_lnn.arm.samples import filtered_samples
from ros_lnn.cli import main

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = ["panda_joint1", "panda_joint2", "panda_joint4"]


def _urdf_limits():
    root = ET.parse(URDF).getroot()
    out = {}
    for joint in root.iter("joint"):
        limit = joint.find("limit")
        if joint.get("name") in JOINTS:
            out[joint.get("name")] = {k: float(limit.get(k)) for k in ("lower", "upper", "velocity")}
    return out


@pytest.fixture(scope="module")
def designed(tmp_path_factory):
    out = tmp_path_factory.mktemp("excite") / "excite.yaml"
    argv = [
        "excite", "--urdf", str(URDF), "--joints", ",".join(JOINTS), "--duration", "10",
        "--limits", "acceleration=4,panda_joint2.upper=1.0,velocity_scale=0.6",
        "--samples", "60", "--max-seconds", "6", "-o", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    return out, json.loads(out.with_name("excite.report.json").read_text())


def test_points_within_limits_and_at_rest_at_both_ends(designed):
    path, report = designed
    text = path.read_text()
    assert "--yaml-file excite.yaml" in text.splitlines()[1]
    msg = yaml.safe_load(text)
    assert msg["joint_names"] == JOINTS and msg["header"]["frame_id"] == ""
    pts = msg["points"]
    assert len(pts) == 101 and all(p["effort"] == [] for p in pts)
    t = np.array([p["time_from_start"]["sec"] + 1e-9 * p["time_from_start"]["nanosec"] for p in pts])
    np.testing.assert_allclose(t, 5.0 + 0.1 * np.arange(101), atol=1e-9)
    q, qd, qdd = (np.array([p[k] for p in pts]) for k in ("positions", "velocities", "accelerations"))
    urdf = _urdf_limits()
    lower = np.array([urdf[j]["lower"] for j in JOINTS])
    upper = np.array([urdf[j]["upper"] for j in JOINTS])
    upper[1] = 1.0
    assert np.all(q >= lower - 1e-6) and np.all(q <= upper + 1e-6)
    assert np.all(np.abs(qd) <= 0.6 * np.array([urdf[j]["velocity"] for j in JOINTS]) + 1e-6)
    assert np.all(np.abs(qdd) <= 4.0 + 1e-5)
    # the file's accelerations and velocities are those of its positions (finite differences)
    np.testing.assert_allclose(np.gradient(q, 0.1, axis=0)[1:-1], qd[1:-1], atol=0.02 * np.abs(qd).max())
    assert np.all(qd[0] == 0) and np.all(qd[-1] == 0) and np.all(qdd[0] == 0)
    np.testing.assert_allclose(q[0], q[-1], atol=1e-6)  # one whole period
    assert np.abs(q - q[0]).max(0).min() > 0.3  # every joint moves
    # dense check of the series itself against the same limits
    assert np.all(np.array(report["peaks"]["qdd_max"]) <= 4.0 * (1 + 1e-9))
    assert report["limits"]["upper"][1] == 1.0


def test_condition_number_below_random_multisines(designed):
    _, report = designed
    assert report["base_parameters"] == 24  # 3 bodies: 15 inertial combinations + 3 × 3 friction
    assert report["condition_number"] < min(report["random_multisine_condition_numbers"])
    assert report["condition_number"] < 0.5 * report["random_multisine_condition_number_median"]


def test_generated_recording_of_the_file_identifies_better(designed):
    """The written file, run through the generator (noise on), gives identification a lower
    condition number than a random multisine of the same limits and period."""
    path, report = designed
    gen = ArmGenerator(URDF, JOINTS, seed=2)
    opts = GeneratorOptions(rate_hz=200.0)
    traj = read_joint_trajectory(path)
    assert traj.joints == tuple(JOINTS) and traj.duration == pytest.approx(10.0)
    lim = report["limits"]
    limits = Limits(lim["lower"], lim["upper"], lim["velocity"], lim["acceleration"])
    conds = {}
    for name, trajectory in (
        ("designed", traj),
        ("random", random_multisine(limits, 10.0, 5, seed=3, margin=0.05)),
    ):
        rec = gen.generate(10.0, trajectory=trajectory, options=opts, seed=4)
        s = filtered_samples([_recording(rec)], 0.0, 5.0)
        conds[name] = idn.identify(gen.nominal, s.q, s.qd, s.qdd, s.tau).condition_number
    assert conds["designed"] < conds["random"], conds


def _recording(rec):
    from ros_lnn.arm.recording import ArmRecording

    return ArmRecording(
        "gen", rec.mapping.actuated_joints, rec.t, rec.q, rec.qd, rec.effort * np.asarray(rec.mapping.gains())
    )


def test_dwell_appends_stops_and_reversals_within_the_limits(tmp_path):
    out = tmp_path / "excite_dwell.yaml"
    argv = [
        "excite", "--urdf", str(URDF), "--joints", ",".join(JOINTS), "--duration", "8",
        "--samples", "40", "--max-seconds", "3", "--dwell", "12", "-o", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(out.with_name("excite_dwell.report.json").read_text())
    traj = read_joint_trajectory(out)
    assert traj.duration == pytest.approx(8.0 + report["dwell"]["seconds"], abs=1e-6)
    assert report["dwell"]["seconds"] >= 12.0
    urdf = _urdf_limits()
    lower = np.array([urdf[j]["lower"] for j in JOINTS])
    upper = np.array([urdf[j]["upper"] for j in JOINTS])
    t = np.linspace(0, traj.duration, 20001)
    q, qd, _ = traj.evaluate(t)
    assert np.all(q >= lower - 1e-6) and np.all(q <= upper + 1e-6)
    after = t > 8.0
    # at rest for a total of several seconds after the series, between moves
    still = np.all(np.abs(qd[after]) < 1e-5, axis=1)  # the file keeps 7 decimals of q̇, 6 of q̈
    assert still.mean() > 0.3
    # every joint reverses and steps come in several sizes (the smallest a few mrad, the largest tenths)
    assert all(r >= 2 for r in report["dwell"]["reversals_per_joint"])
    assert max(report["dwell"]["smallest_step_rad"]) < 0.05 < min(report["dwell"]["largest_step_rad"])
    # continuous where the series hands over to the program
    k = int(np.searchsorted(t, 8.0))
    assert np.abs(q[k + 1] - q[k - 1]).max() < 1e-2
