"""The dac_controller lifecycle node over real DDS: outputs equal the library evaluated directly,
lifecycle transitions, stale inputs, bad inputs, effort limits."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import HAVE_RCLPY, requires_rclpy
from ros_lnn.control.dac import Gains
from ros_lnn.control.pipeline import DacPipeline
from ros_lnn.physics.multibody.build import load_model

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from builtin_interfaces.msg import Duration
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from geometry_msgs.msg import PoseStamped
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from visualization_msgs.msg import MarkerArray

    from _ros_harness import Harness
    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.serialized import SerializedTemplate
    from ros_lnn.nodes.stamps import ns_to_stamp


URDF = Path(__file__).resolve().parents[2] / "config" / "dac_chain.urdf"
JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]
Q0 = np.array([0.1, -0.7, 1.3, 0.5, 0.3])
QD0 = np.array([0.2, -0.1, 0.3, 0.0, -0.2])
_ns = itertools.count()


#: For tests whose commands answer one published state: with the default 0.1 s state timeout the
#: watchdog's zero commands follow a loaded runner's late look at the answer, and the newest effort
#: read is a zero (reproduced with a 0.3 s pause before each state); the watchdog has its own test.
SLOW_WATCHDOG = {"state_timeout_s": 60.0}


@pytest.fixture
def make(ctx):
    made = []

    def _make(params=None, autostart=True):
        ns = f"/dac{next(_ns)}"
        overrides = [Parameter("robot_description", value=URDF.read_text())]
        overrides += [Parameter(k, value=v) for k, v in (params or {}).items()]
        node = DacControllerNode(namespace=ns, context=ctx, parameter_overrides=overrides)
        if autostart:
            assert start(node), node.last_error
        h = Harness(node, context=ctx)
        made.append(h)
        return node, h, ns

    yield _make
    for h in made:
        h.close()


def _joint_state(names, q, qd):
    msg = JointState()
    msg.name, msg.position, msg.velocity = list(names), [float(x) for x in q], [float(x) for x in qd]
    return msg


def _library(**kw):
    model = load_model(URDF)
    limits = [j.effort_limit for j in model.joints]
    # the node's documented defaults, by keyword
    gains = Gains(
        kd_linear=20.0,
        kd_angular=20.0,
        mass_weighted=True,
        lambda_position=5.0,
        lambda_attitude=5.0,
        obstacle_gain=1.0,
        damping=0.05,
    )
    args = dict(gains=gains, ee_link="tool0", effort_limits=limits)
    args.update(kw)
    return DacPipeline(model, **args)


def _io(h, ns):
    ports = h.collect(Float64MultiArray, f"{ns}/dac_controller/port_command", SENSOR_QOS)
    efforts = h.collect(Float64MultiArray, f"{ns}/dac_controller/joint_effort_command", SENSOR_QOS)
    states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    return ports, efforts, states


def test_outputs_equal_the_library_for_an_end_effector_target(make):
    node, h, ns = make()
    ports, efforts, states = _io(h, ns)
    target = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
    goal = PoseStamped()
    goal.header.frame_id = "world"
    goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.45, 0.1, 0.15
    target.publish(goal)
    h.wait(lambda: node.pipeline.has_target, what="ee_target taken")
    shuffled = [JOINTS[i] for i in (3, 0, 4, 1, 2)]  # joints are matched by name
    perm = [JOINTS.index(j) for j in shuffled]
    states.publish(_joint_state(shuffled, Q0[perm], QD0[perm]))
    h.wait(lambda: ports and efforts, what="port and effort commands")
    lib = _library()
    lib.set_ee_target([0.45, 0.1, 0.15])
    expected = lib.step(Q0, QD0)
    port, effort = ports[-1], efforts[-1]
    assert np.allclose(port.data, expected.result.tau_c, atol=1e-12)
    assert np.allclose(effort.data, expected.efforts.effort, atol=1e-12)
    assert [d.label for d in port.layout.dim] == ["f,m", "link1,link2,link3,link4,link5", "x,y,z"]
    assert [d.size for d in port.layout.dim] == [2, 5, 3]
    assert effort.layout.dim[0].label == ",".join(JOINTS)
    assert np.abs(effort.data).max() > 0.1  # it pushes toward the target


def test_joint_states_split_over_two_publishers_are_merged_by_name(make):
    """An arm's joints from one publisher and the wrist's (with a gripper joint) from another, stamped
    within joint_state_merge_window_s: the commands equal the library's on the whole state; a gripper-only
    message changes nothing and is no rejection."""
    node, h, ns = make(SLOW_WATCHDOG)
    ports, efforts, states = _io(h, ns)
    wrist = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    target = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
    goal = PoseStamped()
    goal.header.frame_id = "world"
    goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.45, 0.1, 0.15
    target.publish(goal)
    h.wait(lambda: node.pipeline.has_target, what="ee_target taken")
    h.wait(lambda: wrist.get_subscription_count() >= 1, what="the second publisher matched")
    stamp = node.get_clock().now().nanoseconds
    arm = _joint_state(JOINTS[:3], Q0[:3], QD0[:3])
    rest = _joint_state(JOINTS[3:] + ["gripper"], list(Q0[3:]) + [0.02], list(QD0[3:]) + [0.0])
    gripper = _joint_state(["gripper"], [0.02], [0.0])
    arm.header.stamp, rest.header.stamp = ns_to_stamp(stamp), ns_to_stamp(stamp + 500_000)
    gripper.header.stamp = ns_to_stamp(stamp)
    wrist.publish(gripper)
    h.wait(lambda: node.counts["other_joints"] >= 1, what="the gripper-only message")
    states.publish(arm)
    h.wait(lambda: node.counts["partial"] >= 1, what="the arm's part held")
    assert not efforts
    wrist.publish(rest)
    h.wait(lambda: ports and efforts, what="commands from the merged state")
    lib = _library()
    lib.set_ee_target([0.45, 0.1, 0.15])
    expected = lib.step(Q0, QD0)
    assert np.allclose(efforts[-1].data, expected.efforts.effort, atol=1e-12)
    assert np.allclose(ports[-1].data, expected.result.tau_c, atol=1e-12)
    assert node.counts["bad_joint_state"] == 0 and node.counts["missing_joint"] == 0


def test_markers_and_diagnostics(make):
    _node, h, ns = make({"diagnostics_period_s": 0.1, "obstacles": [0.3, 0.0, 0.4, 0.05]})
    markers = h.collect(MarkerArray, f"{ns}/dac_controller/markers", COMMAND_QOS)
    diags = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    _, efforts, states = _io(h, ns)
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: markers and efforts, what="markers")
    kinds = {m.ns for m in markers[-1].markers}
    assert {"body_force", "end_effector", "target", "obstacle"} <= kinds
    h.wait(
        lambda: any(
            s.name.endswith("dac_controller") and s.hardware_id == "dac_chain"
            for d in diags
            for s in d.status
        ),
        what="diagnostics",
    )


def test_hold_policy_without_a_target_and_trajectory_for_law_II(make):
    node, h, ns = make({"law": "pose", **SLOW_WATCHDOG})
    _, efforts, states = _io(h, ns)
    # no target: hold the configuration of the first joint state (at rest there: only gravity is held)
    states.publish(_joint_state(JOINTS, Q0, np.zeros(5)))
    h.wait(lambda: efforts, what="effort")
    lib = _library(law="pose")
    assert np.allclose(efforts[-1].data, lib.step(Q0, np.zeros(5)).efforts.effort, atol=1e-12)
    # a trajectory whose points all lie in the past: the node holds its last point
    traj_pub = h.publisher(JointTrajectory, f"{ns}/dac_controller/joint_trajectory", COMMAND_QOS)
    msg = JointTrajectory()
    msg.joint_names = JOINTS
    now = node.get_clock().now().nanoseconds
    msg.header.stamp = ns_to_stamp(now - 10_000_000_000)
    q_goal = Q0 + 0.2
    for k, t in enumerate((0.5, 1.0)):
        pt = JointTrajectoryPoint()
        pt.positions = [float(x) for x in (Q0 + 0.1 * (k + 1))]
        pt.time_from_start = Duration(sec=0, nanosec=int(t * 1e9))
        msg.points.append(pt)
    traj_pub.publish(msg)
    h.wait(lambda: node.pipeline._trajectory is not None, what="trajectory taken")
    n0 = len(efforts)
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: len(efforts) > n0, what="effort after trajectory")
    lib.set_joint_trajectory([0.0, 1.0], [Q0 + 0.1, q_goal])
    expected = lib.step(Q0, QD0, t=100.0)
    assert np.allclose(efforts[-1].data, expected.efforts.effort, atol=1e-10)


def test_stale_joint_states_give_zero_efforts(make):
    node, h, ns = make({"state_timeout_s": 0.05, "watchdog_period_s": 0.01, "diagnostics_period_s": 0.05})
    diags = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    _, efforts, states = _io(h, ns)
    live = lambda: sum(np.abs(e.data).max() > 0 for e in list(efforts))  # noqa: E731
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: live() >= 1, what="effort")
    h.wait(
        lambda: node.stale and np.all(np.asarray(efforts[-1].data) == 0.0), timeout=60.0, what="zero efforts"
    )
    h.wait(
        lambda: any(
            s.level == DiagnosticStatus.ERROR
            for d in diags
            for s in d.status
            if s.name.endswith("dac_controller")
        ),
        what="ERROR diagnostics",
    )
    before = live()
    states.publish(_joint_state(JOINTS, Q0, QD0))  # resumes (and goes stale again 50 ms later)
    h.wait(lambda: live() > before, what="resume")


def test_bad_inputs_are_rejected_and_efforts_clamped(make):
    node, h, ns = make({"effort_limits": [0.2, 0.2, 0.2, 0.2, 0.2]})
    ports, efforts, states = _io(h, ns)
    bad_vel = _joint_state(JOINTS, Q0, QD0)
    bad_vel.velocity = []
    bad = [_joint_state(JOINTS, [np.nan, 0, 0, 0, 0], QD0), bad_vel]
    for k, msg in enumerate(bad, 1):  # one at a time: the node's queue holds the newest state only
        states.publish(msg)
        h.wait(lambda k=k: node.counts["bad_joint_state"] >= k, what=f"rejection {k}")
    states.publish(_joint_state(JOINTS[:4], Q0[:4], QD0[:4]))  # a part: held for its partner, no effort
    h.wait(lambda: node.counts["partial"] >= 1, what="the part held")
    assert not efforts and not ports
    target = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
    wrong_frame = PoseStamped()
    wrong_frame.header.frame_id = "camera"
    target.publish(wrong_frame)
    nan_goal = PoseStamped()
    nan_goal.pose.position.x = float("nan")
    target.publish(nan_goal)
    h.wait(lambda: node.counts["bad_target"] >= 2, what="bad targets")
    far = PoseStamped()
    far.pose.position.x, far.pose.position.z = 0.2, 0.6
    target.publish(far)
    h.wait(lambda: node.pipeline.has_target, what="target")
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: efforts, what="effort")
    e = np.asarray(efforts[-1].data)
    assert np.all(np.isfinite(e)) and np.all(np.isfinite(ports[-1].data))
    assert np.abs(e).max() <= 0.2 + 1e-15 and np.any(np.abs(e) == 0.2)
    assert node.diagnostics_values()["saturation_ratio"] > 1


def test_lifecycle_transitions(make, ctx):
    node, h, ns = make()
    _, efforts, states = _io(h, ns)
    h.call(node.trigger_deactivate)
    states.publish(_joint_state(JOINTS, Q0, QD0))
    time.sleep(0.3)
    assert not efforts and node.counts["processed"] == 0
    h.call(node.trigger_activate)
    h.wait(lambda: states.get_subscription_count() >= 1, what="resubscribed")
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: efforts, what="effort after reactivation")
    h.call(node.trigger_deactivate)
    h.call(node.trigger_cleanup)
    assert node.pipeline is None
    bad, hb, _ = make({"robot_description": "<robot name='x'><link name='a'"}, autostart=False)
    hb.call(bad.trigger_configure)
    assert bad.pipeline is None and "not valid URDF" in bad.last_error
    bad2, hb2, _ = make({"law": "jedi"}, autostart=False)
    hb2.call(bad2.trigger_configure)
    assert bad2.pipeline is None and "law" in bad2.last_error


def test_closed_loop_over_topics_with_the_chain_simulator(ctx):
    """dac_chain_sim (joint efforts in, joint_states out) + dac_controller: the tool reaches the target."""
    from ros_lnn.control.dac import end_effector_state
    from ros_lnn.nodes.dac_chain_sim.node import DacChainSim

    ns = f"/loop{next(_ns)}"
    urdf = URDF.read_text()
    q_init = [0.0, -0.8, 1.4, 0.6, 0.4]
    sim = DacChainSim(
        namespace=ns,
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=urdf),
            Parameter("initial_positions", value=q_init),
            Parameter("rate_hz", value=250.0),
            Parameter("lockstep", value=True),  # the loop measured is the same on a loaded machine
        ],
        cli_args=["--ros-args", "-r", f"effort_commands:={ns}/dac_controller/joint_effort_command"],
    )
    ctl = DacControllerNode(
        namespace=ns,
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=urdf),
            Parameter("lambda_position", value=3.0),
            Parameter("use_sim_time", value=True),  # the lockstep simulator's /clock
        ],
    )
    assert start(ctl), ctl.last_error
    h = Harness(sim, ctl, context=ctx)
    try:
        states = h.collect(JointState, f"{ns}/joint_states", SENSOR_QOS)
        h.wait(lambda: len(states) > 5, what="joint states from the simulator")
        goal = np.array([0.45, 0.1, 0.05])
        target = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
        msg = PoseStamped()
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = goal
        target.publish(msg)
        lib = _library()

        def error():
            with h.lock:
                last = states[-1]
            q = np.array(last.position)
            data = lib.kinematics(q, np.zeros(5))
            return np.linalg.norm(end_effector_state(lib.model, data, lib.controller.end_effector)[0] - goal)

        start_error = error()
        h.wait(lambda: error() < 0.01 * start_error, timeout=60.0, what="end effector at the target")
        assert ctl.counts["processed"] > 50 and not ctl.stale
    finally:
        h.close()


def test_the_simulator_keeps_real_time_and_holds_until_the_first_command(ctx):
    """dac_chain_sim driven tick by tick: a late tick takes the steps it missed (stamps k·dt apart, one
    state each); a tick further behind than MAX_CATCH_UP takes that many and the simulated time falls
    behind the clock (the stamps stay the physics'); more than MAX_LAG_S behind, the stamps jump to the
    clock, by at least that. hold_until_command keeps the arm where it starts through zero efforts (a
    watchdog's) until a command that is not all zeros arrives."""
    from ros_lnn.nodes.clocks import MAX_CATCH_UP, MAX_LAG_S
    from ros_lnn.nodes.dac_chain_sim.node import DacChainSim
    from ros_lnn.nodes.stamps import stamp_ns

    ns = f"/rt{next(_ns)}"
    q_init = [0.0, -0.8, 1.4, 0.6, 0.4]
    sim = DacChainSim(
        namespace=ns,
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("initial_positions", value=q_init),
            Parameter("rate_hz", value=500.0),
            Parameter("hold_until_command", value=True),
        ],
    )
    sent = []
    sim.pub.publish = sent.append  # the states each tick would publish, in order
    try:
        sim._step()
        assert sim.steps == len(sent) == 1
        time.sleep(0.0105)  # five periods and a bit: the next tick catches up with the clock
        sim._step()
        clock = sim.get_clock().now().nanoseconds
        assert sim.steps == len(sent) >= 6
        stamps = np.array([stamp_ns(m.header.stamp) for m in sent])
        np.testing.assert_array_equal(np.diff(stamps), 2_000_000)
        assert sim.lagged or abs(clock - stamps[-1]) < 3_000_000
        effort = Float64MultiArray()
        effort.data = [0.0] * 5
        sim._on_effort(effort)  # zeros, as a watchdog sends before any controller: still braked
        time.sleep(0.1)  # fifty periods: more than MAX_CATCH_UP
        before, anchor = sim.steps, sim._stamp_anchor_ns
        sim._step()
        clock = sim.get_clock().now().nanoseconds
        assert sim.braked and sim.lagged >= 1
        assert sim.steps - before == len(sent) - before == MAX_CATCH_UP
        stamps = np.array([stamp_ns(m.header.stamp) for m in sent])
        np.testing.assert_array_equal(np.diff(stamps), 2_000_000)  # no jump: the stamps are the physics'
        assert sim._stamp_anchor_ns == anchor and clock - stamps[-1] > 60_000_000  # behind the clock
        for m in sent:  # brakes on: nothing moved
            assert list(m.position) == q_init and not any(m.velocity)
        time.sleep(MAX_LAG_S + 0.1)  # more than MAX_LAG_S behind: the stamps jump to the clock
        before = len(sent)
        sim._step()
        clock = sim.get_clock().now().nanoseconds
        jump = stamp_ns(sent[before].header.stamp) - stamp_ns(sent[before - 1].header.stamp)
        assert len(sent) - before == MAX_CATCH_UP and jump >= MAX_LAG_S * 1e9
        assert abs(clock - stamp_ns(sent[-1].header.stamp)) < 10_000_000
        effort.data = [0.0, 0.0, 0.0, 0.0, 1e-3]
        sim._on_effort(effort)  # the controller is up: gravity acts
        time.sleep(0.05)
        sim._step()
        assert not sim.braked and np.abs(np.array(sent[-1].position) - q_init).max() > 1e-4
    finally:
        sim.destroy_node()


def test_a_late_simulator_tick_publishes_the_physics_at_its_stamps(ctx):
    """The arm falls from rest (a small held effort released the brakes); a tick 0.1 s late: every
    published state — before and after it, the simulated time behind the clock — is the arm's motion
    at its stamp, checked
    against an independent integration (Pinocchio's ABA from the URDF through scipy's adaptive
    Runge-Kutta, tight tolerances)."""
    import pinocchio as pin
    from scipy.integrate import solve_ivp

    from ros_lnn.nodes.dac_chain_sim.node import DacChainSim
    from ros_lnn.nodes.stamps import stamp_ns

    q_init = np.array([0.0, -0.8, 1.4, 0.6, 0.4])
    u = np.array([0.0, 0.0, 0.0, 0.0, 1e-3])
    sim = DacChainSim(
        namespace=f"/rt{next(_ns)}",
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("initial_positions", value=q_init.tolist()),
            Parameter("rate_hz", value=500.0),
            Parameter("hold_until_command", value=True),
            Parameter("command_timeout_s", value=10.0),
        ],
    )
    sent = []
    sim.pub.publish = sent.append
    try:
        effort = Float64MultiArray()
        effort.data = u.tolist()
        sim._on_effort(effort)
        sim._step()
        start = stamp_ns(sent[0].header.stamp)
        for _ in range(5):
            time.sleep(0.01)
            sim._step()
        time.sleep(0.1)
        sim._step()
        assert sim.lagged >= 1
    finally:
        sim.destroy_node()
    model = pin.buildModelFromXML(URDF.read_text())
    data = model.createData()
    order = [model.getJointId(n) - 1 for n in sim.joint_names]  # joint_names in the model's q order
    u_model = np.zeros(model.nv)
    u_model[order] = u

    def rhs(_, x):
        return np.concatenate((x[model.nq :], pin.aba(model, data, x[: model.nq], x[model.nq :], u_model)))

    x0 = np.zeros(2 * model.nv)
    x0[order] = q_init
    stamps = np.array([(stamp_ns(m.header.stamp) - start) * 1e-9 for m in sent]) + 0.002  # first: one step
    truth = solve_ivp(rhs, (0.0, stamps[-1]), x0, t_eval=stamps, rtol=1e-10, atol=1e-12).y.T
    published = np.array([m.position for m in sent])
    assert np.abs(published[0] - q_init).max() > 0 and sim.lagged  # it fell, and a tick was late
    np.testing.assert_allclose(published, truth[:, order], atol=1e-6)


