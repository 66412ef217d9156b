"""Bags → trials: align the joint-state, servo-command, effort and ground-truth streams, repair the
time base, differentiate, and split by trial. Every repair is counted in the summary.

Per trial: ``q``, ``q̇`` from the joint states; ``q̈_e`` from the servo commands' accelerations when
recorded, else Savitzky–Golay; ``q̈_f`` by Savitzky–Golay differentiation of ``q̇_f`` (of ``q_f``
twice when velocities are missing); ``Q`` = measured efforts (NaN = not measured / masked);
``T, V, E, M`` are NaN (a robot does not record them). When the bag holds the simulator's
``/ground_truth`` the exact values come back as a parallel ``truth`` trial, for evaluation only.
"""

from __future__ import annotations

import itertools
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..physics.trials import Trial
from . import cdr
from . import timebase as tb
from .mapping import BagMapping
from .reader import (
    bag_files_sha256,
    normalise_topic,
    open_bag,
    read_float64_array,
    read_named_arrays,
    topic_types,
)
from .writer import TRIALS_KEY


@dataclass
class BagDataset:
    trials: list  # measured trials (what training sees)
    truth: list  # exact trials from /ground_truth, or None each
    summary: dict
    train: list = field(default_factory=list)
    validation: list = field(default_factory=list)


def _stamps(stream, mapping, summary, quiet=False):
    topic = stream.topic
    if mapping.stamps == "receive" or stream.stamp_ns is None:
        if stream.stamp_ns is None and not quiet:
            _warn(summary, f"{topic}: {stream.msgtype} has no header; aligned by bag receive time")
        return stream.recv_ns, "receive"
    if np.count_nonzero(stream.stamp_ns == 0) > len(stream.stamp_ns) // 2:
        _warn(summary, f"{topic}: header stamps are zero; aligned by bag receive time instead")
        return stream.recv_ns, "receive"
    return stream.stamp_ns, "header"


def _warn(summary, text):
    summary["warnings"].append(text)
    warnings.warn(text, stacklevel=3)


def _clean(stream, mapping, summary, quiet=False):
    """Stamp-ordered, de-duplicated (stamp ns, {field: array}) of a stream; counts into summary."""
    stamp, source = _stamps(stream, mapping, summary, quiet)
    keep, counts = tb.order_and_dedupe(stamp)
    counts["stamps"] = source
    entry = summary["streams"].setdefault(stream.topic, {"type": stream.msgtype})
    for key, value in {**stream.counts, **counts}.items():  # summed over bags
        entry[key] = entry.get(key, 0) + value if isinstance(value, int) else value
    return stamp[keep], {k: v[keep] for k, v in stream.values.items()}


def _align(t_ns, src_ns, values, topic):
    """Values of another stream at the joint-state stamps: linear between its samples, exact where
    stamps coincide, NaN outside its time range."""
    lo, hi = (
        max(t_ns[0], src_ns[0] if len(src_ns) else t_ns[-1]),
        min(t_ns[-1], src_ns[-1] if len(src_ns) else 0),
    )
    if len(src_ns) < 2 or hi <= lo:
        raise DataError(
            f"{topic} has no data overlapping the joint states in time; check that both "
            "were recorded together (or set bag.stamps: receive)"
        )
    t, s = (t_ns - t_ns[0]) * 1e-9, (src_ns - t_ns[0]) * 1e-9
    return (
        np.column_stack([np.interp(t, s, v, left=np.nan, right=np.nan) for v in values.T])
        if values.shape[1]
        else np.zeros((len(t), 0))
    )


def _effort(reader, source, joints, js, mapping, summary, name):
    """Measured efforts of ``joints`` (N, k) at the joint-state stamps, or None when not measured."""
    if source in ("none", "zero", ""):
        return None
    if source == "joint_states":
        cols = [js["joints"].index(j) for j in joints]
        out = js["effort"][:, cols]
    else:
        types = topic_types(reader)
        msgtype = types.get(normalise_topic(source), {}).get("type")
        if msgtype == cdr.FLOAT64_ARRAY:
            s = read_float64_array(reader, source, bag_name=name)
            src_ns, vals = _clean(s, mapping, summary)
            vals = vals["data"][:, : len(joints)]
        else:
            s = read_named_arrays(reader, source, joints, {"effort": "effort"}, bag_name=name)
            src_ns, vals = _clean(s, mapping, summary)
            vals = vals["effort"]
        out = _align(js["t_ns"], src_ns, vals, source)
    if np.isnan(out).all():
        return None
    return out


