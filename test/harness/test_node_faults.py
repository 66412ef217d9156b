"""Fault injection (ros_lnn_lab/harness/faults.py): servo_lnn, sim and dac_controller each in their own
process, abused over DDS and through their lifecycle and parameter services; every case must leave the
process alive, its services answering within 1 s, every output finite, the case counted (or refused),
and normal output resuming. The long soak of the same cases is `ros-lnn bench fault`."""

from __future__ import annotations

import os
import random

import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from ros_lnn_lab.harness import fault_registry, faults

    CASES = [case for build in fault_registry.CASES.values() for case in build()]
else:
    CASES = []


@pytest.fixture(scope="module")
def driver():
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(101, 200))  # a domain of its own
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]
    # the cases come grouped by target: each node runs while its own cases do
    d = faults.Driver([build() for build in fault_registry.TARGETS.values()], env=env, one_at_a_time=True)
    yield d
    d.close()


def test_enough_cases_for_the_nodes():
    names = {(c.target, c.name) for c in CASES}
    assert len(names) == len(CASES)
    assert sum(c.target in ("servo_lnn", "sim") for c in CASES) >= 35
    # dac_controller: 45 cases, and its own 34 of faults_dac.py (with 10 of the 45, the 44 cases of
    # test/nodes/test_dac_node_faults.py, the in-process rig they were)
    assert sum(c.target == "dac_controller" for c in CASES) >= 45 + 34


def test_forged_metadata_is_what_the_runtime_reads(tmp_path):
    from ros_lnn.errors import ModelError
    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path, read_metadata

    path = tmp_path / "forged.onnx"
    faults._forge_metadata(default_model_path(), path, '{"family": 3}')
    with pytest.raises(ModelError, match="lacks free_joints"):
        read_metadata(path)
    shipped = default_model_path()
    faults._forge_metadata(shipped, path, read_metadata(shipped).to_json())
    assert ServoLnnRuntime(path).joints == ServoLnnRuntime(shipped).joints


@pytest.mark.parametrize("case", CASES, ids=[f"{c.target}: {c.name}" for c in CASES])
def test_fault_case(driver, case):
    verdict = driver.run(case)
    assert verdict.passed, (
        f"{case.target}: {case.name}: crashed={verdict.crashed} hung={verdict.hung} "
        f"non_finite={verdict.non_finite} "
        f"counted={verdict.counted} resumed={verdict.resumed} {verdict.detail}"
    )
