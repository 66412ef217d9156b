"""A fully actuated arm's recording: stamps, q, q̇ and the measured joint torques, from a rosbag2
``/joint_states`` (or any JointState topic) by joint name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..bags import timebase as tb
from ..bags.reader import bag_files_sha256, open_bag, read_named_arrays
from ..errors import DataError
from .mapping import ArmMapping


@dataclass
class ArmRecording:
    name: str
    joints: tuple
    t: np.ndarray  # s from the first sample
    q: np.ndarray
    qd: np.ndarray | None  # None when the log has no velocities
    tau: np.ndarray  # joint torques (efforts × drive gains)
    counts: dict = field(default_factory=dict)
    sha256: str = ""

    def __len__(self) -> int:
        return len(self.t)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0]) if len(self.t) else 0.0

    @property
    def rate_hz(self) -> float:
        return float(1.0 / np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0

    def part(self, start: float, stop: float, name: str = "") -> ArmRecording:
        """Samples with ``start ≤ fraction of the duration < stop``."""
        a = int(round(start * len(self)))
        b = int(round(stop * len(self)))
        qd = None if self.qd is None else self.qd[a:b]
        return ArmRecording(
            name or f"{self.name}[{start:g}:{stop:g}]",
            self.joints,
            self.t[a:b],
            self.q[a:b],
            qd,
            self.tau[a:b],
            dict(self.counts),
            self.sha256,
        )

    def segments(self, gap_factor: float) -> list[ArmRecording]:
        """Pieces separated by gaps (a paused log), each filtered on its own."""
        bounds, _ = tb.split_at_gaps(self.t, gap_factor)
        out = []
        for k, (a, b) in enumerate(bounds):
            if b - a >= 64:
                qd = None if self.qd is None else self.qd[a:b]
                out.append(
                    ArmRecording(
                        f"{self.name}#{k}",
                        self.joints,
                        self.t[a:b],
                        self.q[a:b],
                        qd,
                        self.tau[a:b],
                        self.counts,
                        self.sha256,
                    )
                )
        return out


def read_arm_bag(path, mapping: ArmMapping) -> ArmRecording:
    """Read one bag: joint states matched by name, efforts × drive gains, stamps ordered, rows with
    non-finite values dropped (counted)."""
    path = Path(path)
    name = path.name
    joints = mapping.actuated_joints
    reader = open_bag(path)
    try:
        js = read_named_arrays(
            reader,
            mapping.joint_states_topic,
            joints,
            {"q": "position", "qd": "velocity", "e": "effort"},
            bag_name=name,
        )
        if mapping.effort_topic and mapping.effort_topic != mapping.joint_states_topic:
            ef = read_named_arrays(
                reader, mapping.effort_topic, joints, {"e": mapping.effort_field}, bag_name=name
            )
            e_stamp = ef.recv_ns if mapping.stamps == "receive" else ef.stamp_ns
            assert e_stamp is not None  # JointState/JointTrajectory streams always carry header stamps
            effort_src = (e_stamp, ef.values["e"])
        else:
            effort_src = None
            if mapping.effort_field != "effort":
                js.values["e"] = js.values[{"position": "q", "velocity": "qd"}[mapping.effort_field]]
    finally:
        reader.close()
    stamp = js.recv_ns if mapping.stamps == "receive" or np.all(js.stamp_ns == 0) else js.stamp_ns
    assert stamp is not None  # JointState/JointTrajectory streams always carry header stamps
    keep, counts = tb.order_and_dedupe(stamp)
    t_ns = stamp[keep]
    q = js.values["q"][keep]
    qd = js.values["qd"][keep]
    e = js.values["e"][keep]
    if effort_src is not None:
        s, v = effort_src
        order, _ = tb.order_and_dedupe(s)
        e = np.column_stack(
            [np.interp(t_ns, s[order], v[order][:, j], left=np.nan, right=np.nan) for j in range(len(joints))]
        )
    has_velocity = bool(np.isfinite(qd).any())
    finite = np.isfinite(q).all(1) & np.isfinite(e).all(1)
    if has_velocity:
        finite &= np.isfinite(qd).all(1)
    counts["non_finite_dropped"] = int(np.count_nonzero(~finite))
    if not np.isfinite(e).any():
        raise DataError(
            f"{name}: no measured effort for {', '.join(joints)} on "
            f"{mapping.effort_topic or mapping.joint_states_topic}.{mapping.effort_field}; "
            "an arm model is trained on measured joint torques or motor currents"
        )
    t_ns, q, e = t_ns[finite], q[finite], e[finite]
    qd = qd[finite] if has_velocity else None
    if len(t_ns) < 64:
        raise DataError(f"{name}: {len(t_ns)} usable joint states; at least 64 are needed")
    tau = e * np.asarray(mapping.gains())
    t = (t_ns - t_ns[0]) * 1e-9
    return ArmRecording(name, joints, t, q, qd, tau, counts, bag_files_sha256(path))
