"""Each quirk of real recordings on a bag built to show it, handled and reported."""

import numpy as np
import pytest

from bag_helpers import RATE_HZ, crane_trial, crane_trials, mapping
from ros_lnn.bags.dataset import load_bag_dataset
from ros_lnn.bags.writer import START_NS, BagWriter
from ros_lnn.errors import DataError

pytest.importorskip("rosbags")


def _write(
    path, trial, *, rows=None, stamps=None, recv=None, names=None, effort=None, storage="sqlite3", servo=True
):
    """A bag of one trial, rows picked (and possibly repeated or reordered) by ``rows``."""
    rows = np.arange(len(trial)) if rows is None else np.asarray(rows)
    stamps = START_NS + np.round(trial.t[rows] * 1e9).astype(np.int64) if stamps is None else stamps
    effort = trial.Q[rows] if effort is None else effort
    with BagWriter(path, storage) as w:
        w.joint_states(
            "/joint_states",
            stamps,
            trial.coordinate_names if names is None else names,
            trial.q[rows],
            trial.qd[rows],
            effort,
            recv_ns=recv,
        )
        if servo:
            w.joint_trajectory(
                "/servo_commands",
                stamps,
                trial.servo_joints,
                trial.q[rows, 1:],
                trial.qd[rows, 1:],
                trial.qdd[rows, 1:],
                recv_ns=recv,
            )
    return path


def test_empty_names_use_index_mapping(tmp_path):
    trial = crane_trials()[0]
    bag = _write(tmp_path / "nameless", trial, names=[])
    with pytest.raises(DataError, match=r"empty name fields.*joint_order"):
        load_bag_dataset(bag, mapping())
    ds = load_bag_dataset(bag, mapping(joint_order=["pendulum_joint", "cart_joint"], val_fraction=0))
    assert ds.summary["streams"]["/joint_states"]["nameless"] == len(trial)
    assert np.array_equal(ds.trials[0].q, trial.q)
    # reversed array order is honoured: the mapping is by index, not by assumption
    swapped = _write(tmp_path / "swapped", trial, names=[], servo=False)
    ds = load_bag_dataset(
        swapped, mapping(joint_order=["cart_joint", "pendulum_joint"], servo_topic="", val_fraction=0)
    )
    got = ds.trials[0]
    assert got.coordinate_names == ("cart_joint", "pendulum_joint")
    assert np.array_equal(got.q[:, got.coordinate_names.index("cart_joint")], trial.q[:, 0])


def test_nan_efforts_are_masked(tmp_path):
    trial = crane_trials()[0]
    effort = trial.Q.copy()
    bad = np.arange(40, 400, 37)
    effort[bad, 1] = np.nan
    ds = load_bag_dataset(_write(tmp_path / "nan", trial, effort=effort), mapping(val_fraction=0))
    got = ds.trials[0]
    assert ds.summary["streams"]["/joint_states"]["nan_efforts"] == len(bad)
    assert ds.summary["trials"][0]["masked_Q_samples"] == len(bad)
    assert np.isnan(got.Q_e[bad]).all()
    good = np.setdiff1d(np.arange(len(trial)), bad)
    assert np.array_equal(got.Q_e[good], trial.Q_e[good])
    assert np.array_equal(got.q, trial.q)  # positions untouched


def test_duplicated_and_out_of_order_stamps(tmp_path):
    trial = crane_trials()[0]
    n = len(trial)
    rows = np.concatenate([np.arange(n), [10, 11, 300]])  # three duplicates
    recv = START_NS + np.round(trial.t[rows] * 1e9).astype(np.int64)
    recv[np.arange(100, 110)] = recv[110] + np.arange(10)  # ten late arrivals
    ds = load_bag_dataset(_write(tmp_path / "dup", trial, rows=rows, recv=recv), mapping(val_fraction=0))
    info = ds.summary["streams"]["/joint_states"]
    assert info["duplicates"] == 3 and info["out_of_order"] > 0
    assert len(ds.trials) == 1
    assert np.array_equal(ds.trials[0].q, trial.q) and np.array_equal(ds.trials[0].qdd[:, 1], trial.qdd[:, 1])