def _read_bag(path, mapping: BagMapping, summary) -> list:
    """Per-trial dicts of aligned arrays from one bag."""
    name = str(path)
    reader = open_bag(path)
    try:
        types = topic_types(reader)
        joints = _coordinate_order(mapping)
        js_stream = read_named_arrays(
            reader,
            mapping.joint_states_topic,
            joints,
            {"position": "position", "velocity": "velocity", "effort": "effort"},
            index_order=mapping.joint_order,
            bag_name=name,
        )
        finite = np.isfinite(js_stream.values["position"])
        bad = ~finite.all(axis=1)
        # messages of another publisher on the same topic (other joints only) vs. incomplete ones
        js_stream.counts["other_joints_only"] = int((~finite.any(axis=1)).sum())
        js_stream.counts["nan_positions"] = int(bad.sum()) - js_stream.counts["other_joints_only"]
        for key in ("recv_ns", "stamp_ns"):
            setattr(js_stream, key, getattr(js_stream, key)[~bad])
        js_stream.values = {k: v[~bad] for k, v in js_stream.values.items()}
        assert js_stream.stamp_ns is not None  # joint states carry a header
        if not len(js_stream.stamp_ns):
            raise DataError(
                f"{name}: every message on {js_stream.topic} has NaN or inf positions for the joints "
                f"{list(joints)} (or names none of them); nothing to train on"
            )
        t_ns, vals = _clean(js_stream, mapping, summary)
        js = {"t_ns": t_ns, "joints": joints, **vals}
        entry = summary["streams"][js_stream.topic]
        entry["nan_efforts"] = entry.get("nan_efforts", 0) + int(np.isnan(vals["effort"]).any(axis=1).sum())
        used = {js_stream.topic}

        servo_acc = None
        if mapping.servo_topic and mapping.servo_joints:
            used.add(normalise_topic(mapping.servo_topic))
            servo_acc = _servo_accelerations(reader, mapping, js, types, summary, name)
        Q_e = _effort(reader, mapping.servo_effort, mapping.servo_joints, js, mapping, summary, name)
        Q_f = _effort(reader, mapping.free_effort, mapping.free_joints, js, mapping, summary, name)
        for src in (mapping.servo_effort, mapping.free_effort):
            if src.startswith("/") or normalise_topic(src) in types:
                used.add(normalise_topic(src))
        truth = None
        gt_topic = mapping.ground_truth_topic and normalise_topic(mapping.ground_truth_topic)
        if gt_topic and types.get(gt_topic, {}).get("type") == cdr.FLOAT64_ARRAY:
            used.add(gt_topic)
            truth = _ground_truth(reader, gt_topic, js, mapping, summary, name)
        summary["skipped_topics"].update({t: v["type"] for t, v in types.items() if t not in used})
        custom = reader.storage.metadata.custom if hasattr(reader.storage, "metadata") else None
    finally:
        reader.close()
    js.update(servo_acc=servo_acc, Q_e=Q_e, Q_f=Q_f, truth=truth)
    return _segments(js, mapping, summary, Path(path), _trial_names(custom))


def _coordinate_order(mapping):
    if mapping.joint_order:
        unknown = [j for j in mapping.free_joints + mapping.servo_joints if j not in mapping.joint_order]
        if unknown:
            raise DataError(
                f"bag.joint_order {list(mapping.joint_order)} lacks joint(s) {', '.join(unknown)}"
            )
        return tuple(j for j in mapping.joint_order if j in mapping.free_joints + mapping.servo_joints)
    return mapping.free_joints + mapping.servo_joints


