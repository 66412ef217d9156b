"""The data of a run and its split, by the family's data kind:

* trials (ServoLNN, DeLaN): the crane of the ServoLNN paper (its simulated trials and its split: 5
  test trials, 4096 training samples drawn), a trials file (``--data``), rosbag2 recordings (split by
  trial as the bag mapping chooses, every training sample unless ``--n-train``), a simulated chain, or
  the DeLaN character data (test letters held out);
* trajectories (LNN, LNN-nh, TLNN, neural ODE): simulated free motion of a chain or a nonholonomic
  example, whole trajectories held out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..families import EFFORT_RESIDUALS, TRAJECTORIES, Family, Shape
from .data import model_order, reorder, split_by_trajectory
from .spec import RunSpec

#: Samples per simulated trajectory of a nonholonomic example; sample rate of the chains' trajectories.
NONHOLONOMIC_SAMPLES = 51
CHAIN_RATE_HZ = 25.0


@dataclass(frozen=True)
class RunData:
    """Training and test samples (model order), the split and source for the provenance, the
    coordinates the model gets, and what the data changed in the run's options."""

    train: dict
    test: dict
    split: dict
    source: dict
    shape: Shape
    summary: str  # the "data: ..." line
    with_qe: bool  # Q_e trained on (asked for, measured and servo joints exist)
    test_trials: tuple[str, ...] = ()  # held-out trials when the data chose them (bags)
    #: validation samples early stopping watches when they are not the test samples (bags); None: test
    val: dict | None = None
    #: what the reported metrics are evaluated on ("test trials", or the in-distribution validation)
    evaluated_on: str = "test trials"
    #: the loaded bags (ros_lnn.bags.source.BagTrainingData), for the identifiability report and prior
    bags: object = None

    @property
    def validation(self) -> dict:
        return self.test if self.val is None else self.val


def load(family: Family, spec: RunSpec, say: Callable[[str], None] = print) -> RunData:
    """The data of a resolved ``spec``."""
    if family.data == TRAJECTORIES:
        return simulated_trajectories(spec)
    if family.data == EFFORT_RESIDUALS:  # an arm's recordings against its certain model (dac_residual)
        from .effort_residuals import residual_data

        return RunData(**residual_data(spec, say))
    if spec.system == "delan_character":
        return character_data(spec)
    return trials_data(family, spec, say)


# -- trajectories ------------------------------------------------------------------------------------
def chain_data(links: int, trajectories: int, duration: float, seed: int) -> dict:
    """Free motion of a uniform planar chain, stacked, in absolute body angles."""
    from ..physics.chain import PlanarChain
    from ..physics.chain_motion import chain_trajectories, to_absolute

    trajs = chain_trajectories(PlanarChain.uniform(links), trajectories, duration, CHAIN_RATE_HZ, seed)
    q, qd, qdd = to_absolute(*(np.concatenate([t[i] for t in trajs]) for i in range(3)))
    traj = np.concatenate([np.full(len(t[0]), k) for k, t in enumerate(trajs)])
    return {"q": q, "qd": qd, "qdd": qdd, "trajectory": traj}


def trajectory_data(
    system: str, *, links: int, trajectories: int, duration: float, seed: int
) -> tuple[dict, Shape, dict]:
    """(stacked samples with a ``trajectory`` index, coordinates, source) of simulated free motion:
    a planar point-mass chain (``chain``, at 25 Hz, in absolute body angles ``phi_i``) or a nonholonomic
    example (random constraint-compliant initial states, 51 samples per trajectory)."""
    if system == "chain":
        data = chain_data(links, trajectories, duration, seed)
        names, units = [f"phi_{i + 1}" for i in range(links)], ["rad"] * links
        source = {
            "kind": "simulated",
            "generator": "ros_lnn.physics.chain_motion.chain_trajectories",
            "parameters": {
                "links": links,
                "mass": 1.0,
                "length": 1.0,
                "trajectories": trajectories,
                "duration": duration,
                "rate_hz": CHAIN_RATE_HZ,
                "seed": seed,
                "coordinates": "absolute body angles",
            },
        }
    else:
        from ..physics.nonholonomic import SYSTEMS, make_dataset

        ref = SYSTEMS[system]()
        data = make_dataset(ref, trajectories, duration, NONHOLONOMIC_SAMPLES, seed=seed)
        names = list(ref.coordinate_names)
        units = ["rad" if i in ref.angle_coordinates else "m" for i in range(ref.n)]
        source = {
            "kind": "simulated",
            "generator": "ros_lnn.physics.nonholonomic.make_dataset",
            "parameters": {
                "system": system,
                "trajectories": trajectories,
                "duration": duration,
                "samples_per_trajectory": NONHOLONOMIC_SAMPLES,
                "seed": seed,
            },
        }
    data["Q"] = np.zeros_like(data["qdd"])  # unforced motion (the sample layout of the trials)
    return data, Shape(system, tuple(names), (), tuple(units)), source