def test_gap_splits_into_trials(tmp_path):
    trial = crane_trials()[1]
    keep = np.r_[0:250, 330 : len(trial)]  # 0.4 s of silence
    ds = load_bag_dataset(_write(tmp_path / "gap", trial, rows=keep), mapping(val_fraction=0))
    assert [len(t) for t in ds.trials] == [250, len(trial) - 330]
    assert ds.summary["gaps_s"] == [pytest.approx(81 / RATE_HZ)]
    assert np.array_equal(ds.trials[1].q, trial.q[330:])
    # a stretch shorter than min_samples is dropped and reported
    short = np.r_[0:30, 100 : len(trial)]
    ds = load_bag_dataset(_write(tmp_path / "short", trial, rows=short), mapping(val_fraction=0))
    assert len(ds.trials) == 1 and ds.summary["dropped_segments"][0]["samples"] == 30


def test_rate_jitter_is_resampled_to_uniform_grid(tmp_path):
    """Stamps jittered ±30 % of the step: the reader resamples onto the median-rate grid; the
    result is compared with the simulator evaluated exactly on that grid."""
    rng = np.random.default_rng(3)
    step = 1.0 / RATE_HZ
    t = np.cumsum(np.r_[0.0, step * (1 + rng.uniform(-0.3, 0.3, 599))])
    jittered = crane_trial(1, t_eval=t, duration=t[-1] + 1e-9)
    ds = load_bag_dataset(_write(tmp_path / "jitter", jittered), mapping(val_fraction=0))
    info = ds.summary["trials"][0]
    assert info["resampled"] and info["jitter"] > 0.1 and info["max_step_deviation"] > 0.25
    got = ds.trials[0]
    assert np.allclose(np.diff(got.t), np.diff(got.t)[0], rtol=0, atol=1e-12)
    exact = crane_trial(1, t_eval=got.t, duration=got.t[-1] + 1e-9)
    # measured: 3e-10 rad, 4e-10 rad/s, 6e-6 m/s², 4e-8 relative; asserted with margin
    assert np.max(np.abs(got.q - exact.q)) < 1e-8  # cubic spline between 200 Hz samples
    assert np.max(np.abs(got.qd - exact.qd)) < 1e-8
    assert np.max(np.abs(got.qdd[:, 1] - exact.qdd[:, 1])) < 1e-4  # commands, linear interpolation
    err = got.qdd[10:-10, 0] - exact.qdd[10:-10, 0]
    assert np.sqrt(np.mean(err**2)) < 1e-6 * np.sqrt(np.mean(exact.qdd[:, 0] ** 2))


def test_zero_header_stamps_fall_back_to_receive_time(tmp_path):
    trial = crane_trials()[0]
    recv = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    bag = _write(
        tmp_path / "zero", trial, stamps=np.zeros(len(trial), dtype=np.int64), recv=recv, servo=False
    )
    with pytest.warns(UserWarning, match="header stamps are zero"):
        ds = load_bag_dataset(bag, mapping(servo_topic="", val_fraction=0))
    assert ds.summary["streams"]["/joint_states"]["stamps"] == "receive"
    assert any("receive time" in w for w in ds.summary["warnings"])
    assert np.array_equal(ds.trials[0].q, trial.q)
    # without servo commands, the servo acceleration also comes from Savitzky–Golay
    assert "savgol" in ds.summary["trials"][0]["qdd_e"]
    assert np.max(np.abs(ds.trials[0].qdd[:, 1] - trial.qdd[:, 1])) < 1e-3


