"""``ros-lnn identify-payload`` on the generator: a model trained without the payload, a recording with
an unknown payload and a reference recording of the same trajectory without it → the payload's mass
within 2 % and centre of mass within 5 mm of the truth; the new model differs only in its metadata."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, Payload, write_recording
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.cli import main

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
# a 2.2 kg box of 8 × 6 × 12 cm, its centre 3 cm off the flange axis and 9 cm out
BOX = (2.2, np.array([0.03, -0.015, 0.09]), (0.08, 0.06, 0.12))


def _box_inertia(mass, size):
    a, b, c = size
    return mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from ros_lnn.arm.training import train_arm

    d = tmp_path_factory.mktemp("payload")
    gen = ArmGenerator(URDF, JOINTS, seed=31)
    opts = GeneratorOptions(rate_hz=200.0)
    train = gen.generate(20.0, options=opts, seed=32)
    write_recording(d / "train", train)
    mass, com, size = BOX
    payload = Payload(mass, com, _box_inertia(mass, size))
    traj = gen.trajectory(10.0, seed=33)
    write_recording(
        d / "payload", gen.generate(10.0, trajectory=traj, options=opts, seed=34, payload=payload)
    )
    write_recording(d / "reference", gen.generate(10.0, trajectory=traj, options=opts, seed=35))
    train_arm(
        [read_arm_bag(d / "train", train.mapping)], URDF, train.mapping, out=d / "arm.onnx", residual="off"
    )
    return d, gen, payload


@requires_torch
def test_payload_mass_and_centre_of_mass(setup, capsys):
    import onnx

    from ros_lnn.arm.model import ArmModel

    d, gen, payload = setup
    argv = [
        "identify-payload", "--model", str(d / "arm.onnx"), "--bag", str(d / "payload"),
        "--reference-bag", str(d / "reference"), "--out", str(d / "arm_payload.onnx"),
        "--json", str(d / "p.json"),
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "payload on panda_joint7: mass" in out
    report = json.loads((d / "p.json").read_text())
    assert abs(report["mass_kg"] / payload.mass - 1) < 0.02, report["mass_kg"]
    assert np.linalg.norm(np.array(report["com_m"]) - payload.com) < 0.005, report["com_m"]
    assert np.mean(report["torque_rre_percent_after"]) < np.mean(report["torque_rre_percent_before"])
    # the new model: the old one's graph, its last link carrying the payload's parameters
    old, new = onnx.load(str(d / "arm.onnx")), onnx.load(str(d / "arm_payload.onnx"))
    assert old.graph.SerializeToString() == new.graph.SerializeToString()
    m0, m1 = ArmModel(d / "arm.onnx"), ArmModel(d / "arm_payload.onnx")
    added = m1.rigid.body_parameters() - m0.rigid.body_parameters()
    assert np.allclose(added[:60], 0) and np.allclose(added[60:], report["parameters"])
    assert m1.meta["payloads"][0]["mass_kg"] == report["mass_kg"]
    # the new model predicts the loaded arm's gravity torques far better than the old one
    rng = np.random.default_rng(0)
    q = rng.uniform(gen.limits.lower, gen.limits.upper, size=(50, 7))
    zero = np.zeros_like(q)
    true_load = gen.torque(q, zero, zero, payload) - gen.torque(q, zero, zero)
    err_new = m1.inverse_dynamics(q, zero, zero) - m0.inverse_dynamics(q, zero, zero) - true_load
    assert np.linalg.norm(err_new) < 0.05 * np.linalg.norm(true_load)


@requires_torch
def test_without_reference_runs_and_says_what_it_assumes(setup, capsys):
    d, _, _ = setup
    argv = ["identify-payload", "--model", str(d / "arm.onnx"), "--bag", str(d / "payload"), "--point-mass"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "no --reference-bag" in out and "point mass" in out


@requires_torch
def test_errors_are_one_line(setup, capsys):
    d, _, _ = setup
    model = str(d / "arm.onnx")
    assert main(["identify-payload", "--model", model, "--bag", str(d / "payload"), "--out", model]) == 2
    assert "--out is the input model" in capsys.readouterr().err
    assert main(["identify-payload", "--model", str(d / "nothing.onnx"), "--bag", str(d / "payload")]) == 2
    err = capsys.readouterr().err
    assert "no such model file" in err and err.count("\n") == 1


def test_deployment_commands_do_not_import_torch(tmp_path):
    """convert, excite and identify-payload (its imports) run without torch."""
    csv = tmp_path / "log.csv"
    csv.write_text("t,p\n" + "".join(f"{0.01 * i},{np.sin(0.1 * i)}\n" for i in range(100)))
    script = f"""
import sys
from ros_lnn.cli import main
assert main(["convert", {str(csv)!r}, "--columns", "time=t,q.j=p", "-o", {str(tmp_path / "bag")!r}]) == 0
assert main(["excite", "--urdf", {str(URDF)!r}, "--joints", "panda_joint1,panda_joint2", "--duration", "5",
             "--samples", "30", "--max-seconds", "1", "-o", {str(tmp_path / "e.yaml")!r}]) == 0
import ros_lnn.commands.identify_payload, ros_lnn.arm.payload, ros_lnn.arm.model
assert "torch" not in sys.modules, "torch was imported"
"""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
