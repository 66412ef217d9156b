"""A bag whose writer died (ros_lnn.bags.live, ros_lnn.bags.recovery): a real process writes and is
killed by SIGKILL; plain rosbags leaves nothing readable, the live writer everything it flushed,
which ``reindex`` makes a bag again (sqlite3 and mcap). An MCAP cut at any byte recovers to a prefix."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap

import pytest

from ros_lnn.bags.recovery import reindex
from ros_lnn.errors import DataError

pytest.importorskip("rosbags")

#: A writer process: N messages (position = its index), flushed after FLUSHED of them, then killed.
WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from rosbags.typesys import Stores, get_typestore
    storage, out, live = sys.argv[1], sys.argv[2], sys.argv[3] == "live"
    total, flushed = int(sys.argv[4]), int(sys.argv[5])
    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    kind = "sensor_msgs/msg/JointState"
    if live:
        from ros_lnn.bags.live import LiveBagWriter
        writer = LiveBagWriter(out, storage)
    else:
        from rosbags.rosbag2 import StoragePlugin, Writer
        writer = Writer(out, version=9, storage_plugin=StoragePlugin[storage.upper()])
    writer.open()
    conn = writer.add_connection("/joint_states", kind, typestore=store)
    stamp = types["builtin_interfaces/msg/Time"](sec=0, nanosec=0)
    header = types["std_msgs/msg/Header"](stamp=stamp, frame_id="")
    empty = np.zeros(0)
    for k in range(total):
        position = np.array([float(k)])
        msg = types[kind](header=header, name=["a"], position=position, velocity=empty, effort=empty)
        writer.write(conn, 1_000 + k, bytes(store.serialize_cdr(msg, kind)))
        if live and k + 1 == flushed:
            writer.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _killed_writer(tmp_path, storage: str, live: bool, total: int = 3000, flushed: int = 2000):
    out = tmp_path / f"{storage}_{'live' if live else 'plain'}"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            WRITER,
            storage,
            str(out),
            "live" if live else "plain",
            str(total),
            str(flushed),
        ],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (out / "metadata.yaml").exists()
    return out


def _positions(bag) -> list:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    with Reader(bag) as reader:
        return [store.deserialize_cdr(raw, c.msgtype).position[0] for c, _, raw in reader.messages()]


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_killed_writer_leaves_everything_it_flushed_and_reindex_makes_it_a_bag(tmp_path, storage):
    plain = _killed_writer(tmp_path, storage, live=False)
    try:
        lost = sum(reindex(plain).values())  # plain rosbags: one transaction, or an MCAP not yet written
    except DataError:
        lost = 0
    assert lost == 0
    live = _killed_writer(tmp_path, storage, live=True)
    counts = reindex(live)
    assert counts == {"/joint_states": 2000}  # the 1000 after the flush were never on disk
    assert _positions(live) == [float(k) for k in range(2000)]
    from ros_lnn.bags.reader import open_bag

    reader = open_bag(live)  # the dataset reader takes the recovered bag as any other
    try:
        assert reader.message_count == 2000
    finally:
        reader.close()
    assert reindex(live) == counts  # again: a complete bag stays as it is


def test_an_mcap_cut_at_any_byte_recovers_to_the_messages_of_its_whole_chunks(tmp_path):
    """Chunks of 100 messages (a flush each); the file cut at every 97th byte: the recovered bag holds
    exactly the messages of the chunks that end before the cut, in order."""
    import shutil

    from ros_lnn.bags.live import LiveBagWriter
    from ros_lnn.bags.recovery import mcap_records, storage_file

    out = tmp_path / "chunks"
    writer = LiveBagWriter(out, "mcap")
    writer.open()
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    conn = writer.add_connection("/values", "std_msgs/msg/Float64", typestore=store)
    kind = "std_msgs/msg/Float64"
    for k in range(500):
        writer.write(conn, 1_000 + k, bytes(store.serialize_cdr(store.types[kind](data=k), kind)))
        if (k + 1) % 100 == 0:
            writer.flush()
    writer._abandon()
    whole = storage_file(out).read_bytes()
    ends, complete = mcap_records(storage_file(out))
    assert not complete and ends[-1] == len(whole)
    chunk_ends, at = [], 8  # where each chunk record (opcode 6, 100 messages each) ends, read here
    while at < len(whole):
        op, length = struct.unpack_from("<BQ", whole, at)
        at += 9 + length
        if op == 0x06:
            chunk_ends.append((at, 100 * (len(chunk_ends) + 1)))
    assert len(chunk_ends) == 5
    for cut in range(ends[1], len(whole), 97):  # from the end of the header record on
        bag = tmp_path / f"cut{cut}"
        bag.mkdir()
        (bag / "cut.mcap").write_bytes(whole[:cut])
        expected = max([n for end, n in chunk_ends if end <= cut], default=0)
        assert sum(reindex(bag).values()) == expected, cut
        from rosbags.rosbag2 import Reader

        with Reader(bag) as reader:
            values = [
                store.deserialize_cdr(raw, "std_msgs/msg/Float64").data for _, _, raw in reader.messages()
            ]
        assert values == [float(k) for k in range(expected)], cut
        shutil.rmtree(bag)


def test_reindex_says_what_it_cannot_take(tmp_path):
    with pytest.raises(DataError, match=r"no \.db3 or \.mcap file"):
        reindex(tmp_path)
    (tmp_path / "a.mcap").write_bytes(b"not an mcap file at all")
    with pytest.raises(DataError, match="not an MCAP file"):
        reindex(tmp_path)
    (tmp_path / "a.mcap").write_bytes(b"\x89MCAP0\r\n\x01\x20\x00")  # cut in its header record
    with pytest.raises(DataError, match="no whole record"):
        reindex(tmp_path)
    (tmp_path / "b.db3").write_bytes(b"")
    with pytest.raises(DataError, match="2 storage files"):
        reindex(tmp_path)
