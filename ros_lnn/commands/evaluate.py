"""``ros-lnn evaluate``: accuracy of an ONNX model on trials (npz from ``ros-lnn simulate``, or the
paper's held-out crane trials by default). No torch needed."""
from __future__ import annotations

import json

from ..errors import DataError


def add_arguments(parser):
    parser.add_argument("--model", help="ONNX model (default: the shipped crane model)")
    parser.add_argument("--data", metavar="TRIALS.npz", help="trials to evaluate on (default: paper test trials)")
    parser.add_argument("--trials", help="comma-separated trial names to keep (default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")


def run(args) -> int:
    from ..inference.evaluation import evaluate_trial
    from ..inference.runtime import ServoLnnRuntime

    rt = ServoLnnRuntime(args.model)
    if args.data:
        from ..physics.trials import load_trials

        trials = load_trials(args.data)
    else:
        from ..physics.datasets import PAPER_TEST_TRIALS, paper_crane_trials

        trials = [t for t in paper_crane_trials() if t.name in PAPER_TEST_TRIALS]
    if args.trials:
        wanted = [s.strip() for s in args.trials.split(",") if s.strip()]
        missing = [w for w in wanted if w not in {t.name for t in trials}]
        if missing:
            raise DataError(f"trials {missing} not found; available: {[t.name for t in trials]}")
        trials = [t for t in trials if t.name in wanted]
    for trial in trials:
        absent = [j for j in rt.joints if j not in trial.coordinate_names]
        if absent:
            raise DataError(f"trial '{trial.name}' has no joints {absent} that the model {rt.path.name} needs")
    print(f"model {rt.path.name}: free {rt.free_joints}, servo {rt.servo_joints}")
    print(f"{'trial':<14} {'samples':>7} {'qdd_f nMSE':>11} {'Q_e rel rms':>12} {'E rms [J]':>10} {'M rel err':>10}")
    results = {}
    for trial in trials:
        _, m = evaluate_trial(rt, trial)
        results[trial.name] = m
        print(f"{trial.name:<14} {len(trial):>7} {m['qdd_f_nmse']:>11.2e} {100 * m['Q_e_rel_rms']:>11.2f}% "
              f"{m['E_rms']:>10.2e} {m['M_rel_err']:>10.2e}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0
