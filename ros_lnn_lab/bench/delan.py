"""``ros-lnn bench delan [--data DIR] [--epochs N] [--quick]``: the DeLaN character benchmark
(:mod:`ros_lnn_lab.studies.delan_benchmark`): torque errors against the published figures, time per sample,
rollouts of the held-out letters. The data do not ship with the package: ``--data`` names their folder
(or ``$ROS_LNN_DELAN_DATA`` does); without them the command stops with one line saying so."""

from __future__ import annotations


def bench_delan(args) -> dict:
    from ros_lnn_lab.studies.delan_benchmark import run_benchmark

    quick = bool(getattr(args, "quick", False))
    epochs = getattr(args, "epochs", None) or (300 if quick else 10_000)
    return run_benchmark(getattr(args, "data", None), epochs=epochs, quick=quick)
