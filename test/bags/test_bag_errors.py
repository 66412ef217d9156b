"""Bad input: one clear line naming the bag/topic/joint at fault, and exit code 2 from the CLI."""

import numpy as np
import pytest

from bag_helpers import crane_trials, mapping
from ros_lnn.bags.dataset import load_bag_dataset
from ros_lnn.bags.mapping import BagMapping
from ros_lnn.bags.writer import START_NS, BagWriter, write_trials_bag
from ros_lnn.cli import main
from ros_lnn.errors import ConfigError, DataError

pytest.importorskip("rosbags")


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("bags")
    trials = crane_trials()
    return {s: write_trials_bag(root / s, trials, s) for s in ("sqlite3", "mcap")}


def _one_line(excinfo, *needles):
    text = str(excinfo.value)
    assert "\n" not in text
    for needle in needles:
        assert needle in text, (needle, text)


def test_missing_bag(tmp_path):
    with pytest.raises(DataError) as exc:
        load_bag_dataset(tmp_path / "nope", mapping())
    _one_line(exc, "nope", "no such bag")


def test_corrupt_sqlite_and_truncated_mcap(tmp_path, bags):
    import shutil

    corrupt = tmp_path / "corrupt"
    shutil.copytree(bags["sqlite3"], corrupt)
    db = next(corrupt.glob("*.db3"))
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DataError) as exc:
        load_bag_dataset(corrupt, mapping())
    _one_line(exc, "corrupt", "re-record")
    truncated = tmp_path / "truncated"
    shutil.copytree(bags["mcap"], truncated)
    mcap = next(truncated.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    with pytest.raises(DataError) as exc:
        load_bag_dataset(truncated, mapping())
    _one_line(exc, str(truncated))


def test_missing_topic_and_unknown_joint(bags):
    with pytest.raises(DataError) as exc:
        load_bag_dataset(bags["mcap"], mapping(joint_states_topic="/robot/joint_states"))
    _one_line(exc, "/robot/joint_states", "not in the bag", "/joint_states")
    with pytest.raises(DataError) as exc:
        load_bag_dataset(bags["sqlite3"], mapping(servo_joints=["trolley_joint"]))
    _one_line(exc, "trolley_joint", "not found", "cart_joint")


def test_no_overlap_and_too_few_samples(tmp_path):
    trial = crane_trials()[0]
    stamps = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    with BagWriter(tmp_path / "late", "sqlite3") as w:
        w.joint_states("/joint_states", stamps, trial.coordinate_names, trial.q, trial.qd, trial.Q)
        w.joint_trajectory(
            "/servo_commands",
            stamps + 3_600 * 10**9,
            trial.servo_joints,
            trial.q[:, 1:],
            trial.qd[:, 1:],
            trial.qdd[:, 1:],
        )
    with pytest.raises(DataError) as exc:
        load_bag_dataset(tmp_path / "late", mapping())
    _one_line(exc, "/servo_commands", "no data overlapping")
    with BagWriter(tmp_path / "short", "mcap") as w:
        w.joint_states("/joint_states", stamps[:20], trial.coordinate_names, trial.q[:20], trial.qd[:20])
    with pytest.raises(DataError) as exc:
        load_bag_dataset(tmp_path / "short", mapping(servo_topic=""))
    _one_line(exc, "too few samples", "min_samples")


def test_bad_mapping_config(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("bag:\n  free_joints: [pendulum_joint]\n  joint_state_topic: /js\n")
    with pytest.raises(ConfigError, match=r"unknown bag setting.*joint_state_topic"):
        BagMapping.from_yaml(cfg)
    cfg.write_text("bag:\n  free_joints: [pendulum_joint]\n  savgol_window: eleven\n")
    with pytest.raises(ConfigError, match="savgol_window"):
        BagMapping.from_yaml(cfg)


def test_cli_exit_code_2_on_bad_bag(tmp_path, capsys, bags):
    pytest.importorskip("torch")
    code = main(
        ["train", "--bag", str(tmp_path / "missing_bag"), "--epochs", "1", "--out", str(tmp_path / "m.onnx")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "missing_bag" in err[0]
    code = main(
        [
            "train",
            "--bag",
            str(bags["mcap"]),
            "--free-joints",
            "bob_joint",
            "--epochs",
            "1",
            "--out",
            str(tmp_path / "m.onnx"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "bob_joint" in err[-1]
    assert not (tmp_path / "m.onnx").exists()


def test_config_without_bag_section(tmp_path):
    cfg = tmp_path / "ros_params.yaml"
    cfg.write_text("servo_lnn:\n  ros__parameters:\n    rate_hz: 100.0\n")
    with pytest.raises(ConfigError, match="no 'bag:' section"):
        BagMapping.from_yaml(cfg)
    cfg.write_text(
        "servo_lnn:\n  ros__parameters: {}\nbag:\n  free_joints: [pendulum_joint]\n"
        "  servo_joints: [cart_joint]\n  servo_topic: ''\n"
    )
    m = BagMapping.from_yaml(cfg, {"savgol_window": 7})
    assert m.servo_topic == "" and m.savgol_window == 7 and m.free_joints == ("pendulum_joint",)


def test_undecodable_message(tmp_path):
    trial = crane_trials()[0]
    stamps = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    with BagWriter(tmp_path / "garbage", "mcap") as w:
        w.joint_states("/joint_states", stamps, trial.coordinate_names, trial.q, trial.qd)
        w.streams[0][3][5] = b"\x00\x01\x00\x00" + b"\xff" * 40  # one damaged message
    with pytest.raises(DataError) as exc:
        load_bag_dataset(tmp_path / "garbage", mapping(servo_topic=""))
    _one_line(exc, "/joint_states", "undecodable", "corrupt")


def test_topic_without_messages(tmp_path):
    trial = crane_trials()[0]
    with BagWriter(tmp_path / "empty", "sqlite3") as w:
        w.joint_states("/joint_states", np.zeros(0, dtype=np.int64), trial.coordinate_names, np.zeros((0, 2)))
    with pytest.raises(DataError) as exc:
        load_bag_dataset(tmp_path / "empty", mapping(servo_topic=""))
    _one_line(exc, "/joint_states holds no messages")


def test_joint_lists_of_the_wrong_type_and_an_all_nan_bag(tmp_path):
    """free_joints: 5 in a mapping, and a bag whose joint states are all NaN: one-line errors, not a
    TypeError or an IndexError."""
    cfg = tmp_path / "five.yaml"
    cfg.write_text("bag:\n  free_joints: 5\n")
    with pytest.raises(ConfigError) as exc:
        BagMapping.from_yaml(cfg)
    _one_line(exc, "bag.free_joints = 5", "list of joint names")
    trial = crane_trials()[0]
    stamps = START_NS + np.round(trial.t * 1e9).astype(np.int64)
    with BagWriter(tmp_path / "nan", "mcap") as w:
        w.joint_states(
            "/joint_states",
            stamps,
            trial.coordinate_names,
            np.full_like(trial.q, np.nan),
            np.full_like(trial.qd, np.nan),
        )
    with pytest.raises(DataError) as exc:
        load_bag_dataset(tmp_path / "nan", mapping(servo_topic=""))
    _one_line(exc, "/joint_states", "NaN or inf positions")