def test_efforts_on_their_own_topics(tmp_path):
    """Q_e published by the servo driver on a Float64MultiArray topic (no header: receive time),
    Q_f measured in the joint states."""
    trial = crane_trials()[0]
    stamps = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    effort = trial.Q.copy()
    effort[:, 0] = 0.01 * np.sin(trial.t)  # a small measured Q_f
    with BagWriter(tmp_path / "efforts", "mcap") as w:
        w.joint_states("/joint_states", stamps, trial.coordinate_names, trial.q, trial.qd, effort)
        w.float64_array("/cart/motor_force", stamps, None, trial.Q[:, 1:])
    with pytest.warns(UserWarning, match="/cart/motor_force.*receive time"):
        ds = load_bag_dataset(
            tmp_path / "efforts",
            mapping(
                servo_topic="", servo_effort="/cart/motor_force", free_effort="joint_states", val_fraction=0
            ),
        )
    got = ds.trials[0]
    assert np.array_equal(got.Q_e, trial.Q_e) and np.array_equal(got.Q_f[:, 0], effort[:, 0])
    assert ds.summary["streams"]["/cart/motor_force"]["stamps"] == "receive"
    assert "/cart/motor_force" not in ds.summary["skipped_topics"]


def test_velocities_not_recorded(tmp_path):
    """A driver that publishes positions only: q̇ and q̈ both by Savitzky–Golay from q."""
    trial = crane_trials()[0]
    stamps = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    with BagWriter(tmp_path / "pos_only", "sqlite3") as w:
        w.joint_states("/joint_states", stamps, trial.coordinate_names, trial.q)
    ds = load_bag_dataset(tmp_path / "pos_only", mapping(servo_topic="", val_fraction=0))
    got, info = ds.trials[0], ds.summary["trials"][0]
    assert info["velocity"] == "savgol(q)" and not info["Q_e_measured"]
    rel = lambda a, b: np.sqrt(np.mean((a - b) ** 2, axis=0) / np.mean(b**2, axis=0))  # noqa: E731
    assert np.all(rel(got.qd, trial.qd) < 1e-5)  # measured ~1e-6 (window 11, order 3)
    assert np.all(rel(got.qdd, trial.qdd) < 5e-4)  # ~1e-4, dominated by the edges
    assert np.all(rel(got.qdd[10:-10], trial.qdd[10:-10]) < 1e-6)  # ~1e-7 away from them


def test_second_publisher_on_joint_states(tmp_path):
    """A gripper driver publishing its own joints on /joint_states too: its messages are skipped
    (counted), a message with a NaN position is dropped (counted), the rest is the trial."""
    trial = crane_trials()[0]
    stamps = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    q = trial.q.copy()
    q[123, 0] = np.nan
    with BagWriter(tmp_path / "two", "mcap") as w:
        w.joint_states("/joint_states", stamps, trial.coordinate_names, q, trial.qd, trial.Q)
        w.joint_states("/joint_states", stamps[::4] + 1000, ["finger_joint"], np.zeros((len(stamps[::4]), 1)))
    ds = load_bag_dataset(tmp_path / "two", mapping(servo_topic="", val_fraction=0))
    info = ds.summary["streams"]["/joint_states"]
    assert info["other_joints_only"] == len(stamps[::4]) and info["nan_positions"] == 1
    # the hole is filled by resampling (a cubic spline through the samples, so they keep their values)
    got, step = ds.trials[0], ds.summary["trials"][0]
    assert step["resampled"] and step["max_step_deviation"] == pytest.approx(1.0, abs=1e-6)
    assert len(got) == len(trial)
    keep = np.arange(len(trial)) != 123
    assert np.allclose(got.q[keep], trial.q[keep], rtol=0, atol=1e-12)
    assert np.max(np.abs(got.q[123] - trial.q[123])) < 1e-8


def test_summary_for_people(tmp_path):
    from ros_lnn.bags.dataset import describe

    trial = crane_trials()[0]
    rows = np.r_[0:250, 249, 330 : len(trial)]
    ds = load_bag_dataset(_write(tmp_path / "s", trial, rows=rows), mapping(val_fraction=0))
    text = "\n".join(describe(ds.summary))
    assert "/joint_states (JointState): 521 messages, stamps header; duplicates 1" in text
    assert "2 trials" in text and "1 gap(s)" in text
