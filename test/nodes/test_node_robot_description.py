"""robot_description only on the topic, as robot_state_publisher publishes it (std_msgs/String, reliable,
transient local), for dac_controller and effort_observer with an arm model over real DDS: published before
the node starts, and after (configure waits for it); the node takes the topic's description (its joint
limits, its URDF for the wrench) rather than the model's; a description that does not match the model is
refused in one line; with neither, the model's own URDF."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from _arm_model import PANDA_URDF, train_panda_model

from conftest import HAVE_RCLPY, requires_rclpy, requires_torch

pytestmark = [requires_rclpy, requires_torch, pytest.mark.ros]

if HAVE_RCLPY:
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from _ros_harness import Harness
    from ros_lnn.nodes.dac_controller import node as dac_controller
    from ros_lnn.nodes.effort_observer import node as effort_observer
    from ros_lnn.nodes.robot_description import description_qos

_ns = itertools.count()
#: the robot's description: the model's URDF with a narrower range on joint 1 (what a site's URDF may
#: say), so that which of the two a node took shows in its joint limits
ROBOT = PANDA_URDF.read_text().replace('lower="-2.8973" upper="2.8973"', 'lower="-2.0" upper="2.0"', 1)
#: joint 4 placed a centimetre higher: another robot for this model
MOVED = PANDA_URDF.read_text().replace('xyz="0.0825 0 0"', 'xyz="0.0825 0 0.01"', 1)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return train_panda_model(tmp_path_factory.mktemp("arm"))


def make_node(kind: str, ctx, ns: str, model, **params):
    base = {"model_path": str(model), "robot_description_timeout_s": 60.0} | params
    overrides = [Parameter(k, value=v) for k, v in base.items()]
    if kind == "dac_controller":
        overrides.append(Parameter("law", value="feedforward_pd"))
        return dac_controller.DacControllerNode(
            namespace=ns, context=ctx, parameter_overrides=overrides
        ), dac_controller.start
    overrides.append(Parameter("wrench_frame", value="panda_hand_tcp"))
    return effort_observer.EffortObserverNode(
        namespace=ns, context=ctx, parameter_overrides=overrides
    ), effort_observer.start


def taken(kind: str, node) -> str:
    """The description the configured node runs on, as far as it shows: joint 1's lower limit
    (dac_controller) or the URDF of the wrench's kinematics (effort_observer)."""
    if kind == "dac_controller":
        return "robot" if node.pipeline.joint_limits.limits.lower[0] == -2.0 else "model"
    return "robot" if node.wrench.arm.urdf_text == ROBOT else "model"


@pytest.mark.parametrize("kind", ["dac_controller", "effort_observer"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_the_description_on_the_topic_is_taken_before_and_after_the_node_starts(ctx, model_path, kind, when):
    ns = f"/rd{next(_ns)}"
    h = Harness(context=ctx)  # the probe stands in for robot_state_publisher
    try:
        pub = h.probe.create_publisher(String, f"{ns}/robot_description", description_qos())
        if when == "before":
            pub.publish(String(data=ROBOT))
            time.sleep(0.2)
        node, start = make_node(kind, ctx, ns, model_path)
        result: list = []
        # the node process's autostart: configure before any executor spins the node
        thread = threading.Thread(target=lambda: result.append(start(node)))
        thread.start()
        if when == "after":
            time.sleep(1.0)
            assert thread.is_alive()  # configure waits for the description
            pub.publish(String(data=ROBOT))
        thread.join(120)
        assert result == [True], node.last_error
        assert taken(kind, node) == "robot"
        if kind == "dac_controller":
            assert f"topic {ns}/robot_description" in node.described
        node.destroy_node()
    finally:
        h.close()


@pytest.mark.parametrize("kind", ["dac_controller", "effort_observer"])
def test_a_description_that_does_not_match_the_model_is_refused_in_one_line(ctx, model_path, kind):
    for text, said in (
        (MOVED, "(kinematics)"),
        (ROBOT.replace("panda_joint7", "wrist_3"), "has no joint(s)"),
    ):
        ns = f"/rd{next(_ns)}"
        h = Harness(context=ctx)
        try:
            pub = h.probe.create_publisher(String, f"{ns}/robot_description", description_qos())
            pub.publish(String(data=text))
            node, start = make_node(kind, ctx, ns, model_path)
            assert not start(node)
            error = node.last_error
            assert error.startswith(
                f"robot_description (topic {ns}/robot_description) does not match the arm model panda.onnx"
            ), error
            assert said in error and "\n" not in error
            node.destroy_node()
        finally:
            h.close()
    # the parameter is checked the same way
    node, start = make_node(kind, ctx, f"/rd{next(_ns)}", model_path, robot_description=MOVED)
    assert (
        not start(node)
        and "robot_description (parameter robot_description) does not match" in node.last_error
    )
    node.destroy_node()


@pytest.mark.parametrize("kind", ["dac_controller", "effort_observer"])
def test_without_a_description_the_models_urdf(ctx, model_path, kind):
    node, start = make_node(kind, ctx, f"/rd{next(_ns)}", model_path, robot_description_timeout_s=0.3)
    assert start(node), node.last_error
    assert taken(kind, node) == "model"
    node.destroy_node()


def test_the_deprecated_urdf_parameter_still_reads_a_file(ctx, model_path, tmp_path):
    path = tmp_path / "robot.urdf"
    path.write_text(ROBOT)
    node, start = make_node("effort_observer", ctx, f"/rd{next(_ns)}", model_path, urdf=str(path))
    assert start(node), node.last_error
    assert taken("effort_observer", node) == "robot"
    node.destroy_node()
