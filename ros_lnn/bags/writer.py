"""Write rosbag2 recordings (sqlite3 or mcap) with the topics a robot records, from arrays or trials.

Topics of :func:`write_trials_bag` (types are standard ROS 2 messages):

* ``/joint_states`` sensor_msgs/msg/JointState — ``name`` = all coordinates, ``position`` = q,
  ``velocity`` = q̇, ``effort`` = Q (free joints: the applied Q_f; servo joints: the servo motor
  effort Q_e). ``efforts="servo"`` writes NaN on the free joints, ``"none"`` leaves ``effort`` empty.
* ``/servo_commands`` trajectory_msgs/msg/JointTrajectory — ``joint_names`` = servo joints, one
  point with positions / velocities / accelerations = q_e, q̇_e, q̈_e (``servo_type`` may pick
  std_msgs/msg/Float64MultiArray instead: data = [q_e..., q̇_e..., q̈_e...]).
* ``/ground_truth`` std_msgs/msg/Float64MultiArray — exact simulator values, one message per sample;
  ``layout.dim[0].label`` names the entries, comma-separated:
  ``t,qdd:<joint>...,Q:<joint>...,T,V,E,M:<row joint>:<col joint>...`` (``t`` = sample time in the
  trial, s). Float64MultiArray has no header, so its bag receive time equals the sample's stamp.

Trials follow one another on the bag clock separated by ``gap_s`` seconds of silence (that is how the
reader tells them apart); their names and partition go into the bag's ``custom_data`` under
``ros_lnn.trials`` (JSON). Every message's bag receive time equals its header stamp.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from ..errors import DataError
from . import cdr

START_NS = 1_700_000_000 * 1_000_000_000  # a fixed, plausible wall-clock start (reproducible bags)
GROUND_TRUTH_TOPIC = "/ground_truth"
TRIALS_KEY = "ros_lnn.trials"
STORAGES = ("sqlite3", "mcap")


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


class BagWriter:
    """Collects vectorised streams and writes them, interleaved in receive-time order, on ``close``.

    The bag is built in a sibling temporary directory and renamed into place, so ``path`` either does
    not exist or holds a complete bag."""

    def __init__(self, path, storage: str = "sqlite3", version: int = 9, compression: str = ""):
        if storage not in STORAGES:
            raise DataError(f"storage '{storage}' is not supported; choose one of {', '.join(STORAGES)}")
        if compression not in ("", "file", "message", "storage") or (
            compression == "storage" and storage != "mcap"
        ):
            raise DataError(
                f"compression '{compression}' is not supported with {storage} "
                "(file, message; storage for mcap only)"
            )
        self.compression = compression
        self.path = Path(path)
        if self.path.exists():
            raise DataError(f"{self.path} exists already; remove it or choose another bag path")
        self.storage, self.version = storage, version
        self.store = _typestore()
        self.streams: list[tuple[str, str, np.ndarray, list[bytes]]] = []  # (topic, msgtype, recv_ns, raws)
        self.custom: dict[str, str] = {}

    def _template(self, msgtype, **fields):
        return bytes(self.store.serialize_cdr(self.store.types[msgtype](**fields), msgtype))

    def _header(self, frame_id=""):
        t = self.store.types
        return t["std_msgs/msg/Header"](
            stamp=t["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=frame_id
        )

    def raw(self, topic, msgtype, recv_ns, raws):
        """Messages already serialised; a ``msgtype`` unknown to ROS 2's standard types is written
        without a message definition (a custom type whose package the training machine lacks)."""
        recv_ns = np.asarray(recv_ns, dtype=np.int64)
        if len(recv_ns) != len(raws):
            raise ValueError("one receive time per message")
        self.streams.append((topic, msgtype, recv_ns, list(raws)))

    def joint_states(
        self, topic, stamp_ns, names, position, velocity=None, effort=None, *, recv_ns=None, frame_id=""
    ):
        """One JointState per row; ``velocity``/``effort`` None leave those arrays empty; ``names``
        may be empty (as some drivers publish), the arrays keep their width."""
        count, position = len(stamp_ns), np.asarray(position, dtype=float)
        n = position.shape[1] if position.ndim == 2 else 1
        values = {"position": position, "velocity": velocity, "effort": effort}
        sizes = {k: (n if v is not None else 0) for k, v in values.items()}
        template = self._template(
            cdr.JOINT_STATE,
            header=self._header(frame_id),
            name=list(names),
            **{k: np.zeros(s) for k, s in sizes.items()},
        )
        arrays = {k: np.asarray(v, dtype=float).reshape(count, n) for k, v in values.items() if v is not None}
        raws = cdr.encode_messages(template, cdr.JOINT_STATE, stamp_ns, arrays)
        self.raw(topic, cdr.JOINT_STATE, stamp_ns if recv_ns is None else recv_ns, raws)

    def joint_trajectory(
        self,
        topic,
        stamp_ns,
        names,
        positions,
        velocities=None,
        accelerations=None,
        *,
        recv_ns=None,
        frame_id="",
    ):
        """One single-point JointTrajectory per row (time_from_start 0: the command for now)."""
        t, count, positions = self.store.types, len(stamp_ns), np.asarray(positions, dtype=float)
        n = positions.shape[1] if positions.ndim == 2 else 1
        values = {"positions": positions, "velocities": velocities, "accelerations": accelerations}
        point = t["trajectory_msgs/msg/JointTrajectoryPoint"](
            **{k: np.zeros(n if v is not None else 0) for k, v in values.items()},
            effort=np.zeros(0),
            time_from_start=t["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
        )
        template = self._template(
            cdr.JOINT_TRAJECTORY, header=self._header(frame_id), joint_names=list(names), points=[point]
        )
        arrays = {k: np.asarray(v, dtype=float).reshape(count, n) for k, v in values.items() if v is not None}
        raws = cdr.encode_messages(template, cdr.JOINT_TRAJECTORY, stamp_ns, arrays)
        self.raw(topic, cdr.JOINT_TRAJECTORY, stamp_ns if recv_ns is None else recv_ns, raws)

    def float64_array(self, topic, recv_ns, labels, data):
        """Float64MultiArray rows with ``layout.dim[0]`` = (comma-joined labels, size, size)."""
        t = self.store.types
        data = np.asarray(data, dtype=float)
        size = data.shape[1]
        if labels is not None and len(labels) != size:
            raise ValueError("one label per column")
        label = ",".join(labels) if labels is not None else ""
        layout = t["std_msgs/msg/MultiArrayLayout"](
            dim=[t["std_msgs/msg/MultiArrayDimension"](label=label, size=size, stride=size)], data_offset=0
        )
        template = self._template(cdr.FLOAT64_ARRAY, layout=layout, data=np.zeros(size))
        raws = cdr.encode_messages(template, cdr.FLOAT64_ARRAY, None, {"data": data})
        self.raw(topic, cdr.FLOAT64_ARRAY, recv_ns, raws)

    def close(self):
        from rosbags.rosbag2 import StoragePlugin, Writer

        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
        writer = Writer(tmp, version=self.version, storage_plugin=plugin)
        if self.compression:
            from rosbags.rosbag2 import CompressionFormat, CompressionMode

            writer.set_compression(CompressionMode[self.compression.upper()], CompressionFormat.ZSTD)
        try:
            writer.open()
            for key, value in self.custom.items():
                writer.set_custom_data(key, value)
            conns = {}
            for topic, msgtype, _, _ in self.streams:
                if (topic, msgtype) in conns:
                    continue
                if msgtype in self.store.types:
                    conns[topic, msgtype] = writer.add_connection(topic, msgtype, typestore=self.store)
                else:  # a robot's own message type: recorded without its definition, as field bags are
                    conns[topic, msgtype] = writer.add_connection(
                        topic, msgtype, msgdef="", rihs01="RIHS01_" + "0" * 64
                    )
            recv = np.concatenate([s[2] for s in self.streams]) if self.streams else np.zeros(0, np.int64)
            which = np.concatenate([np.full(len(s[2]), i) for i, s in enumerate(self.streams)] or [[]])
            within = np.concatenate([np.arange(len(s[2])) for s in self.streams] or [[]])
            for k in np.argsort(recv, kind="stable"):
                topic, msgtype, _stamps, raws = self.streams[int(which[k])]
                writer.write(conns[topic, msgtype], int(recv[k]), raws[int(within[k])])
            writer.close()
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tmp = self._rename_storage_file(tmp)
        os.replace(tmp, self.path)

    def _rename_storage_file(self, tmp: Path) -> Path:
        """rosbag2 names the storage file after its directory: give it the final name."""
        meta = tmp / "metadata.yaml"
        text = meta.read_text()
        for old in tmp.iterdir():
            if old.name != "metadata.yaml" and old.name.startswith(tmp.name):
                new = self.path.name + old.name[len(tmp.name) :]
                old.rename(tmp / new)
                text = text.replace(old.name, new)
        meta.write_text(text)
        return tmp

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        return False


def ground_truth_labels(trial) -> list[str]:
    names = trial.coordinate_names
    return (
        ["t"]
        + [f"qdd:{j}" for j in names]
        + [f"Q:{j}" for j in names]
        + ["T", "V", "E"]
        + [f"M:{a}:{b}" for a in names for b in names]
    )


def ground_truth_rows(trial) -> np.ndarray:
    N = len(trial)
    return np.column_stack([trial.t, trial.qdd, trial.Q, trial.T, trial.V, trial.E, trial.M.reshape(N, -1)])


def write_trials_bag(
    path,
    trials,
    storage: str = "sqlite3",
    *,
    version: int = 9,
    joint_states_topic: str = "/joint_states",
    servo_topic: str = "/servo_commands",
    servo_type: str = cdr.JOINT_TRAJECTORY,
    efforts: str = "all",
    ground_truth: bool = True,
    gap_s: float = 1.0,
    start_ns: int = START_NS,
    compression: str = "",
) -> Path:
    """Write ``trials`` (``ros_lnn.physics.trials.Trial``) as one rosbag2 at ``path``; see the module
    docstring for topics and layouts. ``compression``: "" (none), "file", "message" (zstd, as
    ``ros2 bag record --compression-mode``), or "storage" (zstd MCAP chunks). Returns the bag directory."""
    if efforts not in ("all", "servo", "none"):
        raise DataError(f"efforts='{efforts}': choose all, servo or none")
    if servo_type not in (cdr.JOINT_TRAJECTORY, cdr.FLOAT64_ARRAY):
        raise DataError(
            f"servo type '{servo_type}' is not supported; use {cdr.JOINT_TRAJECTORY} or {cdr.FLOAT64_ARRAY}"
        )
    trials = list(trials)
    if not trials:
        raise DataError(f"{path}: no trials to write")
    writer = BagWriter(path, storage, version, compression)
    info, offset = [], int(start_ns)
    for trial in trials:
        stamps = offset + np.round((trial.t - trial.t[0]) * 1e9).astype(np.int64)
        effort = None
        if efforts != "none":
            effort = trial.Q.copy()
            if efforts == "servo":
                effort[:, trial.free_index] = np.nan
        writer.joint_states(joint_states_topic, stamps, trial.coordinate_names, trial.q, trial.qd, effort)
        servo = trial.servo_index
        if servo and servo_type == cdr.JOINT_TRAJECTORY:
            writer.joint_trajectory(
                servo_topic,
                stamps,
                trial.servo_joints,
                trial.q[:, servo],
                trial.qd[:, servo],
                trial.qdd[:, servo],
            )
        elif servo:
            writer.float64_array(
                servo_topic,
                stamps,
                None,
                np.column_stack([trial.q[:, servo], trial.qd[:, servo], trial.qdd[:, servo]]),
            )
        if ground_truth:
            writer.float64_array(
                GROUND_TRUTH_TOPIC, stamps, ground_truth_labels(trial), ground_truth_rows(trial)
            )
        info.append(
            {
                "name": trial.name,
                "system": trial.system,
                "start_ns": int(stamps[0]),
                "end_ns": int(stamps[-1]),
                "t0": float(trial.t[0]),
                "coordinate_names": list(trial.coordinate_names),
                "free_joints": list(trial.free_joints),
                "servo_joints": list(trial.servo_joints),
            }
        )
        offset = int(stamps[-1]) + int(round(gap_s * 1e9))
    writer.custom[TRIALS_KEY] = json.dumps(info)
    writer.close()
    return Path(path)


__all__ = ["BagWriter", "write_trials_bag", "ground_truth_labels", "GROUND_TRUTH_TOPIC", "STORAGES"]
