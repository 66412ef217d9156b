"""The arm_sim node over real DDS against the library object built from the same parameters
(ros_lnn.arm.simulation.SimulatedArm): in lockstep, each effort command moves the published arm exactly
as the library moves it under the same commands, with the one-period command delay."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from _ros_harness import Harness
    from ros_lnn.nodes.arm_sim.node import ArmSim, simulated_arm

Q0 = [0.1, -0.3, 0.2, -1.8, 0.1, 1.6, 0.4]
PARAMS = {
    "lockstep": True,
    "lockstep_timeout_s": 100.0,  # no idle step between the test's commands
    "noise_q": 0.0,
    "noise_qd": 0.0,
    "noise_tau": 0.0,
    "initial_positions": Q0,
    "rate_hz": 500.0,
}


def test_lockstep_states_equal_the_library_arm_under_the_same_commands(ctx):
    # the idle state comes once, at the node's first timer tick: the probe is matched before it spins
    h = Harness(context=ctx)
    try:
        states = h.collect(JointState, "/as/joint_states", QoSProfile(depth=1000))
        node = ArmSim(
            "arm_sim",
            namespace="/as",
            context=ctx,
            parameter_overrides=[Parameter(k, value=v) for k, v in PARAMS.items()],
        )
        h.wait(lambda: node.pub.get_subscription_count() >= 1, 30, "the probe matched on joint_states")
        h.add(node)
        pub = h.publisher(Float64MultiArray, "/as/effort_commands", 10)
        h.wait(lambda: len(states) >= 1, 30, "the first (idle) state")
        with h.lock:
            first = len(states)
            held = np.array(states[-1].position)
        np.testing.assert_allclose(held, Q0)  # brakes on until the first command
        from ros_lnn.nodes.arm_sim.parameters import PARAMETERS

        library = simulated_arm({p.name: p.default for p in PARAMETERS} | PARAMS)
        rng = np.random.default_rng(0)
        commands = rng.normal(size=(40, 7)) * np.array([10, 20, 10, 10, 1, 1, 0.3]) + np.array(
            [0, -20, 0, 15, 0, 2, 0]
        )
        for k, u in enumerate(commands):
            pub.publish(Float64MultiArray(data=u.tolist()))
            h.wait(lambda k=k: len(states) >= first + k + 1, 30, f"the state after command {k}")
            library.step(u, 1 / 500.0)
            with h.lock:
                got = states[first + k]
            np.testing.assert_allclose(got.position, library.q, atol=1e-12)
            np.testing.assert_allclose(got.velocity, library.qd, atol=1e-10)
            np.testing.assert_allclose(got.effort, commands[k - 1] if k else np.zeros(7))  # one period late
        assert list(got.name) == [f"panda_joint{i}" for i in range(1, 8)]
        assert np.abs(library.q - np.array(Q0)).max() > 1e-3  # the arm moved
    finally:
        h.close()


def test_the_true_arm_differs_from_the_urdf_and_bad_parameters_are_one_line(ctx):
    from ros_lnn.arm import simulation as sim
    from ros_lnn.nodes.arm_sim.parameters import PARAMETERS

    values = {p.name: p.default for p in PARAMETERS}
    arm, truth, friction, _ = sim.panda_generator()
    built = simulated_arm(values)
    np.testing.assert_allclose(built.plant.truth.body_parameters(), truth.body_parameters())
    assert not np.allclose(built.plant.truth.body_parameters(), arm.body_parameters())
    np.testing.assert_allclose(built.plant.friction.coulomb, friction.coulomb)
    with pytest.raises(Exception, match="initial_positions needs 7 values") as err:
        simulated_arm(values | {"initial_positions": [0.0, 1.0]})
    assert "\n" not in str(err.value)
    with pytest.raises(Exception, match="give the actuated joints"):
        simulated_arm(values | {"robot_description": sim.panda_urdf().read_text()})
