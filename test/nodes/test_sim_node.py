"""The sim node over real DDS: joint states at a fixed step with exact ground truth, servo and effort
commands, /clock, the chain, and a cross-process run of simulator + estimator."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import HAVE_RCLPY, HAVE_TORCH, requires_rclpy, stop_process
from ros_lnn.errors import ConfigError
from ros_lnn.estimation.trajectory import ServoPlan
from ros_lnn.physics.chain import PlanarChain
from ros_lnn.physics.crane import Crane

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from _ros_harness import Harness
    from ros_lnn.nodes.messages import ENERGY_TYPE, PREDICTION_TYPE, energy_dict, prediction_arrays
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.sim.node import SimNode
    from ros_lnn.nodes.stamps import ns_to_stamp, seconds_to_duration, stamp_ns


@pytest.fixture
def make(ctx):
    made = []
    counter = iter(range(1000))

    def _make(params=None):
        ns = f"/s{next(counter)}_{os.getpid()}"
        node = SimNode(
            namespace=ns,
            context=ctx,
            parameter_overrides=[Parameter(k, value=v) for k, v in (params or {}).items()],
        )
        h = Harness(node, context=ctx)
        made.append(h)
        return node, h, ns

    yield _make
    for h in made:
        h.close()


def ground_truth(h, ns):
    return {
        "js": h.collect(JointState, f"{ns}/joint_states", SENSOR_QOS),
        "force": h.collect(JointState, f"{ns}/sim/ground_truth/driving_force", SENSOR_QOS),
        "pred": h.collect(PREDICTION_TYPE, f"{ns}/sim/ground_truth/prediction", SENSOR_QOS),
        "energy": h.collect(ENERGY_TYPE, f"{ns}/sim/ground_truth/energy", SENSOR_QOS),
    }


def step_time(node, stamp_ns: int) -> float:
    """The simulated time of the step a stamp carries, as the node computes it (``k · dt``): the stamp
    is that time rounded to whole nanoseconds, and ``(stamp − origin) · 1e-9`` can differ from it in the
    last bit — enough to move q̈_e by 1e-15 where the reference is held to that."""
    return round((stamp_ns - node.origin_ns) / (node.dt * 1e9)) * node.dt


def by_stamp(msgs):
    """Messages by stamp; predictions read into arrays (q, qd, qdd, Q) whichever type carries them."""
    return {
        stamp_ns(m.header.stamp): prediction_arrays(m) if isinstance(m, PREDICTION_TYPE) else m
        for m in list(msgs)
    }


def test_joint_states_at_fixed_steps_with_exact_ground_truth(make):
    node, h, ns = make({"rate_hz": 1000.0})
    topics = ground_truth(h, ns)
    h.wait(lambda: len(topics["force"]) >= 100 and len(topics["energy"]) >= 100, what="100 samples")
    js, force, pred = by_stamp(topics["js"]), by_stamp(topics["force"]), by_stamp(topics["pred"])
    stamps = sorted(js)
    gaps = np.diff(stamps)
    assert np.all(gaps > 0) and np.all(gaps % 1_000_000 == 0)  # whole steps of 1 ms (gaps when overloaded)
    crane = Crane()
    checked = 0
    for s in stamps:
        if s not in force or s not in pred:
            continue
        m = js[s]
        assert m.name == ["pendulum_joint", "cart_joint"]
        q, qd = np.array(m.position), np.array(m.velocity)
        _, _, qdd_e = node.excitation(step_time(node, s))
        want = crane.dynamics(q, qd, qdd_e=qdd_e, Q_f=np.zeros(1))
        np.testing.assert_allclose(force[s].effort, want["Q_e"], rtol=1e-12, atol=1e-15)
        assert list(m.effort) == [0.0, force[s].effort[0]]
        np.testing.assert_allclose(pred[s]["qdd"], want["qdd"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(pred[s]["Q"], want["Q"], rtol=1e-12, atol=1e-15)
        checked += 1
    assert checked >= 50
    e = energy_dict(topics["energy"][-1])
    s = int(e["stamp_sec"]) * 1_000_000_000 + int(e["stamp_nanosec"])
    if s in js:
        m = js[s]
        _, _, qdd_e = node.excitation(step_time(node, s))
        want = crane.dynamics(np.array(m.position), np.array(m.velocity), qdd_e=qdd_e, Q_f=np.zeros(1))
        assert e["E"] == pytest.approx(float(want["E"]), rel=1e-12)


def test_servo_follows_trajectory_commands_and_efforts_act_on_free_joints(make):
    node, h, ns = make({"rate_hz": 200.0, "effort_timeout_s": 0.0})
    topics = ground_truth(h, ns)
    cmd = h.publisher(JointTrajectory, f"{ns}/servo_commands", COMMAND_QOS)
    eff = h.publisher(Float64MultiArray, f"{ns}/effort_commands", COMMAND_QOS)
    eff.publish(Float64MultiArray(data=[0.25]))
    eff.publish(Float64MultiArray(data=[0.25, 1.0]))  # wrong size: rejected
    h.wait(lambda: len(topics["js"]) > 0, what="the first joint state")  # stamps are set by the first step
    start_ns = node.sim_time_ns() + 200_000_000
    msg = JointTrajectory(joint_names=["cart_joint"])
    msg.header.stamp = ns_to_stamp(start_ns)
    times, pos = [0.0, 0.2, 0.4], [0.0, 0.1, 0.05]
    for t, p in zip(times, pos):
        msg.points.append(
            JointTrajectoryPoint(
                positions=[p], velocities=[0.0], accelerations=[0.0], time_from_start=seconds_to_duration(t)
            )
        )
    cmd.publish(msg)
    h.wait(lambda: node.counts["commands"] == 1 and node.counts["invalid_command"] == 1, what="commands")
    taken_ns = node.sim_time_ns()  # the command was taken by now (on a loaded runner, maybe after start_ns)
    h.wait(lambda: node.sim_time_ns() > start_ns + 500_000_000, timeout=15, what="the plan to run out")
    # the simulator's clock runs ahead of what DDS has delivered: wait for the states after the plan too
    h.wait(
        lambda: any(stamp_ns(m.header.stamp) > start_ns + 450_000_000 for m in list(topics["js"])),
        timeout=15,
        what="joint states after the plan",
    )
    t0 = (start_ns - node.origin_ns) * 1e-9
    plan = ServoPlan(np.array(times) + t0, np.array(pos)[:, None], np.zeros((3, 1)), np.zeros((3, 1)))
    js = by_stamp(topics["js"])
    inside = [s for s in js if max(start_ns + 10_000_000, taken_ns) <= s <= start_ns + 390_000_000]
    after = [s for s in js if s > start_ns + 450_000_000]
    assert len(inside) >= 5 and after  # (a loaded machine skips publishes, never steps)
    for s in inside:
        np.testing.assert_allclose(
            js[s].position[1], plan.sample((s - node.origin_ns) * 1e-9).q[0], rtol=0, atol=1e-15
        )
    assert js[after[-1]].position[1] == pytest.approx(0.05, abs=1e-15)
    # the applied force shows in the free joint's effort and in the ground truth Q
    late = [js[s] for s in js if s > start_ns]
    assert all(m.effort[0] == 0.25 for m in late)
    pred = by_stamp(topics["pred"])
    s = max(set(pred) & set(js))
    assert pred[s]["Q"][0] == pytest.approx(0.25, abs=1e-12)


def test_array_commands_drive_a_critically_damped_servo(make):
    node, h, ns = make({"servo_command_type": "array", "servo_bandwidth": 30.0, "excitation": "hold"})
    topics = ground_truth(h, ns)
    cmd = h.publisher(Float64MultiArray, f"{ns}/servo_commands", COMMAND_QOS)
    cmd.publish(Float64MultiArray(data=[0.2]))
    h.wait(lambda: node.counts["commands"] == 1, what="the command")
    t_cmd = node.sim.t
    h.wait(lambda: node.sim.t > t_cmd + 0.6, timeout=15, what="the servo to settle")
    js = by_stamp(topics["js"])
    last = js[max(js)]
    assert last.position[1] == pytest.approx(0.2, abs=0.2 * 19 * np.exp(-30 * 0.5))  # (1 + ωτ) e^{-ωτ} bound
    # the ground truth uses the servo's exact acceleration: q̈ = ω²(c − q) − 2ω q̇
    pred = by_stamp(topics["pred"])
    s = max(set(pred) & set(js))
    q, qd = js[s].position[1], js[s].velocity[1]
    assert pred[s]["qdd"][1] == pytest.approx(900 * (0.2 - q) - 60 * qd, abs=1e-9)


def test_publishes_clock_and_stamps_with_simulated_time(make):
    node, h, ns = make({"publish_clock": True, "rate_hz": 200.0})
    clocks = h.collect(Clock, "/clock", SENSOR_QOS)
    js = h.collect(JointState, f"{ns}/joint_states", SENSOR_QOS)
    h.wait(lambda: len(js) >= 20 and len(clocks) >= 20, what="clock and joint states")
    mine = [stamp_ns(c.clock) for c in clocks]
    stamps = [stamp_ns(m.header.stamp) for m in js]
    assert node.origin_ns == 0 and min(stamps) < 1_000_000_000  # simulated time starts at 0
    assert all(s % 5_000_000 == 0 for s in stamps)
    assert len(set(stamps) & set(mine)) >= 0.8 * len(stamps)  # each state is stamped with its /clock time


def test_chain_with_a_servo_joint_in_the_middle(make):
    node, h, ns = make(
        {
            "system": "chain",
            "chain_servo_joints": ["joint_2"],
            "rate_hz": 100.0,
            "initial_positions": [0.2, -0.1],
        }
    )
    topics = ground_truth(h, ns)
    h.wait(lambda: len(topics["pred"]) >= 10 and len(topics["js"]) >= 10, what="chain samples")
    chain = PlanarChain.uniform(3, servo_joints=["joint_2"])
    js, force, pred = by_stamp(topics["js"]), by_stamp(topics["force"]), by_stamp(topics["pred"])
    s = max(set(js) & set(pred) & set(force))
    m = js[s]
    assert m.name == ["joint_1", "joint_2", "joint_3"] and force[s].name == ["joint_2"]
    assert pred[s]["names"] == ["joint_1", "joint_3", "joint_2"]  # model order: free, then servo
    _, _, qdd_e = node.excitation(step_time(node, s))
    want = chain.dynamics(np.array(m.position), np.array(m.velocity), qdd_e=qdd_e, Q_f=np.zeros(2))
    np.testing.assert_allclose(force[s].effort, want["Q_e"], rtol=1e-12)
    np.testing.assert_allclose(pred[s]["qdd"], want["qdd"][[0, 2, 1]], rtol=1e-12, atol=1e-14)
    # every number in its slot: the servo joint's state in the driving force, model order in the prediction
    assert (list(force[s].position), list(force[s].velocity)) == ([m.position[1]], [m.velocity[1]])
    assert list(pred[s]["q"]) == [m.position[i] for i in (0, 2, 1)]
    assert list(pred[s]["qd"]) == [m.velocity[i] for i in (0, 2, 1)]
    np.testing.assert_allclose(pred[s]["Q"], want["Q"][[0, 2, 1]], rtol=1e-12, atol=1e-14)
    assert m.effort[0] == m.effort[2] == 0.0 and m.effort[1] == force[s].effort[0]
    energies = {
        e["stamp_sec"] * 1_000_000_000 + e["stamp_nanosec"]: e for e in map(energy_dict, topics["energy"])
    }
    e = energies[s]
    for key in ("T", "V", "E", "power"):
        assert e[key] == pytest.approx(float(want[key]), rel=1e-12, abs=1e-14), key


def test_frame_id_set_at_runtime_stamps_every_output(make):
    node, h, ns = make({"rate_hz": 200.0})
    topics = ground_truth(h, ns)
    if not hasattr(ENERGY_TYPE, "header"):  # the Float64MultiArray fallback carries no frame
        del topics["energy"]
    h.wait(lambda: all(len(m) >= 5 for m in topics.values()), what="samples in the default frame")
    assert all(m[-1].header.frame_id == "" for m in topics.values())
    assert h.call(lambda: node.set_parameters([Parameter("frame_id", value="world")]))[0].successful

    def framed(msgs):
        return [m for m in list(msgs) if m.header.frame_id == "world"]

    h.wait(lambda: all(len(framed(m)) >= 5 for m in topics.values()), what="samples in the new frame")
    js, force = framed(topics["js"]), by_stamp(framed(topics["force"]))
    m = js[-1]
    assert m.name == ["pendulum_joint", "cart_joint"] and len(m.effort) == 2
    s = max(set(by_stamp(js)) & set(force))
    assert list(force[s].position) == [by_stamp(js)[s].position[1]]


def test_bad_configuration_names_the_parameter(ctx):
    with pytest.raises(ConfigError, match="parameter system: must be one of crane, chain, got 'boat'"):
        SimNode(namespace="/bad1", context=ctx, parameter_overrides=[Parameter("system", value="boat")])
    with pytest.raises(ConfigError, match="chain_masses"):
        SimNode(
            namespace="/bad2",
            context=ctx,
            parameter_overrides=[Parameter("system", value="chain"), Parameter("chain_masses", value=[1.0])],
        )
    with pytest.raises(ConfigError, match="effort_joints"):
        SimNode(
            namespace="/bad3",
            context=ctx,
            parameter_overrides=[Parameter("effort_joints", value=["cart_joint"])],
        )


@pytest.fixture(scope="module")
def exact_model(tmp_path_factory):
    if not HAVE_TORCH:
        pytest.skip("torch is needed to export the analytic test model")
    from _node_model import export_crane_model

    return export_crane_model(tmp_path_factory.mktemp("xp") / "crane_exact.onnx")


def test_cross_process_simulator_and_estimator(ctx, exact_model):
    """sim and servo_lnn as separate processes (`python -m`), this process listening over DDS."""
    ns = f"/xp{os.getpid()}"
    base = [sys.executable, "-m"]
    procs = [
        subprocess.Popen(
            # the default 20 Hz plans: the estimator keeps the plans of the last second (SplicedPlan)
            # for states that lag the newest (when it kept only 4 plans, 0.15 s, a loaded runner
            # processed a 172 ms run of states older than every kept plan: 107 of 147 commanded)
            base + ["ros_lnn.nodes.sim", "--ros-args", "-r", f"__ns:={ns}", "-p", "rate_hz:=250.0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            base
            + [
                "ros_lnn.nodes.servo_lnn",
                "--ros-args",
                "-r",
                f"__ns:={ns}",
                "-p",
                f"model_path:={exact_model}",
                "-p",
                "autostart:=true",
                "-r",
                "servo_commands:=sim/servo_plan",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        ),
    ]
    h = Harness(context=ctx)
    failure = None
    try:
        est = h.collect(JointState, f"{ns}/servo_lnn/driving_force", SENSOR_QOS)
        true = h.collect(JointState, f"{ns}/sim/ground_truth/driving_force", SENSOR_QOS)
        est_pred = h.collect(PREDICTION_TYPE, f"{ns}/servo_lnn/prediction", SENSOR_QOS)
        true_pred = h.collect(PREDICTION_TYPE, f"{ns}/sim/ground_truth/prediction", SENSOR_QOS)

        streams = (est, true, est_pred, true_pred)

        def stamps():
            """The stamps every stream has (a loaded machine drops some estimates: the estimator keeps
            only the newest input), and those where the estimator used the commanded servo acceleration
            (from /sim/servo_plan, once its first plan has arrived; before that it estimates q̈_e from
            the stream, for as long as discovery and the plan's 10 Hz take)."""
            e, t, ep, tp = (by_stamp(s) for s in streams)
            common = sorted(set(e) & set(t) & set(ep) & set(tp))
            commanded = [
                s
                for s in common
                if abs(ep[s]["qdd"][1] - tp[s]["qdd"][1]) <= 1e-6 * max(1.0, abs(tp[s]["qdd"][1]))
            ]
            return (e, t, ep, tp), common, commanded

        h.wait(
            lambda: len(stamps()[2]) >= 100,
            timeout=90,
            what="estimates on the commanded servo acceleration and ground truth from the other processes",
        )
        (e, t, ep, tp), common, commanded = stamps()
        since_plan = [s for s in common if s >= commanded[0]]
        assert len(commanded) >= 0.8 * len(since_plan), f"{len(commanded)} of {len(since_plan)} commanded"
        # There the estimator, the analytic crane in float32, equals the truth to single precision.
        for s in commanded:
            assert e[s].effort[0] == pytest.approx(t[s].effort[0], abs=2e-6 * max(1.0, abs(t[s].effort[0])))
            np.testing.assert_allclose(
                ep[s]["qdd"][0], tp[s]["qdd"][0], atol=2e-6 * max(1.0, abs(tp[s]["qdd"][0]))
            )
    except AssertionError as exc:
        failure = exc
    finally:
        h.close()
        outs = [stop_process(p) for p in procs]
    logs = "\n".join(
        f"--- process {i} (rc {p.returncode}):\n{o[-3000:]}" for i, (p, o) in enumerate(zip(procs, outs))
    )
    if failure is not None:
        raise AssertionError(f"{failure}\n{logs}")
    assert [p.returncode for p in procs] == [0, 0], logs


def test_force_driven_chain_takes_joint_efforts_by_topic(make):
    """All joints free (chain_servo_joints: []): efforts on every joint from effort_commands, as a
    torque controller (e.g. the DAC node) would send them."""
    _node, h, ns = make(
        {
            "system": "chain",
            "chain_servo_joints": [],
            "rate_hz": 100.0,
            "initial_positions": [0.1, 0.0, -0.1],
            "effort_joints": ["joint_3", "joint_1"],
            "effort_timeout_s": 0.0,
        }
    )
    topics = ground_truth(h, ns)
    eff = h.publisher(Float64MultiArray, f"{ns}/effort_commands", COMMAND_QOS)
    eff.publish(Float64MultiArray(data=[0.5, -2.0]))  # joint_3, joint_1
    h.wait(
        lambda: any(list(m.effort) == [-2.0, 0.0, 0.5] for m in list(topics["js"])), what="applied efforts"
    )
    js, pred = by_stamp(topics["js"]), by_stamp(topics["pred"])
    s = max(s for s in set(js) & set(pred) if list(js[s].effort) == [-2.0, 0.0, 0.5])
    chain = PlanarChain.uniform(3)
    m = js[s]
    want = chain.dynamics(
        np.array(m.position), np.array(m.velocity), qdd_e=np.zeros(0), Q_f=np.array([-2.0, 0.0, 0.5])
    )
    np.testing.assert_allclose(pred[s]["qdd"], want["qdd"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pred[s]["Q"], [-2.0, 0.0, 0.5], atol=1e-12)


def test_a_simulator_far_behind_its_clock_jumps_its_stamps_instead_of_drifting_behind(make):
    """A machine too slow for rate_hz makes the simulated time run slow (here: the simulator started
    30 s earlier and simulated none of them, as 30 s of stalls would leave it); the stamps, which follow
    the node clock, jump once to it instead of staying 30 s behind and falling further (a consumer with
    an age check, the estimator's max_input_age_s, would refuse every state). Counted as an overrun."""
    node, h, ns = make({"rate_hz": 100.0})
    js = h.collect(JointState, f"{ns}/joint_states", SENSOR_QOS)
    h.wait(lambda: len(js) > 5, what="joint states")

    def behind() -> None:
        node.wall_start -= 30.0
        node.origin_ns -= 30 * 10**9

    h.call(behind)
    h.wait(lambda: node.counts["overruns"] >= 1, what="the overrun")
    published = len(js)
    h.wait(lambda: len(js) > published + 5, what="joint states after it")
    lag_s = (node.get_clock().now().nanoseconds - stamp_ns(js[-1].header.stamp)) * 1e-9
    assert lag_s < 5.0  # 30 s behind without the jump; stamps on the node clock again with it
    assert node.sim.t < 30.0  # the simulated time did run slow: the missed steps were not integrated
