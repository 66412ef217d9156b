"""Bags as training data (``ros-lnn train --bag``): the bag dataset's trials, the validation trials
(whole trials, chosen by the mapping's ``val_fraction`` and ``seed``) evaluated against the bag's ground
truth when it has one, and the source description for the model's provenance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..physics.trials import Trial
from .dataset import REPAIRS, describe, load_bag_dataset
from .mapping import BagMapping


@dataclass(frozen=True)
class BagTrainingData:
    """Trials in the bag's order (validation trials replaced by their exact truth when every trial has
    one), the validation trials' names, whether ``Q_e`` is trained on, and the provenance entry."""

    trials: list
    validation: tuple[str, ...]
    with_qe: bool
    source: dict
    mapping: BagMapping


def finite_rows(trial: Trial, use_qe: bool) -> Trial:
    """The samples a loss can use: finite q, q̇, q̈ and Q_f, and Q_e when it is trained on (masked
    NaN efforts drop out here, sample by sample; differentiation already ran on the full grid)."""
    cols = [trial.Q_f] + ([trial.Q_e] if use_qe else [])
    ok = np.isfinite(np.column_stack([trial.q, trial.qd, trial.qdd] + cols)).all(axis=1)
    if ok.all():
        return trial
    return Trial(
        name=trial.name,
        system=trial.system,
        coordinate_names=trial.coordinate_names,
        free_joints=trial.free_joints,
        servo_joints=trial.servo_joints,
        attrs=trial.attrs,
        **{k: getattr(trial, k)[ok] for k in ("t", "q", "qd", "qdd", "Q", "T", "V", "E", "M")},
    )


def bag_training_data(
    bags: Sequence[str], mapping: BagMapping, with_qe: bool, say: Callable[[str], None] = print
) -> BagTrainingData:
    """Read ``bags`` with ``mapping``. Training trials are the measured ones; validation trials are
    evaluated against the bag's ground truth when it has one (exact q̈, Q, M, V, E), against the
    measured values otherwise. ``Q_e`` is trained on only when asked for and measured."""
    ds = load_bag_dataset(list(bags), mapping)
    if not ds.validation:
        raise DataError(f"{', '.join(map(str, bags))}: no validation trial (bag.val_fraction is 0)")
    if with_qe and not ds.summary["Q_e_measured"]:
        say("bag: no measured servo efforts Q_e; training without the Q_e losses")
        with_qe = False
    val_names = {t.name for t in ds.validation}
    trials, evaluated_on = [], "ground truth" if all(ds.truth) else "measured values"
    for trial, exact in zip(ds.trials, ds.truth):
        if trial.name in val_names:
            trials.append(exact if exact is not None and all(ds.truth) else trial)
        else:
            trials.append(finite_rows(trial, with_qe))
    s = ds.summary
    source = {
        "kind": "rosbag",
        "bags": s["bags"],
        "topics": {k: {"type": v["type"], "messages": v["messages"]} for k, v in s["streams"].items()},
        "skipped_topics": s["skipped_topics"],
        "mapping": s["mapping"],
        "validation_on": evaluated_on,
        "repairs": {k: {q: v.get(q, 0) for q in REPAIRS} for k, v in s["streams"].items()},
        "gaps_s": s["gaps_s"],
        "dropped_segments": s["dropped_segments"],
        "resampled_trials": [i["name"] for i in s["trials"] if i["resampled"]],
        "warnings": s["warnings"],
    }
    for line in describe(s):
        say(f"bag: {line}")
    say(
        f"bag: {len(ds.trials)} trials ({len(ds.train)} train, {len(ds.validation)} validation on "
        f"{evaluated_on}); Q_e {'measured' if s['Q_e_measured'] else 'not measured'}"
    )
    return BagTrainingData(
        trials=trials,
        validation=tuple(t.name for t in ds.validation),
        with_qe=with_qe,
        source=source,
        mapping=mapping,
    )


__all__ = ["BagTrainingData", "bag_training_data", "finite_rows"]
