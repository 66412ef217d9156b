"""Simulated trials -> real rosbag2 files (sqlite3 and mcap) -> trials again."""

import json
import sqlite3

import numpy as np
import pytest
import yaml

from bag_helpers import RATE_HZ, crane_trials, mapping
from ros_lnn.bags import cdr
from ros_lnn.bags.dataset import load_bag_dataset
from ros_lnn.bags.writer import BagWriter, write_trials_bag

rosbags = pytest.importorskip("rosbags")

# Savitzky–Golay q̈_f (window 11, order 3, 200 Hz) against the simulator's exact accelerations:
# measured 1.2e-6 to 4.5e-6 relative RMS and at most 1.1e-4 rad/s² (trial edges) on these trials
# (noise-free; ros-lnn bench ingest tabulates windows, orders and noise); asserted with margin.
SAVGOL_REL_RMS = 1e-5
SAVGOL_MAX_ABS = 5e-4  # rad/s²


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _assert_measured_trials_match(ds, trials):
    assert [t.name for t in ds.trials] == [t.name for t in trials]
    for got, ref, exact in zip(ds.trials, trials, ds.truth):
        assert got.coordinate_names == ref.coordinate_names
        assert np.array_equal(got.q, ref.q) and np.array_equal(got.qd, ref.qd)
        assert np.max(np.abs(got.t - (ref.t - ref.t[0]))) < 1e-9
        assert np.array_equal(got.Q_e, ref.Q_e)  # measured servo effort, exact
        assert np.array_equal(got.qdd[:, 1], ref.qdd[:, 1])  # servo command accelerations, exact
        err = got.qdd[:, 0] - ref.qdd[:, 0]  # Savitzky–Golay on q̇_f
        assert np.sqrt(np.mean(err**2)) < SAVGOL_REL_RMS * np.sqrt(np.mean(ref.qdd[:, 0] ** 2))
        assert np.max(np.abs(err)) < SAVGOL_MAX_ABS
        assert np.isnan(got.E).all() and np.isnan(got.M).all()  # not measurable on a robot
        for key in ("qdd", "Q", "T", "V", "E", "M"):
            assert np.array_equal(getattr(exact, key), getattr(ref, key)), key


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_trials_roundtrip_through_bag(tmp_path, storage):
    trials = crane_trials()
    bag = write_trials_bag(tmp_path / "crane", trials, storage)
    ds = load_bag_dataset(bag, mapping())
    _assert_measured_trials_match(ds, trials)
    s = ds.summary
    assert s["streams"]["/joint_states"]["messages"] == sum(len(t) for t in trials)
    assert s["gaps_s"] == [pytest.approx(1.0, abs=0.01)] * 2
    assert s["Q_e_measured"] and s["skipped_topics"] == {}
    assert all(abs(i["rate_hz"] - RATE_HZ) < 1e-6 and not i["resampled"] for i in s["trials"])
    assert len(s["split"]["validation"]) == 1 and len(s["split"]["train"]) == 2
    assert set(s["split"]["train"]).isdisjoint(s["split"]["validation"])
    assert len(s["bags"][0]["sha256"]) == 64


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_bag_is_standard_rosbag2(tmp_path, storage):
    """Independent check with rosbags' high-level reader: topics, types, message contents."""
    from rosbags.highlevel import AnyReader

    trials = crane_trials()[:1]
    bag = write_trials_bag(tmp_path / "one", trials, storage)
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 9 and meta["storage_identifier"] == storage
    assert meta["relative_file_paths"] == [f"one.{'db3' if storage == 'sqlite3' else 'mcap'}"]
    assert json.loads(meta["custom_data"]["ros_lnn.trials"])[0]["name"] == trials[0].name
    with AnyReader([bag]) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        assert types == {
            "/joint_states": cdr.JOINT_STATE,
            "/servo_commands": cdr.JOINT_TRAJECTORY,
            "/ground_truth": cdr.FLOAT64_ARRAY,
        }
        msgs = {}
        for conn, stamp, raw in reader.messages():
            msgs.setdefault(conn.topic, []).append((stamp, reader.deserialize(raw, conn.msgtype)))
    k = 17
    stamp, js = msgs["/joint_states"][k]
    assert js.name == ["pendulum_joint", "cart_joint"]
    assert np.array_equal(js.position, trials[0].q[k]) and np.array_equal(js.effort, trials[0].Q[k])
    assert stamp == js.header.stamp.sec * 10**9 + js.header.stamp.nanosec
    _, cmd = msgs["/servo_commands"][k]
    assert cmd.joint_names == ["cart_joint"]
    assert cmd.points[0].accelerations[0] == trials[0].qdd[k, 1]
    _, gt = msgs["/ground_truth"][k]
    labels = gt.layout.dim[0].label.split(",")
    assert labels[:3] == ["t", "qdd:pendulum_joint", "qdd:cart_joint"]
    assert gt.data[labels.index("E")] == trials[0].E[k]


