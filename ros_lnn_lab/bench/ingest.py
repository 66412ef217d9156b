"""``ros-lnn bench ingest``: JointState ingest speed of the bag reader against the naive loop
(rosbags deserialises every message, fields appended to lists), on the same freshly written bag, plus
the accuracy of Savitzky–Golay accelerations against the simulator's exact ones."""

from __future__ import annotations

import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

JOINTS = ("pendulum_joint", "cart_joint")


def write_large_bag(path, messages: int, storage: str, rate_hz: float = 1000.0):
    """``messages`` JointState messages (smooth signals, two named joints) plus 1 % of them on an
    unrelated topic, which the reader has to skip."""
    from ros_lnn.bags.writer import START_NS, BagWriter

    t = np.arange(messages) / rate_hz
    stamps = START_NS + np.round(t * 1e9).astype(np.int64)
    q = np.column_stack([np.sin(0.7 * t), 0.3 * np.cos(1.3 * t)])
    qd = np.column_stack([0.7 * np.cos(0.7 * t), -0.39 * np.sin(1.3 * t)])
    with BagWriter(path, storage) as writer:
        writer.joint_states("/joint_states", stamps, JOINTS, q, qd, np.zeros_like(q))
        every = stamps[::100]
        writer.float64_array("/other/diagnostics", every, None, np.ones((len(every), 3)))


def naive_ingest(path):
    """The loop a first implementation would write: deserialise every message with rosbags."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    stamps, pos, vel, eff = [], [], [], []
    with Reader(path) as reader:
        conns = [c for c in reader.connections if c.topic == "/joint_states"]
        for conn, _, raw in reader.messages(connections=conns):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            stamps.append(msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec)
            index = [msg.name.index(j) for j in JOINTS]
            pos.append(msg.position[index])
            vel.append(msg.velocity[index])
            eff.append(msg.effort[index])
    return np.array(stamps), np.array(pos), np.array(vel), np.array(eff)


def fast_ingest(path):
    from ros_lnn.bags.reader import open_bag, read_named_arrays

    reader = open_bag(path)
    try:
        s = read_named_arrays(
            reader,
            "joint_states",
            JOINTS,
            {"position": "position", "velocity": "velocity", "effort": "effort"},
        )
    finally:
        reader.close()
    return s.stamp_ns, s.values["position"], s.values["velocity"], s.values["effort"]


def _best_of(fn, path, repeats):
    best, out = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(path)
        best = min(best, time.perf_counter() - start)
    return best, out


def savgol_accuracy(
    windows=(5, 7, 11, 21, 31),
    orders=(2, 3, 4),
    noise=(0.0, 1e-4, 1e-3),
    rate_hz=200.0,
    duration=10.0,
    seed=0,
):
    """RMS error of Savitzky–Golay q̈_f (from q̇_f) against the exact crane accelerations, relative
    to the RMS of q̈_f, over three paper-like trials sampled at ``rate_hz``; per velocity-noise level
    (white noise of that standard deviation, rad/s, added to q̇_f as a sensor would)."""
    from ros_lnn.bags.timebase import savgol_derivative
    from ros_lnn.physics.crane import Crane
    from ros_lnn.physics.datasets import PAPER_TRIALS, position_servo
    from ros_lnn.physics.simulate import simulate

    crane, dt = Crane(), 1.0 / rate_hz
    trials = [
        simulate(
            crane,
            duration,
            [s.theta0],
            [0.0],
            servo=position_servo(s),
            t_eval=np.arange(0.0, duration, dt),
            name=s.name,
        )
        for s in PAPER_TRIALS[1:4]
    ]
    exact = np.concatenate([tr.qdd[:, 0] for tr in trials])
    scale = np.sqrt(np.mean(exact**2))
    rng = np.random.default_rng(seed)
    table = {}
    for sigma in noise:
        noisy = [tr.qd[:, :1] + sigma * rng.standard_normal((len(tr), 1)) for tr in trials]
        row = table[f"noise_{sigma:g}"] = {}
        for order in orders:
            for window in windows:
                if window > order:
                    est = np.concatenate([savgol_derivative(v, dt, window, order)[:, 0] for v in noisy])
                    row[f"w{window}_o{order}"] = float(np.sqrt(np.mean((est - exact) ** 2)) / scale)
    return {"rate_hz": rate_hz, "qdd_f_rms": float(scale), "relative_rms_error": table}


def pipeline_rate(path, messages) -> dict:
    """Whole bag -> trials (read, repair, differentiate, split) on the large bag."""
    from ros_lnn.bags.dataset import load_bag_dataset
    from ros_lnn.bags.mapping import CRANE, BagMapping

    mapping = BagMapping.from_dict({**CRANE, "servo_topic": ""})
    start = time.perf_counter()
    ds = load_bag_dataset(path, mapping)
    elapsed = time.perf_counter() - start
    assert sum(len(t) for t in ds.trials) == messages
    return {"pipeline_s": elapsed, "pipeline_msgs_per_s": messages / elapsed}


def bench_ingest(args) -> dict:
    messages = 200_000 if getattr(args, "quick", False) else 1_000_000
    repeats = 1 if getattr(args, "quick", False) else 3
    results: dict[str, Any] = {"messages": messages, "storages": {}}
    workdir = Path(tempfile.mkdtemp(prefix="ros_lnn_ingest_"))
    try:
        for storage in ("sqlite3", "mcap"):
            path = workdir / f"large_{storage}"
            start = time.perf_counter()
            write_large_bag(path, messages, storage)
            written = time.perf_counter() - start
            fast_s, fast = _best_of(fast_ingest, path, repeats)
            naive_s, naive = _best_of(naive_ingest, path, 1)
            for a, b in zip(fast, naive):
                if not np.array_equal(a, b):
                    raise AssertionError("fast and naive ingest disagree")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "one trial only: split into pieces"
                pipe = pipeline_rate(path, messages)
            row = {
                **pipe,
                "write_s": written,
                "fast_s": fast_s,
                "naive_s": naive_s,
                "fast_msgs_per_s": messages / fast_s,
                "naive_msgs_per_s": messages / naive_s,
                "speedup": naive_s / fast_s,
                "bag_mb": sum(f.stat().st_size for f in path.iterdir()) / 1e6,
            }
            results["storages"][storage] = row
            print(
                f"{storage:8s} {messages} JointState msgs ({row['bag_mb']:.0f} MB): fast "
                f"{row['fast_msgs_per_s']:,.0f} "
                f"msgs/s, naive rosbags loop {row['naive_msgs_per_s']:,.0f} msgs/s -> {row['speedup']:.1f}x "
                f"(identical arrays); whole pipeline bag -> trials {row['pipeline_msgs_per_s']:,.0f} msgs/s",
                flush=True,
            )
            shutil.rmtree(path)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["savgol"] = savgol_accuracy()
    sg = results["savgol"]
    print(
        f"Savitzky-Golay q̈_f relative RMS error at {sg['rate_hz']:g} Hz (crane, rms q̈_f "
        f"{sg['qdd_f_rms']:.2f} rad/s²), by velocity noise (rad/s):"
    )
    cols = list(next(iter(sg["relative_rms_error"].values())))
    print(f"  {'noise':>8s}" + "".join(f"{c:>9s}" for c in cols))
    for noise_key, row in sg["relative_rms_error"].items():
        print(f"  {noise_key[6:]:>8s}" + "".join(f"{row[c]:9.1e}" for c in cols))
    return results
