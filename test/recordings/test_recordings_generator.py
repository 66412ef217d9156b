"""Recordings as a robot writes them, on real rosbag2 files (sqlite3 and mcap): read back with the
``rosbags`` library (independent of the package) and with the package's bag path; rate, jitter,
latency, the gap, noise levels, encoder quantisation, joint and topic names, efforts, optional command
topic, no ground truth in the bag; and ``ros-lnn train --bag`` ingests one."""

from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from conftest import requires_torch
from ros_lnn.bags.dataset import load_bag_dataset
from ros_lnn.bags.mapping import BagMapping
from ros_lnn.bags.writer import START_NS
from ros_lnn.errors import ConfigError
from ros_lnn.physics.friction import friction_crane
from ros_lnn.physics.rotary_pendulum import quanser_rotary_pendulum
from ros_lnn.physics.simulate import equations_of_motion
from ros_lnn.recordings.generator import (
    MAX_STEP_S,
    RecordingSpec,
    bag_mapping,
    simulate_plant,
    write_recording,
)
from ros_lnn.recordings.profiles import ChirpProfile, ImpulseProfile, StepProfile

pytest.importorskip("rosbags")

NAMES = ("arm_to_pendulum", "base_to_arm")  # plant order: pendulum (free), arm (servo)
TOPIC = "/robot/joint_states"
SPEC = RecordingSpec(
    duration_s=2.0,
    rate_hz=500.0,
    joint_states_topic=TOPIC,
    joint_names=NAMES,
    efforts="nan",
    position_noise=(3e-4, 2e-4),
    velocity_noise=(4e-3, 2e-3),
    jitter_s=5e-5,
    latency_s=4e-4,
    gap=(0.5, 0.05),
    seed=3,
)


