"""dac_controller with an arm model (``ros-lnn train --urdf``'s ONNX file) over real DDS: its efforts equal
the library pipeline built from the same model and parameters (feed-forward + PD along a trajectory, the
compensated term at the desired state) and the model's own gravity and friction (gravity compensation);
the port carries the same command; a model whose friction is not finite zeros the command and is
counted; joints other than the model's are refused in one line; the joint gains are live."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from _arm_model import PANDA_JOINTS, train_panda_model

from conftest import HAVE_RCLPY, requires_rclpy, requires_torch

pytestmark = [requires_rclpy, requires_torch, pytest.mark.ros]

if HAVE_RCLPY:
    from builtin_interfaces.msg import Duration
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from _ros_harness import Harness
    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp

_ns = itertools.count()
KP = [200.0, 200.0, 200.0, 200.0, 30.0, 30.0, 10.0]
KD = [2.5, 20.0, 2.5, 6.0, 0.4, 0.4, 0.1]
BASE = {"robot_description_timeout_s": 0.0, "state_timeout_s": 1000.0, "joint_kp": KP, "joint_kd": KD}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return train_panda_model(tmp_path_factory.mktemp("arm"))


@pytest.fixture
def make(ctx):
    made = []

    def _make(params):
        ns = f"/arm{next(_ns)}"
        overrides = [Parameter(k, value=v) for k, v in (BASE | params).items()]
        node = DacControllerNode(namespace=ns, context=ctx, parameter_overrides=overrides)
        ok = start(node)
        h = Harness(node, context=ctx)
        made.append(h)
        return node, h, ns, ok

    yield _make
    for h in made:
        h.close()


def _library(model_path, law, kp=KP, kd=KD):
    from ros_lnn.arm.compensation import ArmCompensation, certain_model
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.control.pipeline import DacPipeline

    model = ArmModel(model_path)
    return DacPipeline(
        certain_model(model), law=law, joint_kp=kp, joint_kd=kd, compensation=ArmCompensation(model)
    )


def _drive(h, node, ns, states, stamps):
    """Publish each joint state, wait for its commands; (efforts, ports), one row per state."""
    efforts = h.collect(
        Float64MultiArray, f"{ns}/dac_controller/joint_effort_command", QoSProfile(depth=1000)
    )
    ports = h.collect(Float64MultiArray, f"{ns}/dac_controller/port_command", QoSProfile(depth=1000))
    pub = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    for k, ((q, qd), stamp) in enumerate(zip(states, stamps)):
        msg = JointState(name=list(PANDA_JOINTS), position=q.tolist(), velocity=qd.tolist())
        msg.header.stamp = ns_to_stamp(stamp)
        pub.publish(msg)
        h.wait(lambda k=k: len(efforts) > k and len(ports) > k, 60, f"the commands of state {k}")
    with h.lock:
        return np.array([m.data for m in efforts]), np.array([m.data for m in ports])


def test_feedforward_pd_over_dds_equals_the_library_pipeline(make, model_path):
    from ros_lnn.arm.simulation import panda_generator
    from ros_lnn.arm.tracking import exciting_program
    from ros_lnn.physics.multibody.pin import kinematics

    node, h, ns, ok = make({"model_path": str(model_path), "law": "feedforward_pd"})
    assert ok, node.last_error
    assert node.pipeline.joint_names == list(PANDA_JOINTS)
    program = exciting_program(panda_generator()[0], 2.0, spacing=0.05)
    t0 = node.get_clock().now().nanoseconds - 3_000_000_000  # the states lie in the past: none is ahead
    traj = JointTrajectory(joint_names=list(PANDA_JOINTS))
    traj.header.stamp = ns_to_stamp(t0)
    for t, q, qd, qdd in zip(program.times, program.q, program.qd, program.qdd):
        point = JointTrajectoryPoint(positions=q.tolist(), velocities=qd.tolist(), accelerations=qdd.tolist())
        point.time_from_start = Duration(sec=int(t), nanosec=int(round((t - int(t)) * 1e9)))
        traj.points.append(point)
    h.publisher(JointTrajectory, f"{ns}/dac_controller/joint_trajectory", COMMAND_QOS).publish(traj)
    h.wait(lambda: node.pipeline.needs_clock, 30, "the trajectory")
    library = _library(model_path, "feedforward_pd")
    library.set_joint_trajectory(t0 * 1e-9 + program.times, program.q, program.qd, program.qdd)
    rng = np.random.default_rng(7)
    stamps = [t0 + int(k * 0.037e9) for k in range(50)]
    states = []
    for s in stamps:
        q_d = library._trajectory(s * 1e-9)[0]
        states.append((q_d + rng.normal(0, 0.01, 7), rng.normal(0, 0.3, 7)))
    efforts, ports = _drive(h, node, ns, states, stamps)
    for (q, qd), s, effort, port in zip(states, stamps, efforts, ports):
        out = library.step(q, qd, s * 1e-9)
        np.testing.assert_allclose(effort, out.efforts.effort, atol=1e-9)
        G = kinematics(library.pinocchio, q, qd).G
        np.testing.assert_allclose(G.T.dot(port), out.efforts.requested, atol=1e-8)  # Gᵀ port = u
    assert np.abs(efforts).max() > 10 and node.counts["processed"] == len(states)


def test_gravity_compensation_is_the_models_gravity_and_friction(make, model_path):
    from ros_lnn.arm.model import ArmModel

    node, h, ns, ok = make({"model_path": str(model_path), "law": "gravity_compensation", "joint_kd": [0.5]})
    assert ok, node.last_error
    model = ArmModel(model_path)
    rng = np.random.default_rng(8)
    states = [
        (np.array([0, 0.3, 0, -1.8, 0, 1.9, 0.4]) + rng.normal(0, 0.2, 7), rng.normal(0, 0.4, 7))
        for _ in range(8)
    ]
    now = node.get_clock().now().nanoseconds
    efforts, _ = _drive(h, node, ns, states, [now - 10_000_000] * 8)
    memory = None  # the model stepped state by state, as the node steps its friction memory
    for (q, qd), effort in zip(states, efforts):
        friction, memory = model.step_non_rigid(q, qd, memory)
        expected = model.gravity_torque(q) + friction - 0.5 * qd
        np.testing.assert_allclose(effort, expected, atol=1e-9)
    # live damping: from the next state on
    node.set_parameters([Parameter("joint_kd", value=[0.0])])
    more, _ = _drive(h, node, ns, states[:1], [now])
    q, qd = states[0]
    np.testing.assert_allclose(
        more[-1], model.gravity_torque(q) + model.step_non_rigid(q, qd, memory)[0], atol=1e-9
    )


def test_a_model_with_non_finite_friction_zeros_the_command(make, model_path, tmp_path):
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(model_path))
    for k, tensor in enumerate(proto.graph.initializer):  # every weight of the graph: friction, residual
        values = numpy_helper.to_array(tensor)
        if values.dtype.kind == "f":
            proto.graph.initializer[k].CopyFrom(
                numpy_helper.from_array(np.full_like(values, np.nan), tensor.name)
            )
    bad = tmp_path / "nan_friction.onnx"
    onnx.save(proto, str(bad))
    node, h, ns, ok = make({"model_path": str(bad), "law": "gravity_compensation"})
    assert ok, node.last_error
    now = node.get_clock().now().nanoseconds
    states = [(np.array([0, 0.3, 0, -1.8, 0, 1.9, 0.4]), np.full(7, 0.1))] * 3
    efforts, ports = _drive(h, node, ns, states, [now] * 3)
    assert not efforts.any() and not ports.any()
    assert node.counts["model_non_finite"] == 3 and node._model_fault_logged
    time.sleep(0.01)


def test_joints_other_than_the_models_are_refused_in_one_line(make, model_path):
    reversed_names = list(reversed(PANDA_JOINTS))
    node, _, _, ok = make({"model_path": str(model_path), "joint_names": reversed_names})
    assert not ok
    assert "differ from the joints of the arm model panda.onnx" in node.last_error
    assert "\n" not in node.last_error
