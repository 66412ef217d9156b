"""``ros-lnn train --bag``: bags as the trainer's data source (``(system, trials, source)`` like
``ros_lnn.commands.train.load_trials``)."""
from __future__ import annotations

import numpy as np

from ..errors import DataError
from ..physics.trials import Trial
from .dataset import REPAIRS, describe, load_bag_dataset
from .mapping import mapping_from_args


def finite_rows(trial: Trial, use_qe: bool) -> Trial:
    """The samples a loss can use: finite q, q̇, q̈ and Q_f, and Q_e when it is trained on (masked
    NaN efforts drop out here, sample by sample; differentiation already ran on the full grid)."""
    cols = [trial.Q_f] + ([trial.Q_e] if use_qe else [])
    ok = np.isfinite(np.column_stack([trial.q, trial.qd, trial.qdd] + cols)).all(axis=1)
    if ok.all():
        return trial
    return Trial(name=trial.name, system=trial.system, coordinate_names=trial.coordinate_names,
                 free_joints=trial.free_joints, servo_joints=trial.servo_joints, attrs=trial.attrs,
                 **{k: getattr(trial, k)[ok] for k in ("t", "q", "qd", "qdd", "Q", "T", "V", "E", "M")})


def bag_training_data(args, system):
    """Read ``args.bag`` with the mapping of ``args.config`` (+ CLI overrides). Training trials are
    the measured ones; validation trials are evaluated against the bag's ground truth when it has
    one (exact q̈, Q, M, V, E), against the measured values otherwise. Sets ``args.test_trials``
    to the validation trials and turns ``args.with_qe`` off when the bag holds no Q_e."""
    mapping = mapping_from_args(args, getattr(args, "config", None))
    ds = load_bag_dataset(args.bag, mapping)
    if not ds.validation:
        raise DataError(f"{', '.join(map(str, args.bag))}: no validation trial (bag.val_fraction is 0)")
    if getattr(args, "with_qe", False) and not ds.summary["Q_e_measured"]:
        print("bag: no measured servo efforts Q_e; training without the Q_e losses")
        args.with_qe = False
    use_qe = bool(getattr(args, "with_qe", False))
    val_names = {t.name for t in ds.validation}
    trials, evaluated_on = [], "ground truth" if all(ds.truth) else "measured values"
    for trial, exact in zip(ds.trials, ds.truth):
        if trial.name in val_names:
            trials.append(exact if exact is not None and all(ds.truth) else trial)
        else:
            trials.append(finite_rows(trial, use_qe))
    args.test_trials = ",".join(t.name for t in ds.validation)
    s = ds.summary
    source = {"kind": "rosbag", "bags": s["bags"],
              "topics": {k: {"type": v["type"], "messages": v["messages"]} for k, v in s["streams"].items()},
              "skipped_topics": s["skipped_topics"], "mapping": s["mapping"], "validation_on": evaluated_on,
              "repairs": {k: {q: v.get(q, 0) for q in REPAIRS} for k, v in s["streams"].items()},
              "gaps_s": s["gaps_s"], "dropped_segments": s["dropped_segments"],
              "resampled_trials": [i["name"] for i in s["trials"] if i["resampled"]],
              "warnings": s["warnings"]}
    for line in describe(s):
        print(f"bag: {line}")
    print(f"bag: {len(ds.trials)} trials ({len(ds.train)} train, {len(ds.validation)} validation on "
          f"{evaluated_on}); Q_e {'measured' if s['Q_e_measured'] else 'not measured'}")
    return system, trials, source