def test_cdr_codec_matches_rosbags():
    """The vectorised decoder reads what rosbags serialises, layout by layout (named, nameless,
    empty arrays, other frame ids), and the encoder writes byte for byte what rosbags writes."""
    store = _typestore()
    T = store.types
    rng = np.random.default_rng(1)
    header = lambda k, frame: T["std_msgs/msg/Header"](  # noqa: E731
        stamp=T["builtin_interfaces/msg/Time"](sec=1_700_000_000 + k, nanosec=997 * k), frame_id=frame
    )
    raws, msgs = [], []
    for k in range(120):
        n = k % 3
        msg = T[cdr.JOINT_STATE](
            header=header(k, "base"[: k % 4]),
            name=["a", "bb", "ccc"][:n] if k % 5 else [],
            position=rng.normal(size=n),
            velocity=rng.normal(size=n * (k % 2)),
            effort=rng.normal(size=n),
        )
        msgs.append(msg)
        raws.append(bytes(store.serialize_cdr(msg, cdr.JOINT_STATE)))
    groups = cdr.decode_messages(raws, cdr.JOINT_STATE)
    assert sum(len(g.index) for g in groups) == len(raws)
    for g in groups:
        for row, i in enumerate(g.index):
            m = msgs[i]
            assert g.stamp_ns[row] == m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            assert g.layout.key == (m.header.frame_id, tuple(m.name))
            for f in ("position", "velocity", "effort"):
                assert np.array_equal(g.arrays[f][row], getattr(m, f))
    # encoder: JointTrajectory, byte-identical to rosbags
    point = T["trajectory_msgs/msg/JointTrajectoryPoint"](
        positions=np.zeros(2),
        velocities=np.zeros(2),
        accelerations=np.zeros(2),
        effort=np.zeros(0),
        time_from_start=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
    )
    template = bytes(
        store.serialize_cdr(
            T[cdr.JOINT_TRAJECTORY](header=header(0, ""), joint_names=["x", "y"], points=[point]),
            cdr.JOINT_TRAJECTORY,
        )
    )
    stamps = np.array([1_700_000_000_123_456_789, 42])
    P = rng.normal(size=(2, 2))
    out = cdr.encode_messages(template, cdr.JOINT_TRAJECTORY, stamps, {"positions": P, "accelerations": -P})
    for k in range(2):
        point = T["trajectory_msgs/msg/JointTrajectoryPoint"](
            positions=P[k],
            velocities=np.zeros(2),
            accelerations=-P[k],
            effort=np.zeros(0),
            time_from_start=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
        )
        ref = T[cdr.JOINT_TRAJECTORY](
            header=T["std_msgs/msg/Header"](
                stamp=T["builtin_interfaces/msg/Time"](
                    sec=int(stamps[k] // 10**9), nanosec=int(stamps[k] % 10**9)
                ),
                frame_id="",
            ),
            joint_names=["x", "y"],
            points=[point],
        )
        assert out[k] == bytes(store.serialize_cdr(ref, cdr.JOINT_TRAJECTORY))


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_single_storage_file_and_topics_without_slash(tmp_path, storage):
    trials = crane_trials()
    bag = write_trials_bag(
        tmp_path / "b", trials, storage, joint_states_topic="joint_states", servo_topic="servo_commands"
    )
    storage_file = next(p for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))
    ds = load_bag_dataset(
        storage_file, mapping(joint_states_topic="/joint_states", servo_topic="servo_commands")
    )
    # a bare storage file has no metadata.yaml (no trial names) but the same data
    assert [len(t) for t in ds.trials] == [len(t) for t in trials]
    for got, ref in zip(ds.trials, trials):
        assert np.array_equal(got.q, ref.q)


