"""Bulk fetch of one topic's raw messages straight from the storage files that ``rosbags`` opened:
one SQL query per sqlite3 file, a tight record scan per MCAP chunk. ``rosbags``' per-message
generators (connection matching, heap merge of chunks) cost more than decoding the messages does.
Anything unusual (per-message compression, unindexed MCAP, other storage types) returns None and the
caller falls back to ``rosbags``' own iteration.

This reads ``rosbags`` internals (``dbconn``, ``chunks``, byte offsets), so setup.py pins rosbags to the
versions it is tested with. Measured against the public ``Reader.messages`` on 200 000 JointState
messages: 3.3x faster for MCAP, 1.3x for sqlite3 (identical arrays)."""

from __future__ import annotations

import struct

import numpy as np

_RECORD = struct.Struct("<BQ")
_MESSAGE = struct.Struct("<HIQ")  # channel id, sequence, log time (publish time follows)


def _storages(reader):
    from rosbags.rosbag2.reader import DirectoryReader

    storage = reader.storage
    if isinstance(storage, DirectoryReader):
        if storage.metadata.compression_mode == "message":
            return None
        return list(storage.storages)
    return [storage]


def _sqlite(storage, ids):
    query = f"SELECT timestamp, data FROM messages WHERE topic_id IN ({','.join('?' * len(ids))})"
    rows = storage.dbconn.execute(query, ids).fetchall()
    recv = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return recv, [r[1] for r in rows]


def _mcap(storage, ids):
    from rosbags.rosbag2.storage_mcap import decompress

    wanted, recv, raws = set(ids), [], []
    bio = storage.bio
    for chunk in storage.chunks:
        if not any(chunk.channel_count.get(cid, 0) for cid in wanted):
            continue
        bio.seek(chunk.chunk_start_offset + 9 + 24)
        (crc,) = struct.unpack("<I", bio.read(4))
        bio.seek(chunk.chunk_start_offset + 9 + 40 + len(chunk.compression))
        buf = decompress(bio.read(chunk.compressed_size), chunk.compression, chunk.uncompressed_size, crc)
        pos, end = 0, len(buf)
        while pos < end:
            op, size = _RECORD.unpack_from(buf, pos)
            body = pos + 9
            if op == 0x05:
                cid, _, log_time = _MESSAGE.unpack_from(buf, body)
                if cid in wanted:
                    recv.append(log_time)
                    raws.append(buf[body + 22 : body + size])
            pos = body + size
    return np.array(recv, dtype=np.int64), raws


def fetch_topic(reader, topic: str, normalise):
    """``(receive ns, raws)`` of every message on ``topic`` in receive-time order, or None when the
    fast path does not apply."""
    from rosbags.rosbag2.storage_mcap import McapReader
    from rosbags.rosbag2.storage_sqlite3 import Sqlite3Reader

    storages = _storages(reader)
    if storages is None:
        return None
    recvs, raws = [], []
    for storage in storages:
        ids = [c.id for c in storage.connections if normalise(c.topic) == topic]
        if not ids:
            continue
        if isinstance(storage, Sqlite3Reader) and storage.dbconn is not None:
            r, m = _sqlite(storage, ids)
        elif isinstance(storage, McapReader) and storage.chunks and storage.bio is not None:
            r, m = _mcap(storage, ids)
        else:
            return None
        recvs.append(r)
        raws += m
    if not recvs:
        return np.zeros(0, dtype=np.int64), []
    recv = np.concatenate(recvs)
    order = np.argsort(recv, kind="stable")
    if np.any(np.diff(order) != 1):
        raws = [raws[i] for i in order]
        recv = recv[order]
    return recv, raws