def simulated_trajectories(spec: RunSpec) -> RunData:
    data, shape, source = trajectory_data(
        str(spec.system),
        links=int(spec.links or 0),
        trajectories=int(spec.trajectories or 0),
        duration=float(spec.duration or 0.0),
        seed=spec.seed,
    )
    train, test, split = split_by_trajectory(data, spec.seed)
    summary = (
        f"data: {spec.system} ({source['kind']}), {split['n_trajectories']} trajectories; "
        f"train {split['n_train']} samples; test {split['n_test']} samples of trajectories "
        f"{split['test_trajectories']}"
    )
    return RunData(train, test, split, source, shape, summary, with_qe=spec.with_qe)


# -- trials ----------------------------------------------------------------------------------------------
def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def reference_system(name: str, links: int | None = None):
    """The analytic system of a trials run (units of its coordinates, parameters for the provenance)."""
    if name == "chain":
        from ..physics.chain import PlanarChain

        return PlanarChain.uniform(int(links or 2))
    if name == "crane":
        from ..physics.crane import Crane

        return Crane()
    return None


def trials_data(family: Family, spec: RunSpec, say: Callable[[str], None]) -> RunData:
    """Trials (simulated, a trials file or bags) → split → model order."""
    if spec.bags:
        return bag_data(family, spec, say)
    from ..physics.datasets import PAPER_TEST_TRIALS, chain_trials, paper_crane_trials, paper_split
    from ..physics.trials import load_trials

    with_qe = spec.with_qe
    system_name = str(spec.system)
    system = reference_system(system_name, spec.links)
    if spec.system == "chain":
        trials = chain_trials(
            system, n_trials=int(spec.trajectories or 0), duration=float(spec.duration or 0.0), seed=spec.seed
        )
        source = {
            "kind": "simulated",
            "generator": "ros_lnn.physics.datasets.chain_trials",
            "parameters": {
                "links": spec.links,
                "trajectories": spec.trajectories,
                "duration": spec.duration,
                "seed": spec.seed,
            },
        }
    elif spec.data:
        trials = load_trials(spec.data)
        source = {"kind": "trials_file", "path": str(spec.data), "sha256": file_sha256(spec.data)}
    else:
        trials = paper_crane_trials(system)
        source = {
            "kind": "simulated",
            "generator": "ros_lnn.physics.datasets.paper_crane_trials",
            "parameters": {"m1": system.m1, "m2": system.m2, "L": system.L, "g": system.g},
        }
    if not trials:
        raise DataError(f"{spec.data or 'simulation'}: no trials")
    free, servo = tuple(trials[0].free_joints), tuple(trials[0].servo_joints)
    known = list(system.coordinate_names) if system is not None else []
    units = tuple(system.coordinate_units[known.index(j)] if j in known else "rad" for j in free + servo)
    shape = Shape(system_name, free, servo, units)
    family.check_shape(shape)
    order = model_order(trials[0].coordinate_names, free, servo)

    names = [t.name for t in trials]
    if spec.test_trials:
        test_names = spec.test_trials
    elif all(n in names for n in PAPER_TEST_TRIALS):
        test_names = PAPER_TEST_TRIALS
    elif len(trials) >= 2:
        test_names = tuple(names[len(names) - len(names) // 2 :])
    else:
        raise DataError(
            "need at least two trials (one to train, one to test); pass more data or --test-trials"
        )
    val = None
    if spec.patience:  # early stopping selects weights: never on the test trials
        training_names = [n for n in names if n not in test_names]
        if len(training_names) < 2:
            raise DataError(
                "--patience selects weights on validation trials, which must not be the test trials: "
                "this data has one training trial; pass more trials or drop --patience"
            )
        val_trials = [t for t in trials if t.name == training_names[-1]]
        trials = [t for t in trials if t.name != training_names[-1]]
        val = stack(val_trials)
        say(f"early stopping validates on trial {training_names[-1]} (held out of training, not tested on)")
    available = sum(len(t) for t in trials if t.name not in test_names)
    n_train = available if spec.n_train is None else min(spec.n_train, available)
    train, test = paper_split(trials, n_train_samples=n_train, seed=spec.split_seed, test_names=test_names)
    split = {
        "train_trials": train["names"],
        "test_trials": test["names"],
        "n_train": int(n_train),
        "n_test": len(test["t"]),
        "split_seed": spec.split_seed,
    }
    if val is not None:
        split |= {"validation_trials": val["names"], "n_validation": len(val["t"])}
    with_qe = with_qe and bool(servo)
    summary = (
        f"data: {len(trials)} trials ({source['kind']}); train {split['n_train']} samples of "
        f"{split['train_trials']}; test {split['n_test']} samples of {split['test_trials']}"
    )
    return RunData(
        reorder(train, order),
        reorder(test, order),
        split,
        source,
        shape,
        summary,
        with_qe,
        val=None if val is None else reorder(val, order),
    )


def stack(trials) -> dict:
    """Every sample of ``trials`` stacked, with ``trial`` (position in the list) and ``names``."""
    from .data import SAMPLE_KEYS

    trials = list(trials)
    out: dict[str, Any] = {k: np.concatenate([getattr(t, k) for t in trials]) for k in SAMPLE_KEYS}
    out["trial"] = np.concatenate([np.full(len(t), i) for i, t in enumerate(trials)])
    out["names"] = [t.name for t in trials]
    return out


def bag_data(family: Family, spec: RunSpec, say: Callable[[str], None]) -> RunData:
    """Bags: training trials of ``--bag``, validation and test as :mod:`ros_lnn.bags.source` splits
    them; every finite training sample (or ``n_train`` of them), model order."""
    from ..bags.mapping import mapping_from_options
    from ..bags.source import bag_training_data

    mapping = mapping_from_options(spec.bag_config, dict(spec.bag_mapping))
    bag = bag_training_data(
        spec.bags, mapping, spec.with_qe, say, val_bags=spec.val_bags, test_bags=spec.test_bags
    )
    free, servo = tuple(mapping.free_joints), tuple(mapping.servo_joints)
    system_name = mapping.system or Path(str(spec.bags[0])).name
    units = tuple(mapping.unit(j) for j in free + servo)
    kinds = tuple(mapping.kind(j) for j in free + servo)
    shape = Shape(system_name, free, servo, units, kinds)
    family.check_shape(shape)
    order = model_order(bag.train[0].coordinate_names, free, servo)
    train = stack(bag.train)
    if spec.n_train is not None and spec.n_train < len(train["t"]):
        draw = np.random.default_rng(spec.split_seed).choice(len(train["t"]), spec.n_train, replace=False)
        pick = np.sort(draw)
        train = {k: (v if k == "names" else v[pick]) for k, v in train.items()}
    val = stack(bag.validation)
    test = stack(bag.test) if bag.test else val
    evaluated_on = "test trials" if bag.test else "validation trials (in-distribution: no test recording)"
    if bag.test and not bag.in_distribution:
        evaluated_on = "test trials (held-out recording)"
    elif bag.test:
        evaluated_on = "test trials (held-out recording; validation in-distribution)"
    split = {
        "train_trials": train["names"],
        "validation_trials": val["names"],
        "test_trials": test["names"],
        "n_train": len(train["t"]),
        "n_validation": len(val["t"]),
        "n_test": len(test["t"]),
        "split_seed": spec.split_seed,
        "validation_in_distribution": bag.in_distribution,
        "test_recording": bool(bag.test),
    }
    summary = (
        f"data: {len(bag.trials)} trials (rosbag); train {split['n_train']} samples of "
        f"{split['train_trials']}; validation {split['n_validation']} samples of {split['validation_trials']}"
        + (f"; test {split['n_test']} samples of {split['test_trials']}" if bag.test else "")
        + ("" if bag.test else "; no test recording")
    )
    return RunData(
        reorder(train, order),
        reorder(test, order),
        split,
        bag.source,
        shape,
        summary,
        bag.with_qe and bool(servo),
        tuple(test["names"]),
        val=reorder(val, order) if bag.test else None,
        evaluated_on=evaluated_on,
        bags=bag,
    )


def character_data(spec: RunSpec) -> RunData:
    """The DeLaN character data set: test letters ``test_trials`` (default e, q, v), training samples all
    of the other letters' or ``n_train`` of them."""
    from ..physics.datasets import split_record
    from ..physics.delan_data import TEST_LETTERS, find_character_data, load_character_data

    letters = spec.test_trials or TEST_LETTERS
    path = find_character_data(spec.data)  # --data: the file or its folder
    if path.is_file() and "labels" not in np.load(path).files:
        raise DataError(
            f"{path}: not the DeLaN character data (no 'labels'); pass character_data.npz, "
            "or train a trials file with --model servo_lnn --data"
        )
    train, test = load_character_data(path, letters)
    for side in (train, test):  # letters as trials: names and the per-sample index the metrics group by
        letter = side.pop("letter").tolist()
        side["names"] = list(dict.fromkeys(letter))
        side["trial"] = np.array([side["names"].index(c) for c in letter])
    n_available = len(train["q"])
    if spec.n_train is not None and spec.n_train < n_available:
        pick = np.sort(
            np.random.default_rng(spec.split_seed).choice(n_available, spec.n_train, replace=False)
        )
        train = {k: (v if k == "names" else v[pick]) for k, v in train.items()}
    split = split_record(train, test, spec.split_seed)
    source = {"kind": "delan_character", "path": str(path), "sha256": file_sha256(path)}
    shape = Shape(str(spec.system), ("joint_1", "joint_2"), (), ("rad", "rad"))
    summary = (
        f"data: {len(split['train_trials']) + len(split['test_trials'])} letters ({source['kind']}); "
        f"train {split['n_train']} samples of {split['train_trials']}; test {split['n_test']} samples "
        f"of {split['test_trials']}"
    )
    return RunData(train, test, split, source, shape, summary, with_qe=False)


__all__ = ["RunData", "load", "trajectory_data", "chain_data", "file_sha256"]