def test_float64_servo_commands_and_other_topics_skipped(tmp_path):
    trials = crane_trials()[:2]
    path = tmp_path / "f64"
    write_trials_bag(path, trials, "sqlite3", servo_type=cdr.FLOAT64_ARRAY, efforts="none")
    with pytest.warns(UserWarning, match="/servo_commands.*no header; aligned by bag receive time"):
        ds = load_bag_dataset(path, mapping(servo_type="Float64MultiArray"))
    for got, ref in zip(ds.trials, trials):
        assert np.array_equal(got.qdd[:, 1], ref.qdd[:, 1])
        assert np.isnan(got.Q_e).all() and (got.Q_f == 0).all()  # efforts not recorded; free = unactuated
    assert ds.summary["Q_e_measured"] is False
    # a bag with a topic of an unrelated type: listed as skipped, not fatal
    other = tmp_path / "other"
    with BagWriter(other, "mcap") as w:
        tr = trials[0]
        stamps = 10**18 + np.round(tr.t * 1e9).astype(np.int64)
        w.joint_states("/joint_states", stamps, tr.coordinate_names, tr.q, tr.qd, tr.Q)
        store = w.store
        text = bytes(
            store.serialize_cdr(store.types["std_msgs/msg/String"](data="hello"), "std_msgs/msg/String")
        )
        w.raw("/rosout_like", "std_msgs/msg/String", stamps[:5], [text] * 5)
    with pytest.warns(UserWarning, match="one trial only"):
        ds = load_bag_dataset(other, mapping(servo_topic=""))
    assert ds.summary["skipped_topics"] == {"/rosout_like": "std_msgs/msg/String"}
    # one trial only: chopped into contiguous pieces so that validation has a trial of its own
    assert len(ds.trials) == 4 and len(ds.validation) == 1
    assert np.array_equal(np.concatenate([t.q for t in ds.trials]), tr.q)


def _older_metadata(bag, version):
    """Rewrite the metadata of a rosbags-written bag to an older version: 7 (Iron: no ros_distro),
    5 (Humble: no type hashes, no custom data)."""
    meta_path = bag / "metadata.yaml"
    doc = yaml.safe_load(meta_path.read_text())
    info = doc["rosbag2_bagfile_information"]
    info["version"] = version
    info.pop("ros_distro", None)
    if version < 6:
        info.pop("custom_data", None)
    for topic in info["topics_with_message_count"]:
        if version < 7:
            topic["topic_metadata"].pop("type_description_hash", None)
        topic["topic_metadata"]["offered_qos_profiles"] = ""
    meta_path.write_text(yaml.safe_dump(doc))


def _make_humble(bag):
    """What ROS 2 Humble writes: metadata version 5, sqlite schema 3 without message_definitions."""
    _older_metadata(bag, 5)
    db = next(bag.glob("*.db3"))
    with sqlite3.connect(db) as conn:
        conn.executescript(
            "DROP TABLE message_definitions; ALTER TABLE topics DROP COLUMN type_description_hash;"
            "DROP TABLE metadata; UPDATE schema SET schema_version = 3;"
        )


def test_humble_iron_jazzy_metadata_versions(tmp_path):
    trials = crane_trials()
    v8 = write_trials_bag(tmp_path / "jazzy", trials, "mcap", version=8)
    iron = write_trials_bag(tmp_path / "iron", trials, "mcap")
    _older_metadata(iron, 7)
    humble = write_trials_bag(tmp_path / "humble", trials, "sqlite3")
    _make_humble(humble)
    for bag in (v8, iron, humble):
        ds = load_bag_dataset(bag, mapping())
        assert [len(t) for t in ds.trials] == [len(t) for t in trials]
        for got, ref in zip(ds.trials, trials):
            assert np.array_equal(got.q, ref.q) and np.array_equal(got.Q_e, ref.Q_e)


def test_several_bags_make_one_dataset(tmp_path):
    trials = crane_trials()
    a = write_trials_bag(tmp_path / "a", trials[:2], "sqlite3")
    b = write_trials_bag(tmp_path / "b", trials[2:], "mcap")
    ds = load_bag_dataset([a, b], mapping())
    assert [t.name for t in ds.trials] == [t.name for t in trials]
    assert [x["path"] for x in ds.summary["bags"]] == [str(a), str(b)]
    assert ds.summary["streams"]["/joint_states"]["messages"] == sum(len(t) for t in trials)
    assert {t.attrs["bag"] for t in ds.trials} == {str(a), str(b)}


@pytest.mark.parametrize(
    "storage,compression",
    [("sqlite3", "message"), ("sqlite3", "file"), ("mcap", "storage"), ("mcap", "message")],
)
def test_compressed_bags(tmp_path, storage, compression):
    trials = crane_trials()
    bag = write_trials_bag(tmp_path / "z", trials, storage, compression=compression)
    ds = load_bag_dataset(bag, mapping())
    for got, ref in zip(ds.trials, trials):
        assert np.array_equal(got.q, ref.q) and np.array_equal(got.qdd[:, 1], ref.qdd[:, 1])
