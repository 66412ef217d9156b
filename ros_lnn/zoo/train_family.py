"""Data and models of the acceleration-trained zoo families (LNN, LNN-nh, TLNN, neural ODE) for
``ros-lnn train --model FAMILY`` (:mod:`ros_lnn.commands.train`), which is the one training path.

``python -m ros_lnn.zoo.train_family ARGS`` is an alias of ``ros-lnn train ARGS``.

Data: ``lnn`` / ``lnn_nh`` on a nonholonomic example (particle, drone, rolling_disk: random
constraint-compliant initial states, 51 samples per trajectory); ``lnn`` / ``tlnn`` / ``node`` on a
planar point-mass chain (``--system chain --links N``, free motion from random states at 25 Hz, in
absolute body angles ``phi_i``). Whole trajectories are held out for the test (30 %, at least one).
"""
from __future__ import annotations

import sys

import numpy as np

NONHOLONOMIC = ("particle", "drone", "rolling_disk")
CHAIN_RATE_HZ = 25.0
NONHOLONOMIC_SAMPLES = 51
TEST_FRACTION = 0.3


def split_by_trajectory(data: dict, seed: int) -> tuple[dict, dict, dict]:
    """(train, test, split info): whole trajectories held out, chosen at random by ``seed``."""
    from ..errors import DataError

    ids = np.unique(data["trajectory"])
    if len(ids) < 2:
        raise DataError(f"need at least 2 trajectories (one to train, one to test), got {len(ids)}; "
                        "raise --trajectories")
    n_test = max(1, int(round(TEST_FRACTION * len(ids))))
    test_ids = np.sort(np.random.default_rng(seed).choice(ids, n_test, replace=False))
    is_test = np.isin(data["trajectory"], test_ids)
    pick = lambda sel: {k: v[sel] for k, v in data.items()}  # noqa: E731
    info = {"test_trajectories": [int(i) for i in test_ids], "n_trajectories": int(len(ids)),
            "n_train": int((~is_test).sum()), "n_test": int(is_test.sum())}
    return pick(~is_test), pick(is_test), info


def chain_data(links: int, trajectories: int, duration: float, seed: int) -> dict:
    """Free motion of a uniform planar chain, stacked, in absolute body angles."""
    from ..physics.chain import PlanarChain
    from ..physics.chain_motion import chain_trajectories, to_absolute

    trajs = chain_trajectories(PlanarChain.uniform(links), trajectories, duration, CHAIN_RATE_HZ, seed)
    q, qd, qdd = to_absolute(*(np.concatenate([t[i] for t in trajs]) for i in range(3)))
    traj = np.concatenate([np.full(len(t[0]), k) for k, t in enumerate(trajs)])
    return {"q": q, "qd": qd, "qdd": qdd, "trajectory": traj}


def build(family: str, system: str, *, links: int, trajectories: int, duration: float, hidden, activation: str,
          seed: int):
    """(model, data, description) for an acceleration family on its reference system. ``description``:
    coordinate names and units and how the data was made (for the provenance)."""
    from ..models.lnn import for_system
    from ..models.node_baseline import NeuralODE
    from ..models.tlnn import TLNN, serial_chain_topology
    from ..models.lnn import LNN

    hidden = tuple(hidden)
    if system == "chain":
        data = chain_data(links, trajectories, duration, seed)
        names, units = [f"phi_{i + 1}" for i in range(links)], ["rad"] * links
        if family == "tlnn":
            model = TLNN(serial_chain_topology(links), hidden=hidden, activation=activation)
        elif family == "node":
            model = NeuralODE(links, hidden=hidden, activation=activation)
        else:
            model = LNN(links, hidden=hidden, activation=activation, angle_coordinates=range(links),
                        coordinate_names=names)
        source = {"kind": "simulated", "generator": "ros_lnn.physics.chain_motion.chain_trajectories",
                  "parameters": {"links": links, "mass": 1.0, "length": 1.0, "trajectories": trajectories,
                                 "duration": duration, "rate_hz": CHAIN_RATE_HZ, "seed": seed,
                                 "coordinates": "absolute body angles"}}
    else:
        from ..physics.nonholonomic import SYSTEMS, make_dataset

        ref = SYSTEMS[system]()
        data = make_dataset(ref, trajectories, duration, NONHOLONOMIC_SAMPLES, seed=seed)
        model = for_system(ref, family == "lnn_nh", hidden=hidden, activation=activation)
        names = list(ref.coordinate_names)
        units = ["rad" if i in ref.angle_coordinates else "m" for i in range(ref.n)]
        source = {"kind": "simulated", "generator": "ros_lnn.physics.nonholonomic.make_dataset",
                  "parameters": {"system": system, "trajectories": trajectories, "duration": duration,
                                 "samples_per_trajectory": NONHOLONOMIC_SAMPLES, "seed": seed}}
    data["Q"] = np.zeros_like(data["qdd"])  # unforced motion (the sample layout of the other trainers)
    return model, data, {"coordinate_names": names, "coordinate_units": units, "data": source}


def acceleration_metrics(model, samples: dict) -> dict:
    """Test accuracy of ``q̈``: ``qdd_mse`` (mean over samples of the squared error summed over
    coordinates, the papers' measure), ``qdd_nmse`` (mean squared error over the variance) and
    ``non_finite`` (:func:`ros_lnn.training.trainer.evaluate_acceleration`)."""
    from ..training.trainer import evaluate_acceleration

    return evaluate_acceleration(model, samples)


def main(argv=None) -> int:
    from ..cli import main as cli_main

    return cli_main(["train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