def read_with_rosbags(path, topic):
    """Every message of ``topic`` as (receive ns, message), with the rosbags library only."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    with AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        conns = [c for c in reader.connections if c.topic == topic]
        msgs = [
            (ts, reader.deserialize(raw, conn.msgtype))
            for conn, ts, raw in reader.messages(connections=conns)
        ]
    return topics, msgs


@pytest.fixture(scope="module", params=["sqlite3", "mcap"])
def recording(request, tmp_path_factory):
    from dataclasses import replace

    path = tmp_path_factory.mktemp(request.param) / "step"
    truth = write_recording(
        path,
        quanser_rotary_pendulum(),
        StepProfile(4 * np.pi, 0.3, 0.2),
        replace(SPEC, storage=request.param),
    )
    topics, msgs = read_with_rosbags(path, TOPIC)
    return truth, topics, msgs


def arrays(msgs, field):
    return np.array([getattr(m, field) for _, m in msgs])


def test_only_joint_states_are_recorded(recording):
    truth, topics, msgs = recording
    assert topics == {TOPIC: "sensor_msgs/msg/JointState"}  # no command topic, no ground truth
    assert len(msgs) == len(truth.t)
    sizes = sum(f.stat().st_size for f in truth.path.iterdir())
    assert sizes < 400_000  # small: a few hundred kB at most


def test_names_order_and_efforts(recording):
    truth, _, msgs = recording
    assert all(list(m.name) == ["base_to_arm", "arm_to_pendulum"] for _, m in msgs)  # servo first
    effort = arrays(msgs, "effort")
    assert effort.shape == (len(msgs), 2) and np.isnan(effort).all()
    assert truth.free_joints == ("arm_to_pendulum",) and truth.servo_joints == ("base_to_arm",)


def test_rate_jitter_latency_and_gap(recording):
    truth, _, msgs = recording
    stamps = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in msgs], dtype=np.int64)
    recv = np.array([ts for ts, _ in msgs], dtype=np.int64)
    t = (stamps - START_NS) * 1e-9
    dt = np.diff(np.sort(t))
    assert np.median(dt) == pytest.approx(1 / 500, rel=1e-3)
    # jitter: offsets from the nominal grid have the configured spread
    offsets = t - np.round(t * 500) / 500
    assert np.std(offsets) == pytest.approx(5e-5, rel=0.15)
    # receive time = stamp + latency (exponential, mean 0.4 ms)
    latency = (np.sort(recv) - np.sort(stamps)) * 1e-9
    lat = (recv - stamps) * 1e-9
    assert lat.min() >= 0 and np.mean(lat) == pytest.approx(4e-4, rel=0.15) and latency.size == lat.size
    # one gap: 25 messages (50 ms at 500 Hz) missing after t = 1.0 s
    big = np.flatnonzero(dt > 3 / 500)
    assert len(big) == 1 and dt[big[0]] == pytest.approx(0.05 + 1 / 500, abs=0.4 / 500)
    assert np.sort(t)[big[0]] == pytest.approx(1.0, abs=1.5 / 500)
    assert truth.dropped == 25 and len(msgs) == 1001 - 25


def test_noise_levels_and_encoder_quantisation(recording):
    truth, _, msgs = recording
    order = np.argsort([ts for ts, _ in msgs])  # bag order is receive order; truth is stamp order
    stamps = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in msgs])
    by_stamp = np.argsort(stamps)
    pos, vel = arrays(msgs, "position")[by_stamp][:, ::-1], arrays(msgs, "velocity")[by_stamp][:, ::-1]
    assert order.size == pos.shape[0]
    step = 2 * np.pi / 4096
    counts = pos / step
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)  # whole encoder counts
    assert np.min(np.diff(np.unique(np.round(counts[:, 0])))) == 1  # the step is visible
    res_q, res_v = pos - truth.q, vel - truth.qd
    for j, (sq, sv) in enumerate(((3e-4, 4e-3), (2e-4, 2e-3))):
        assert np.std(res_q[:, j]) == pytest.approx(np.sqrt(sq**2 + step**2 / 12), rel=0.1)
        assert np.std(res_v[:, j]) == pytest.approx(sv, rel=0.1)
    assert np.abs(np.mean(res_v, axis=0)).max() < 3e-4


def test_the_package_reads_it_with_the_mapping(recording):
    truth, _, _ = recording
    mapping = BagMapping.from_dict({**bag_mapping(truth), "val_fraction": 0.0})
    ds = load_bag_dataset(truth.path, mapping)
    assert len(ds.trials) == 2 and len(ds.summary["gaps_s"]) == 1  # the gap splits the recording
    assert all(info["resampled"] for info in ds.summary["trials"])  # jitter: put on a uniform grid
    assert ds.trials[0].attrs["measured"]["qdd_e"].startswith("savgol")  # no command topic
    assert ds.truth == [None, None]
    for trial in ds.trials:
        assert trial.coordinate_names == ("arm_to_pendulum", "base_to_arm")
        t_abs = trial.t + (trial.attrs["start_ns"] - START_NS) * 1e-9
        exact = np.interp(t_abs, truth.t, truth.qdd[:, 0])
        inner = slice(20, -20)
        err = np.mean((trial.qdd[inner, 0] - exact[inner]) ** 2) / np.var(exact[inner])
        assert err < 1e-3
        np.testing.assert_allclose(trial.q[:, 1], np.interp(t_abs, truth.t, truth.q[:, 1]), atol=3e-3)
    # the arm spins: its measured angle runs far past 2π
    assert ds.trials[-1].q[-1, 1] > 15


def test_truth_bookkeeping_matches_the_textbook_equations(recording):
    truth, _, _ = recording
    plant = quanser_rotary_pendulum()
    th, thd = truth.q[:, 0], truth.qd[:, 0]
    hinge = -(2.5e-5 * thd + 2.5e-5 * np.tanh(thd / 0.02))
    theta_dd, tau = plant.system.closed_form_acceleration(
        th, thd, truth.qd[:, 1], truth.qdd[:, 1], torque=hinge
    )
    np.testing.assert_allclose(truth.qdd[:, 0], theta_dd, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(truth.Q_f[:, 0], hinge, rtol=1e-12, atol=1e-15)
    arm = -(5e-4 * truth.qd[:, 1] + 2e-3 * np.tanh(truth.qd[:, 1] / 0.02))
    np.testing.assert_allclose(truth.Q_e[:, 0], tau - arm, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(truth.dissipated_power, -(thd * hinge + truth.qd[:, 1] * arm), rtol=1e-12)
    np.testing.assert_allclose(truth.E, truth.T + truth.V)
    assert truth.manifest()["profile"]["kind"] == "step" and "q" not in truth.manifest()


def test_command_topic_names_off_and_deterministic(tmp_path):
    spec = RecordingSpec(
        duration_s=1.0,
        rate_hz=200.0,
        servo_topic="/arm_controller/commands",
        publish_names=False,
        efforts="absent",
        gap=None,
        storage="mcap",
        seed=9,
    )
    profile = ChirpProfile(0.1, 0.5, 2.0, 1.0, fade_s=0.2)
    truth = write_recording(tmp_path / "a", friction_crane(), profile, spec)
    again = write_recording(tmp_path / "b", friction_crane(), profile, spec)
    topics, msgs = read_with_rosbags(truth.path, "/joint_states")
    _, msgs_again = read_with_rosbags(again.path, "/joint_states")
    for field in ("position", "velocity"):  # seeded: the same messages
        np.testing.assert_array_equal(arrays(msgs, field), arrays(msgs_again, field))
    assert [ts for ts, _ in msgs] == [ts for ts, _ in msgs_again]
    assert topics["/arm_controller/commands"] == "trajectory_msgs/msg/JointTrajectory"
    assert all(len(m.name) == 0 and len(m.effort) == 0 for _, m in msgs)
    _, cmds = read_with_rosbags(truth.path, "/arm_controller/commands")
    acc = np.array([m.points[0].accelerations[0] for _, m in cmds])
    np.testing.assert_allclose(np.sort(acc), np.sort(profile(truth.t)[2]), rtol=1e-12, atol=1e-12)
    assert truth.dropped == 0 and len(msgs) == 201
    # nameless joint states need the mapping's joint_order; the command accelerations are used as q̈_e
    mapping = BagMapping.from_dict({**bag_mapping(truth), "val_fraction": 0.0})
    assert mapping.joint_order == ("cart_joint", "pendulum_joint")
    ds = load_bag_dataset(truth.path, mapping)
    assert ds.trials[0].attrs["measured"]["qdd_e"] == "servo commands"
    other = RecordingSpec(duration_s=1.0, rate_hz=200.0, gap=None, storage="mcap", seed=10)
    _, msgs_other = read_with_rosbags(
        write_recording(tmp_path / "c", friction_crane(), profile, other).path, "/joint_states"
    )
    assert not np.array_equal(arrays(msgs, "velocity"), arrays(msgs_other, "velocity"))


def test_spec_errors_name_the_setting(tmp_path):
    with pytest.raises(ConfigError, match="storage 'ros1'"):
        RecordingSpec(storage="ros1")
    with pytest.raises(ConfigError, match="efforts 'zero'"):
        RecordingSpec(efforts="zero")
    with pytest.raises(ConfigError, match="joint_names"):
        write_recording(tmp_path / "x", friction_crane(), StepProfile(0.1), RecordingSpec(joint_names=("a",)))


@requires_torch
def test_ros_lnn_train_ingests_a_recording(tmp_path, capsys):
    from ros_lnn.cli import main

    truth = write_recording(
        tmp_path / "bag",
        quanser_rotary_pendulum(),
        StepProfile(4 * np.pi, 0.3, 0.2),
        RecordingSpec(duration_s=1.5, seed=4),
    )
    config = Path(__file__).resolve().parents[2] / "config" / "bag_mapping_rotary_pendulum.yaml"
    out = tmp_path / "m.onnx"
    code = main(
        [
            "train",
            "--bag",
            str(truth.path),
            "--config",
            str(config),
            "--epochs",
            "2",
            "--batch",
            "256",
            "--threads",
            "1",
            "--log-every",
            "1",
            "--val-every",
            "1",
            "--no-report",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "Q_e not measured" in printed and "1 gap(s) split the recording" in printed
    assert f"{len(truth.t)} messages" in printed and out.exists()


def test_a_pulse_narrower_than_the_longest_step_is_not_stepped_over():
    """The crane at rest, its cart jerked by one 2 ms pulse after 0.4 s of stillness (where an adaptive
    integrator's steps grow to their limit): the pendulum swings as under 1 ms steps."""
    plant = friction_crane()
    pulse = ImpulseProfile(peaks=(10.0,), times_s=(0.4,), width_s=0.002)
    assert pulse.width_s < MAX_STEP_S
    t = np.linspace(0.0, 0.8, 161)
    swing = simulate_plant(plant, pulse, t).q[:, list(plant.system.partition.free)][:, 0]
    # the reference: the same equations of motion, integrated by scipy with steps of at most 1 ms
    rhs, _ = equations_of_motion(plant.system, pulse, plant.free_force)
    ref = solve_ivp(
        rhs, (0.0, 0.8), [0.0, 0.0], method="DOP853", rtol=1e-11, atol=1e-11, max_step=1e-3, t_eval=t
    )
    assert np.abs(ref.y[0]).max() > 1e-4  # the pulse sets the pendulum swinging
    np.testing.assert_allclose(swing, ref.y[0], atol=1e-8)
