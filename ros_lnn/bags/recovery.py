"""Recover a rosbag2 whose writer never closed it (killed, out of disk): what ``ros2 bag reindex`` does
for rosbag2, for the two storages :mod:`.live` writes.

* sqlite3: the database is opened for writing once: sqlite rolls back a transaction the writer left
  half done (its hot journal) or checkpoints a WAL, so that readers that open the file read-only
  and immutable (rosbags does) see exactly the committed messages;
* mcap: a file without its footer is cut after its last whole record (a chunk the writer was still
  writing is dropped) and ends with a data-end record and a footer without a summary: a valid MCAP
  that readers scan. On a full disk the cut goes back record by record until the 50-byte end fits.

Then metadata.yaml is written from what the storage file holds (topics, types, offered QoS, message
counts, start and duration), in rosbag2's version 9 format, atomically.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

from ..errors import DataError

MAGIC = b"\x89MCAP0\r\n"
_RECORD = struct.Struct("<BQ")
#: MCAP records of the summary section and the end: a file is cut before the first of them.
_END_OPS = {0x02, 0x0F}


def storage_file(bag) -> Path:
    """The one storage file (.db3 or .mcap) of the bag directory ``bag`` (or ``bag`` itself)."""
    bag = Path(bag)
    if bag.is_file():
        return bag
    files = sorted(p for p in bag.glob("*") if p.suffix in (".db3", ".mcap") and p.is_file())
    if len(files) != 1:
        what = (
            "no .db3 or .mcap file"
            if not files
            else f"{len(files)} storage files ({[f.name for f in files]})"
        )
        raise DataError(f"{bag}: {what}; reindex takes a bag directory with one storage file")
    return files[0]


def reindex(bag) -> dict:
    """Make the bag directory ``bag`` readable and write its metadata.yaml (module docstring); the
    message count per topic."""
    path = storage_file(bag)
    if path.suffix == ".db3":
        _settle_sqlite(path)
    else:
        _settle_mcap(path)
    return _write_metadata(Path(bag), path)


def _settle_sqlite(path: Path) -> None:
    import sqlite3

    try:
        conn = sqlite3.connect(str(path))
        try:
            conn.execute("SELECT COUNT(*) FROM messages").fetchone()  # a hot journal is rolled back here
            if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise DataError(
            f"{path}: the database cannot be settled ({exc}); free disk space and retry"
        ) from None


def mcap_records(path: Path) -> tuple[list[int], bool]:
    """(the offsets after each whole data record, whether the file already ends with a footer)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        if fh.read(8) != MAGIC:
            raise DataError(f"{path}: not an MCAP file (no magic at its start)")
        if size >= 8 + 37:
            fh.seek(size - 8)
            if fh.read(8) == MAGIC:
                return [size], True
        ends, pos = [8], 8
        while pos + _RECORD.size <= size:
            fh.seek(pos)
            op, length = _RECORD.unpack(fh.read(_RECORD.size))
            pos += _RECORD.size + length
            if op in _END_OPS or pos > size:
                break
            ends.append(pos)
    return ends, False


def _settle_mcap(path: Path) -> None:
    ends, complete = mcap_records(path)
    if complete:
        return
    if len(ends) < 2:
        raise DataError(f"{path}: no whole record after the MCAP magic: nothing to recover")
    tail = _RECORD.pack(0x0F, 4) + b"\0" * 4  # data end (no CRC)
    tail += _RECORD.pack(0x02, 20) + b"\0" * 20  # footer: no summary, no summary offsets, no CRC
    tail += MAGIC
    with path.open("r+b") as fh:
        for end in reversed(ends[1:]):  # never cut the header record
            try:
                fh.truncate(end)
                fh.seek(end)
                fh.write(tail)
                fh.flush()
                os.fsync(fh.fileno())
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
                    raise DataError(f"{path}: cannot end the file ({exc.strerror})") from None
    raise DataError(f"{path}: no room to end the file; free disk space and retry")


def _write_metadata(bag: Path, path: Path) -> dict:
    from typing import Any

    import yaml
    from rosbags.interfaces import ConnectionExtRosbag2
    from rosbags.rosbag2 import Reader
    from rosbags.rosbag2.errors import ReaderError
    from rosbags.rosbag2.metadata import dump_qos_v9

    try:
        with Reader(path) as reader:
            conns: list[Any] = [c for c in reader.connections if isinstance(c.ext, ConnectionExtRosbag2)]
            count, start, duration = reader.message_count, reader.start_time, reader.duration
    except (ReaderError, OSError) as exc:
        raise DataError(f"{path}: not readable after recovery ({exc})") from None
    start = start if count else 0
    info = {
        "version": 9,
        "storage_identifier": "sqlite3" if path.suffix == ".db3" else "mcap",
        "relative_file_paths": [path.name],
        "duration": {"nanoseconds": duration},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": count,
        "topics_with_message_count": [
            {
                "topic_metadata": {
                    "name": c.topic,
                    "type": c.msgtype,
                    "serialization_format": c.ext.serialization_format,
                    "offered_qos_profiles": dump_qos_v9(c.ext.offered_qos_profiles),
                    "type_description_hash": c.digest,
                },
                "message_count": c.msgcount,
            }
            for c in conns
        ],
        "compression_format": "",
        "compression_mode": "",
        "files": [
            {
                "path": path.name,
                "starting_time": {"nanoseconds_since_epoch": start},
                "duration": {"nanoseconds": duration},
                "message_count": count,
            }
        ],
        "custom_data": None,
        "ros_distro": "rosbags",
    }
    text = yaml.safe_dump({"rosbag2_bagfile_information": info}, default_flow_style=False, sort_keys=False)
    if bag.is_dir():
        from ..files import write_atomically

        write_atomically(bag / "metadata.yaml", text.encode())
    counts: dict = {}
    for c in conns:
        counts[c.topic] = counts.get(c.topic, 0) + c.msgcount
    return counts