def _servo_accelerations(reader, mapping, js, types, summary, name):
    topic = normalise_topic(mapping.servo_topic)
    have = types.get(topic, {}).get("type")
    if have is None:
        raise DataError(
            f"{name}: servo command topic {topic} is not in the bag (topics: "
            f"{', '.join(sorted(types))}); set bag.servo_topic, or '' for none"
        )
    want = mapping.servo_msgtype
    if want != "auto" and have != want:
        raise DataError(f"{name}: {topic} has type {have}, the mapping says {want}")
    n_e = len(mapping.servo_joints)
    if have == cdr.FLOAT64_ARRAY:
        s = read_float64_array(reader, topic, bag_name=name)
        if s.values["data"].shape[1] != 3 * n_e:
            raise DataError(
                f"{name}: {topic} Float64MultiArray has {s.values['data'].shape[1]} entries; "
                f"expected 3 × {n_e} servo joints ([q_e..., q̇_e..., q̈_e...])"
            )
        src_ns, vals = _clean(s, mapping, summary)
        acc = vals["data"][:, 2 * n_e :]
    elif have == cdr.JOINT_TRAJECTORY:
        s = read_named_arrays(
            reader, topic, mapping.servo_joints, {"accelerations": "accelerations"}, bag_name=name
        )
        src_ns, vals = _clean(s, mapping, summary)
        acc = vals["accelerations"]
    else:
        raise DataError(
            f"{name}: {topic} has type {have}; expected {cdr.JOINT_TRAJECTORY} or {cdr.FLOAT64_ARRAY}"
        )
    out = _align(js["t_ns"], src_ns, acc, topic)
    return None if np.isnan(out).all() else out


def _ground_truth(reader, topic, js, mapping, summary, name):
    s = read_float64_array(reader, topic, bag_name=name)
    if not s.labels:
        _warn(summary, f"{topic}: no labelled layout; ignored")
        return None
    src_ns, vals = _clean(s, mapping, summary, quiet=True)  # written at each sample's stamp
    data = _align(js["t_ns"], src_ns, vals["data"], topic)
    col = {label: i for i, label in enumerate(s.labels)}
    joints = js["joints"]
    try:
        pick = lambda prefix: data[:, [col[f"{prefix}:{j}"] for j in joints]]  # noqa: E731
        return {
            "qdd": pick("qdd"),
            "Q": pick("Q"),
            "T": data[:, col["T"]],
            "V": data[:, col["V"]],
            "E": data[:, col["E"]],
            "M": data[:, [col[f"M:{a}:{b}"] for a in joints for b in joints]].reshape(
                -1, len(joints), len(joints)
            ),
        }
    except KeyError as exc:
        _warn(summary, f"{topic}: layout lacks {exc}; ground truth ignored")
        return None


def _trial_names(custom):
    try:
        return json.loads((custom or {}).get(TRIALS_KEY, "[]"))
    except (TypeError, ValueError):
        return []


def _segments(js, mapping, summary, path, named):
    t_all = (js["t_ns"] - js["t_ns"][0]) * 1e-9
    ranges, gaps = tb.split_at_gaps(t_all, mapping.gap_factor)
    summary["gaps_s"] += gaps
    out = []
    for k, (a, b) in enumerate(ranges):
        start_ns = int(js["t_ns"][a])
        label = next(
            (d["name"] for d in named if abs(d.get("start_ns", -1) - start_ns) < 1000), f"{path.name}_{k}"
        )
        if b - a < mapping.min_samples:
            summary["dropped_segments"].append({"name": label, "samples": b - a})
            continue
        seg = {
            key: (v[a:b] if isinstance(v, np.ndarray) else v)
            for key, v in js.items()
            if key not in ("truth", "joints")
        }
        seg["truth"] = {key: v[a:b] for key, v in js["truth"].items()} if js["truth"] else None
        seg.update(name=label, joints=js["joints"], t=t_all[a:b] - t_all[a], start_ns=start_ns, bag=str(path))
        out.append(seg)
    return out