def test_the_lockstep_simulator_steps_once_per_command_on_its_own_clock(ctx):
    """dac_chain_sim with lockstep: each effort command takes exactly one step, stamped and published on
    /clock at k·dt from 0 whatever the wall time in between; without commands it steps only after
    lockstep_timeout_s (holding the arm while braked)."""
    from ros_lnn.nodes.dac_chain_sim.node import DacChainSim
    from ros_lnn.nodes.stamps import stamp_ns

    ns = f"/ls{next(_ns)}"
    q_init = [0.0, -0.8, 1.4, 0.6, 0.4]
    sim = DacChainSim(
        namespace=ns,
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("initial_positions", value=q_init),
            Parameter("rate_hz", value=500.0),
            Parameter("hold_until_command", value=True),
            Parameter("lockstep", value=True),
            Parameter("lockstep_timeout_s", value=0.2),
        ],
    )
    sent, clock = [], []
    sim.pub.publish = sent.append
    sim.clock_pub.publish = clock.append
    try:
        sim._lockstep_idle()  # no step yet: the first state
        sim._lockstep_idle()  # within the timeout: nothing
        assert len(sent) == 1 and list(sent[0].position) == q_init
        effort = Float64MultiArray()
        effort.data = [0.0, 0.0, 0.0, 0.0, 1e-3]  # not all zeros: the brakes open
        for _ in range(3):
            sim._on_effort(effort)
            time.sleep(0.01)  # five periods of wall time between commands: still one step each
        sim._lockstep_idle()
        assert len(sent) == len(clock) == 4
        stamps = [stamp_ns(m.header.stamp) for m in sent]
        assert stamps == [2_000_000 * k for k in range(1, 5)]
        assert [stamp_ns(c.clock) for c in clock] == stamps
        assert np.abs(np.array(sent[-1].position) - q_init).max() > 0  # gravity acts once released
        time.sleep(0.25)
        sim._lockstep_idle()  # a command missing for longer than the timeout: one step anyway
        assert len(sent) == 5 and stamp_ns(sent[-1].header.stamp) == 10_000_000
    finally:
        sim.destroy_node()


