"""A rosbag2 written live that survives its writer: flushed at a bounded interval, finished as far as
it can be on a write error (a full disk), recoverable after a crash (:mod:`.recovery`).

rosbags' writers keep everything since ``open`` in one sqlite transaction, or in an MCAP file whose
index and footer come at ``close``: a recorder killed by SIGKILL (or the OOM killer, or a power cut)
leaves nothing readable (5 000 messages written, 0 readable, for both). :class:`LiveBagWriter` wraps
``rosbags.rosbag2.Writer`` (its storage internals: setup.py pins the versions) and flushes it (:meth:`flush`):

* sqlite3: every flush commits the messages written since the last one (sqlite's own rollback
  journal, ``synchronous=FULL``: the commit is on the disk when it returns). Not rosbag2's
  ``resilient`` WAL: the readers here open the file read-only and immutable, and see nothing of a WAL
  that could not be checkpointed (a full disk); a rollback journal leaves every commit in the file;
* mcap: every flush closes the open chunk (with its message index), writes and syncs the file: it
  ends with whole records only.

A SIGKILL loses what came after the last flush (the recorder flushes every second: at most the last
second of messages) and leaves no metadata.yaml: :func:`ros_lnn.bags.recovery.reindex` rebuilds it
(``ros-lnn reindex``). A write that fails (ENOSPC, EFBIG, EIO) stops the writer: :meth:`finish` keeps
what was flushed (sqlite rolls the failed transaction back) and reindexes the bag in place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import DataError

STORAGES = ("sqlite3", "mcap")


class LiveBagWriter:
    """``rosbags.rosbag2.Writer`` with :meth:`flush` and :meth:`finish` (module docstring)."""

    def __init__(self, path, storage: str = "sqlite3"):
        from rosbags.rosbag2 import StoragePlugin, Writer

        if storage not in STORAGES:
            raise DataError(f"storage '{storage}' is not supported; choose one of {', '.join(STORAGES)}")
        self.path, self.storage = Path(path), storage
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.writer = Writer(self.path, version=9, storage_plugin=plugin)
        self.written = 0  # messages handed to the storage
        self.flushed = 0  # of which on disk (as of the last flush)
        self.error: BaseException | None = None  # the write error that stopped the writer

    def open(self) -> None:
        from rosbags.rosbag2.errors import WriterError

        try:
            self.writer.open()
        except (WriterError, OSError) as exc:
            raise DataError(f"{self.path}: cannot create the bag ({exc})") from None
        if self.storage == "sqlite3":
            self._store.conn.execute("PRAGMA synchronous=FULL")

    @property
    def _store(self) -> Any:
        """rosbags' storage writer (its sqlite connection, or its MCAP file and chunk)."""
        return self.writer.storage

    def add_connection(self, topic: str, msgtype: str, **kwargs):
        return self.writer.add_connection(topic, msgtype, **kwargs)

    def write(self, connection, timestamp: int, raw) -> bool:
        """One message; False (and nothing written from then on) once a write failed."""
        if self.error is not None:
            return False
        try:
            self.writer.write(connection, timestamp, raw)
        except Exception as exc:  # noqa: BLE001 - OSError, sqlite3.Error: the disk refused; stop, keep the rest
            self.error = exc
            return False
        self.written += 1
        return True

    def flush(self) -> bool:
        """Everything written so far onto the disk (module docstring); False once a write failed."""
        if self.error is not None:
            return False
        try:
            storage = self._store
            if self.storage == "sqlite3":
                storage.conn.commit()
            else:
                if storage.chunk.msgs:
                    storage.close_chunk()
                storage.bio.flush()
                os.fsync(storage.bio.fileno())
        except Exception as exc:  # noqa: BLE001 - as write(): the disk refused
            self.error = exc
            return False
        self.flushed = self.written
        return True

    def finish(self) -> dict:
        """Close the bag: metadata.yaml written (a complete bag); after a write error, the flushed part
        kept and reindexed where the disk allows. Returns ``{"messages": n, "lost": m}`` (m: written
        after the last flush and not kept)."""
        if self.error is None and self.flush():
            try:
                self.writer.close()
                return {"messages": self.written, "lost": 0}
            except Exception as exc:  # noqa: BLE001 - the disk refused the close: recover below
                self.error = exc
        self._abandon()
        from .recovery import reindex

        try:
            kept = sum(reindex(self.path).values())
        except (DataError, OSError):
            kept = self.flushed  # what the storage holds; metadata.yaml must wait for space
        return {"messages": kept, "lost": self.written - kept}

    def _abandon(self) -> None:
        """Drop the storage's unflushed part and close its file without an index."""
        storage, self.writer.storage = self._store, None
        if storage is None:
            return
        try:
            if self.storage == "sqlite3":
                storage.conn.rollback()
                storage.conn.close()
            else:
                storage.bio.close()
        except Exception:  # noqa: BLE001 - a file the disk refuses may not close cleanly either
            pass