def _to_trial(seg, mapping, summary):
    """Resample when jittered, differentiate, and build the measured and the truth trial."""
    t, joints = seg["t"], seg["joints"]
    free = [joints.index(j) for j in mapping.free_joints]
    servo = [joints.index(j) for j in mapping.servo_joints]
    spread, worst = tb.jitter(t)
    info = {
        "name": seg["name"],
        "samples_in": len(t),
        "jitter": spread,
        "max_step_deviation": worst,
        "resampled": False,
    }
    fields = {"q": seg["position"], "qd": seg["velocity"], "effort": seg["effort"]}
    extra = {k: seg[k] for k in ("servo_acc", "Q_e", "Q_f") if seg[k] is not None}
    truth = seg["truth"]
    if worst > mapping.jitter_tolerance:
        grid = tb.uniform_grid(t, mapping.rate_hz or None)
        fields = {k: tb.resample(t, v, grid, smooth=k != "effort") for k, v in fields.items()}
        extra = {k: tb.resample(t, v, grid, smooth=False) for k, v in extra.items()}
        if truth:
            truth = {
                k: tb.resample(t, v.reshape(len(t), -1), grid, smooth=True).reshape(
                    (len(grid),) + v.shape[1:]
                )
                for k, v in truth.items()
            }
        t = grid
        info["resampled"] = True
    dt = float(np.median(np.diff(t)))
    q, qd = fields["q"], fields["qd"]
    w, o = mapping.savgol_window, mapping.savgol_order
    if np.isnan(qd).any():
        qd = np.where(np.isnan(qd), tb.savgol_derivative(q, dt, w, o, 1), qd)
        info["velocity"] = "savgol(q)"
    qdd = tb.savgol_derivative(qd, dt, w, o, 1)
    info["qdd_f"] = f"savgol(qd, window={w}, order={o})"
    if "servo_acc" in extra and np.isfinite(extra["servo_acc"]).all():
        qdd[:, servo] = extra["servo_acc"]
        info["qdd_e"] = "servo commands"
    else:
        info["qdd_e"] = info["qdd_f"]
    n, N = len(joints), len(t)
    Q = np.full((N, n), np.nan)
    if "Q_e" in extra:
        Q[:, servo] = extra["Q_e"]
    if "Q_f" in extra:
        Q[:, free] = extra["Q_f"]
    elif mapping.free_effort == "zero":
        Q[:, free] = 0.0
    info["Q_e_measured"] = "Q_e" in extra
    info["masked_Q_samples"] = int(np.isnan(Q[:, servo]).any(axis=1).sum()) if info["Q_e_measured"] else 0
    nan = np.full(N, np.nan)
    attrs = {
        "source": "rosbag",
        "bag": seg["bag"],
        "start_ns": seg["start_ns"],
        "measured": {
            "Q_e": info["Q_e_measured"],
            "Q_f": mapping.free_effort,
            "qdd_e": info["qdd_e"],
            "qdd_f": info["qdd_f"],
        },
    }
    common = dict(
        name=seg["name"],
        system=mapping.system or "unknown",
        coordinate_names=joints,
        free_joints=mapping.free_joints,
        servo_joints=mapping.servo_joints,
        t=t,
        q=q,
        qd=qd,
    )
    trial = Trial(**common, qdd=qdd, Q=Q, T=nan, V=nan, E=nan, M=np.full((N, n, n), np.nan), attrs=attrs)
    exact = Trial(**common, **truth, attrs={**attrs, "ground_truth": True}) if truth else None
    info["samples"] = N
    info["rate_hz"] = 1.0 / dt
    return trial, exact, info


def split_trials(trials, val_fraction: float, seed: int = 0):
    """(train, validation) lists, whole trials on each side, seeded; at least one trial each when
    ``val_fraction`` > 0 and there are two or more trials."""
    if val_fraction <= 0 or len(trials) < 2:
        return list(trials), []
    n_val = min(len(trials) - 1, max(1, int(round(val_fraction * len(trials)))))
    pick = set(np.random.default_rng(seed).choice(len(trials), n_val, replace=False).tolist())
    return (
        [tr for i, tr in enumerate(trials) if i not in pick],
        [tr for i, tr in enumerate(trials) if i in pick],
    )


