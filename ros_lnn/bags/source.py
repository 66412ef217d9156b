"""Bags as training data (``ros-lnn train --bag``): training, validation and test trials, and the
source description for the model's provenance.

Where validation and test come from, in this order:

* ``--test-bag`` / ``--val-bag``: every trial of those recordings (the honest case: a recording the
  model was not trained on);
* the mapping's ``split: by_bag`` with several ``--bag``: the last bag is the test recording, the one
  before it (when three or more) the validation recording;
* otherwise validation is cut out of the training recordings (whole trials, ``val_fraction``; one
  trial is chopped into pieces). That validation is *in-distribution*, and the run says so loudly;
  without a test recording the reported figures are that validation's, labelled as such.

Validation and test trials are evaluated against the bag's ground truth when every one has it
(simulated bags), against the measured values otherwise. Early stopping watches the validation trials
only, never the test trials.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import DataError
from ..physics.trials import Trial
from .dataset import REPAIRS, BagDataset, describe, load_bag_dataset
from .mapping import BagMapping

IN_DISTRIBUTION_WARNING = (
    "validation is IN-DISTRIBUTION: its trials are cut from the training recording(s), so a model that "
    "fails on another recording of the robot can look good here; pass --test-bag OTHER_BAG (a recording "
    "of different excitation) for a held-out figure"
)


@dataclass(frozen=True)
class BagTrainingData:
    """Measured training trials (finite rows only), validation and test trials, whether ``Q_e`` is
    trained on, and the provenance entry. ``test`` is empty when no test recording was given."""

    train: list
    validation: list
    test: list
    in_distribution: bool
    with_qe: bool
    source: dict
    mapping: BagMapping
    qdd_e_source: str

    @property
    def trials(self) -> list:
        return self.train + self.validation + self.test


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


def unusable_cause(trials: Sequence[Trial], mapping: BagMapping, use_qe: bool) -> str:
    """Why no sample of ``trials`` is usable, in words (the first column that is NaN everywhere)."""
    stack = {k: np.concatenate([getattr(t, k) for t in trials]) for k in ("q", "qd", "qdd")}
    Q_f = np.concatenate([t.Q_f for t in trials])
    topic = mapping.joint_states_topic
    if np.isnan(stack["q"]).all():
        return f"every position on {topic} is NaN"
    if np.isnan(stack["qd"]).all():
        return f"every velocity on {topic} is NaN"
    if np.isnan(Q_f).all():
        where = topic if mapping.free_effort == "joint_states" else mapping.free_effort
        return (
            f"every effort of the free joints {list(mapping.free_joints)} on {where} is NaN "
            f"(bag.free_effort: {mapping.free_effort}); if they are unactuated set free_effort: zero, "
            "else record their efforts"
        )
    if use_qe and np.isnan(np.concatenate([t.Q_e for t in trials])).all():
        return "every servo effort is NaN; train with --without-qe"
    return "each sample lacks a position, velocity, acceleration or effort (NaN)"


def _validation_side(ds: BagDataset, trials: list) -> tuple[list, str]:
    """Trials for evaluation: the exact truth when every one has it, else the measured trials."""
    truth = {t.name: x for t, x in zip(ds.trials, ds.truth)}
    if trials and all(truth.get(t.name) is not None for t in trials):
        return [truth[t.name] for t in trials], "ground truth"
    return list(trials), "measured values"


def _load(paths: Sequence[str], mapping: BagMapping, whole: bool) -> BagDataset:
    return load_bag_dataset(list(paths), replace(mapping, val_fraction=0.0) if whole else mapping)


def bag_training_data(
    bags: Sequence[str],
    mapping: BagMapping,
    with_qe: bool,
    say: Callable[[str], None] = print,
    *,
    val_bags: Sequence[str] = (),
    test_bags: Sequence[str] = (),
) -> BagTrainingData:
    """Read ``bags`` (training), ``val_bags`` and ``test_bags`` with ``mapping`` (see the module
    docstring for the split). ``Q_e`` is trained on only when asked for and measured."""
    bags, val_bags, test_bags = (
        [str(b) for b in bags],
        [str(b) for b in val_bags],
        [str(b) for b in test_bags],
    )
    if mapping.split == "by_bag":
        if not test_bags and len(bags) >= 2:
            test_bags = [bags.pop()]
        if not val_bags and len(bags) >= 2:
            val_bags = [bags.pop()]
    in_distribution = not val_bags
    train_ds = _load(bags, mapping, whole=not in_distribution)
    if in_distribution:
        if not train_ds.validation:
            raise DataError(
                f"{', '.join(bags)}: no validation trial (bag.val_fraction is 0); pass --val-bag BAG "
                "or set val_fraction"
            )
        train_trials, val_ds, val_trials = train_ds.train, train_ds, train_ds.validation
    else:
        val_ds = _load(val_bags, mapping, whole=True)
        train_trials, val_trials = train_ds.trials, val_ds.trials
    test_ds = _load(test_bags, mapping, whole=True) if test_bags else None

    for line in describe(train_ds.summary):
        say(f"bag: {line}")
    if with_qe and not train_ds.summary["Q_e_measured"]:
        say("bag: no measured servo efforts Q_e; training without the Q_e losses")
        with_qe = False
    usable = [finite_rows(t, with_qe) for t in train_trials]
    n_usable = sum(len(t) for t in usable)
    if n_usable == 0:
        raise DataError(
            f"{', '.join(bags)}: too little usable data (0 training samples): "
            f"{unusable_cause(train_trials, mapping, with_qe)}"
        )
    validation, val_on = _validation_side(val_ds, val_trials)
    test, test_on = _validation_side(test_ds, test_ds.trials) if test_ds else ([], "")
    qdd_e = sorted({str(i.get("qdd_e")) for i in train_ds.summary["trials"]})
    qdd_e_source = (
        f"servo commands {mapping.servo_topic}"
        if qdd_e == ["servo commands"]
        else f"differentiated joint states ({', '.join(qdd_e)} of {mapping.joint_states_topic})"
    )
    s = train_ds.summary
    source = {
        "kind": "rosbag",
        "bags": s["bags"],
        "validation_bags": val_ds.summary["bags"] if not in_distribution else [],
        "test_bags": test_ds.summary["bags"] if test_ds else [],
        "topics": {k: {"type": v["type"], "messages": v["messages"]} for k, v in s["streams"].items()},
        "skipped_topics": s["skipped_topics"],
        "mapping": s["mapping"],
        "joints": {"free": list(mapping.free_joints), "servo": list(mapping.servo_joints)},
        "qdd_e_from": qdd_e_source,
        "qdd_f_from": f"differentiated joint states ({s['trials'][0]['qdd_f']})",
        "validation_on": val_on,
        "validation_in_distribution": in_distribution,
        "test_on": test_on or None,
        "repairs": {k: {q: v.get(q, 0) for q in REPAIRS} for k, v in s["streams"].items()},
        "gaps_s": s["gaps_s"],
        "dropped_segments": s["dropped_segments"],
        "resampled_trials": [i["name"] for i in s["trials"] if i["resampled"]],
        "warnings": s["warnings"] + ([IN_DISTRIBUTION_WARNING] if in_distribution else []),
    }
    say(
        f"bag: joints: free {list(mapping.free_joints)}, servo {list(mapping.servo_joints)}; "
        f"q̈_e from {qdd_e_source}; system '{mapping.system or 'unnamed'}'"
    )
    say(
        f"bag: {len(train_trials)} training trials ({n_usable} usable samples), {len(val_trials)} "
        f"validation on {val_on}"
        + (f" from {', '.join(val_bags)}" if val_bags else "")
        + (f", {len(test)} test on {test_on} from {', '.join(test_bags)}" if test else ", no test recording")
        + f"; Q_e {'measured' if s['Q_e_measured'] else 'not measured'}"
    )
    if in_distribution:
        say(f"bag: WARNING: {IN_DISTRIBUTION_WARNING}")
    return BagTrainingData(
        train=usable,
        validation=validation,
        test=test,
        in_distribution=in_distribution,
        with_qe=with_qe,
        source=source,
        mapping=mapping,
        qdd_e_source=qdd_e_source,
    )


__all__ = ["BagTrainingData", "bag_training_data", "finite_rows", "unusable_cause", "IN_DISTRIBUTION_WARNING"]
