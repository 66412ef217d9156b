"""Physically consistent identification (ros_lnn.arm.consistency): the log-Cholesky map against the
textbook conditions on mass and principal moments, and train_arm with ``physically_consistent: true``
on a generated recording."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import consistency as cs
from ros_lnn.arm import identification as idn
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, write_recording
from ros_lnn.arm.mapping import ArmMapping
from ros_lnn.arm.model import read_arm_metadata
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.arm.samples import filtered_samples
from ros_lnn.arm.training import train_arm
from ros_lnn.errors import ConfigError
from ros_lnn.physics.inertial_parameters import consistent, from_pseudo_inertia, pseudo_inertia

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def textbook_consistent(pi) -> bool:
    """Positive mass and principal moments about the centre of mass that are positive and satisfy
    the triangle inequality (written out, not through the pseudo-inertia)."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = pi
    if m <= 0:
        return False
    c = np.array([hx, hy, hz]) / m
    inertia_o = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    inertia_c = inertia_o - m * (c @ c * np.eye(3) - np.outer(c, c))  # parallel axis theorem
    p = np.linalg.eigvalsh(inertia_c)
    return bool(p[0] > 0 and p[0] + p[1] > p[2] * (1 + 1e-9))


def test_every_theta_is_a_real_body_and_the_map_inverts():
    rng = np.random.default_rng(1)
    for _ in range(50):
        theta = rng.normal(scale=1.5, size=10)
        pi = cs.parameters_from_theta(theta)
        assert textbook_consistent(pi) and consistent(pi)
        np.testing.assert_allclose(cs.theta_from_parameters(pi), theta, atol=1e-6)
        np.testing.assert_allclose(from_pseudo_inertia(pseudo_inertia(pi)), pi, atol=1e-12)


def test_impossible_bodies_are_told_apart():
    rod = np.array([2.0, 0.0, 0.0, 0.2, 0.1, 0.0, 0.1, 0.0, 0.0, 0.001])  # consistent
    assert textbook_consistent(rod) and consistent(rod)
    negative_mass = rod * np.array([-1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    too_thin = rod.copy()
    too_thin[9] = 0.3  # Izz about the centre of mass above Ixx + Iyy there: no mass distribution
    for body in (negative_mass, too_thin):
        assert not textbook_consistent(body) and not consistent(body)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    folder = tmp_path_factory.mktemp("consistent")
    gen = ArmGenerator(URDF, JOINTS, seed=3)
    opts = GeneratorOptions(rate_hz=250.0, effort="joint_states")
    logs = [gen.generate(d, options=opts, seed=s) for d, s in ((10.0, 21), (5.0, 22))]
    mapping = replace(logs[0].mapping, physically_consistent=True)
    recs = [read_arm_bag(write_recording(folder / f"log{k}", g), mapping) for k, g in enumerate(logs)]
    return recs, mapping


def test_train_arm_physically_consistent_bodies_and_an_error_like_the_free_fit(tmp_path, recordings):
    (train, test), mapping = recordings
    log: list[str] = []
    out = tmp_path / "arm.onnx"
    result = train_arm(
        [train], URDF, mapping, out=out, residual="off", ripple="off", fast_torque="off",
        friction_memory="off", progress=log.append,
    )  # fmt: skip
    pi = np.asarray(read_arm_metadata(out)["pi"])
    assert all(textbook_consistent(pi[10 * b : 10 * b + 10]) for b in range(len(JOINTS)))
    assert all(result.fit.report["physically_consistent"].values())
    assert any(line.startswith("physically consistent refit") for line in log)
    free = train_arm(
        [train], URDF, replace(mapping, physically_consistent=False), residual="off", ripple="off",
        friction_memory="off",
    )  # fmt: skip
    s = filtered_samples([test], mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=True)
    arm = idn.ArmRigidBody.from_urdf(URDF, JOINTS)
    err = idn.relative_error_percent(s.tau, idn.predict(arm, result.fit, s.q, s.qd, s.qdd)).mean()
    err_free = idn.relative_error_percent(s.tau, idn.predict(arm, free.fit, s.q, s.qd, s.qdd)).mean()
    assert err < 1.1 * err_free, (err, err_free)


def test_physically_consistent_must_be_a_boolean():
    with pytest.raises(ConfigError, match="physically_consistent"):
        ArmMapping(actuated_joints=tuple(JOINTS), physically_consistent="yes")