def chop_trial(trial, pieces: int):
    """Split one long trial into ``pieces`` contiguous trials (for a train/validation split)."""
    bounds = np.linspace(0, len(trial), pieces + 1).astype(int)
    out = []
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        arrays = {key: getattr(trial, key)[a:b] for key in ("q", "qd", "qdd", "Q", "T", "V", "E", "M")}
        out.append(
            Trial(
                name=f"{trial.name}_part{k}",
                system=trial.system,
                coordinate_names=trial.coordinate_names,
                free_joints=trial.free_joints,
                servo_joints=trial.servo_joints,
                t=trial.t[a:b] - trial.t[a],
                attrs=dict(trial.attrs),
                **arrays,
            )
        )
    return out


def load_bag_dataset(paths, mapping: BagMapping) -> BagDataset:
    """Read one or several bags into trials, repair and report, and split them by trial."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise DataError("no bag given; pass --bag PATH")
    summary: dict[str, Any] = {
        "bags": [],
        "streams": {},
        "skipped_topics": {},
        "warnings": [],
        "gaps_s": [],
        "dropped_segments": [],
        "trials": [],
        "mapping": {k: (list(v) if isinstance(v, tuple) else v) for k, v in mapping.__dict__.items()},
    }
    segments = []
    for path in paths:
        segments += _read_bag(path, mapping, summary)
        summary["bags"].append({"path": str(path), "sha256": bag_files_sha256(path)})
    if not segments:
        raise DataError(
            f"{', '.join(map(str, paths))}: too few samples: no stretch of joint states without "
            f"gaps holds {mapping.min_samples} samples (bag.min_samples)"
        )
    trials, truth = [], []
    for seg in segments:
        trial, exact, info = _to_trial(seg, mapping, summary)
        trials.append(trial)
        truth.append(exact)
        summary["trials"].append(info)
    if len(trials) == 1 and mapping.val_fraction > 0:
        pieces = max(2, int(round(1 / mapping.val_fraction)))
        trials = chop_trial(trials[0], pieces)
        truth = chop_trial(truth[0], pieces) if truth[0] else [None] * pieces
        _warn(summary, f"one trial only: split into {pieces} contiguous pieces for validation")
    train, val = split_trials(trials, mapping.val_fraction, mapping.seed)
    summary["split"] = {"train": [t.name for t in train], "validation": [t.name for t in val]}
    summary["Q_e_measured"] = all(i["Q_e_measured"] for i in summary["trials"])
    return BagDataset(trials, truth, summary, train, val)


REPAIRS = (
    "nameless",
    "other_joints_only",
    "nan_positions",
    "nan_efforts",
    "duplicates",
    "out_of_order",
    "short_arrays",
    "no_point",
)


def describe(summary: dict) -> list[str]:
    """The summary for people: one line per stream with what was repaired, then trials and warnings."""
    lines = []
    for topic, info in summary["streams"].items():
        fixes = ", ".join(f"{k.replace('_', ' ')} {info[k]}" for k in REPAIRS if info.get(k))
        lines.append(
            f"{topic} ({info['type'].split('/')[-1]}): {info['messages']} messages, stamps "
            f"{info['stamps']}" + (f"; {fixes}" if fixes else "")
        )
    if summary["skipped_topics"]:
        lines.append("skipped topics: " + ", ".join(sorted(summary["skipped_topics"])))
    trials = summary["trials"]
    resampled = [t["name"] for t in trials if t["resampled"]]
    lines.append(
        f"{len(trials)} trials, {sum(t['samples'] for t in trials)} samples"
        + (f"; {len(summary['gaps_s'])} gap(s) split the recording" if summary["gaps_s"] else "")
        + (
            f"; {len(summary['dropped_segments'])} short stretch(es) dropped"
            if summary["dropped_segments"]
            else ""
        )
        + (f"; resampled to a uniform grid: {', '.join(resampled)}" if resampled else "")
    )
    lines += [f"warning: {w}" for w in summary["warnings"]]
    return lines


__all__ = ["BagDataset", "load_bag_dataset", "split_trials", "chop_trial", "describe"]