def test_a_target_not_renewed_in_time_is_dropped_for_a_hold(make):
    # long enough for a loaded machine to answer in time
    node, h, ns = make({"target_timeout_s": 1.0, **SLOW_WATCHDOG})
    _, efforts, states = _io(h, ns)
    target = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
    goal = PoseStamped()
    goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.45, 0.1, 0.15
    target.publish(goal)
    h.wait(lambda: node.pipeline.has_target, what="target")
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: efforts, what="effort toward the target")
    fresh = np.asarray(efforts[-1].data)
    lib = _library()
    lib.set_ee_target([0.45, 0.1, 0.15])
    assert np.allclose(fresh, lib.step(Q0, QD0).efforts.effort, atol=1e-12)
    time.sleep(1.5)
    n0 = len(efforts)
    states.publish(_joint_state(JOINTS, Q0, QD0))
    h.wait(lambda: len(efforts) > n0, what="effort after the target went stale")
    hold = _library()  # no target: holds the pose of this joint state
    assert node.counts["stale_target"] == 1
    assert np.allclose(efforts[-1].data, hold.step(Q0, QD0).efforts.effort, atol=1e-12)


def test_rate_bench_with_the_feeder_in_another_process():
    """The node bench's process feeder: every joint state sent at a modest rate comes back as an effort
    command (the 1 kHz figure itself belongs to `ros-lnn bench control`, not to a test). A deep input
    queue: with the default newest-state-only queue a loaded machine supersedes states by design."""
    from ros_lnn_lab.bench.control import bench_node_rate

    out = bench_node_rate(1.5, rate_hz=100.0, feeder="process", input_queue_depth=100)
    assert out["feeder"] == "process" and out["sent"] > 0
    # the figures are the counts' (how fast the machine was is the benchmark's business, not the test's)
    assert out["processed_fraction"] == out["processed"] / out["sent"]
    assert 0 < out["processed"] <= out["sent"] and out["outputs_per_input"] > 0  # (the watchdog adds its own)
    assert 0 < out["node_step_median_us"] <= out["node_step_p99_us"]
    assert 0 < out["node_cpu_median_us"] <= out["node_cpu_p99_us"]


def test_commands_are_published_from_serialized_templates():
    """The per-sample path publishes bytes: they must be the ordinary message for any values."""
    from rclpy.serialization import deserialize_message

    from ros_lnn.nodes.dac_controller.node import array_msg, port_layout

    layout = port_layout(["a", "b"])
    template = SerializedTemplate(lambda _, v: array_msg(v, layout), (12,), stamp_format=None)
    assert template.ok
    values = np.random.default_rng(0).normal(size=12)
    msg = deserialize_message(template.fill(0, 0, values), Float64MultiArray)
    assert msg == array_msg(values, layout)


def test_joint_state_queue_depth_is_a_parameter(make):
    node, _, _ = make({"input_queue_depth": 64})
    (sub,) = [s for s in node.subscriptions if s.topic_name.endswith("/joint_states")]
    assert sub.qos_profile.depth == 64
    node_default, _, _ = make()
    (sub,) = [s for s in node_default.subscriptions if s.topic_name.endswith("/joint_states")]
    assert sub.qos_profile.depth == 1  # a late step acts on the newest state, not on a backlog
