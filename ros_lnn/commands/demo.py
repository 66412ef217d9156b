"""``ros-lnn demo``: the shipped model against exact physics, or the DAC controller closed loop.

Live (default when rclpy is importable): simulator node + estimator node in one process over real
topics, printing a live table. ``--offline``: the model evaluated directly on a held-out simulated
trial of the paper's crane data set. ``--dac``: the tensor-invariant controller tracing a circle
around an obstacle with the demo arm, figures written to ``--output``. No torch needed for any.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConfigError

DESCRIPTION = """Live (the default, with rclpy): the crane simulator and the servo_lnn estimator run as ROS 2
nodes in this process, over real topics (ros2 topic echo sees them); every second a row gives the simulator's
published rate, the estimator's input rate and in-node latency, and estimated vs true Q_e, the free
joint's acceleration and E - E0. At the end: the rate held (or the rate reached and why) and the mean
errors. --offline: no ROS; the model on a held-out simulated trial. --dac: the tensor-invariant
controller demo (figures in --output)."""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.add_argument(
        "--offline",
        action="store_true",
        help="no ROS: evaluate the model on a held-out simulated trial (instead of the live run)",
    )
    parser.add_argument("--model", help="ONNX model (default: the shipped crane model)")
    parser.add_argument(
        "--trial", default="multi_a", help="offline: held-out paper trial to replay (default: multi_a)"
    )
    parser.add_argument("--rows", type=int, default=8, help="offline: table rows to print")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds to run (live: wall clock, default 10; --dac: simulated, default 6)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=250.0,
        help="live: the simulator's joint_states rate in Hz (default 250, which holds on a loaded "
        "2-core machine; the run reports the rate it held)",
    )
    parser.add_argument("--dac", action="store_true", help="the DAC controller demo instead of the estimator")
    parser.add_argument(
        "--output",
        default="reports/dac_demo",
        help="--dac: folder for figures and summary (default reports/dac_demo)",
    )
    parser.add_argument("--quick", action="store_true", help="--dac: shorter run (3 s)")
    parser.add_argument(
        "--no-avoidance", action="store_true", help="--dac: switch the obstacle potential off"
    )
    parser.add_argument(
        "--plant-mismatch",
        action="store_true",
        help="--dac: the arm differs from its URDF (friction, payload, rotor inertia): "
        "record it, train the learned port, run the task model-only / data-assisted / "
        "exact-model (needs torch)",
    )
    parser.add_argument(
        "--epochs", type=int, help="--dac --plant-mismatch: training epochs (default 300, quick 40)"
    )


def run(args) -> int:
    if args.dac:
        return run_dac_demo(args)
    if not args.offline:
        try:
            from ..demos.live import run_live_demo
        except ImportError as exc:
            print(f"live demo unavailable ({exc}); running the offline demo instead")
        else:
            return int(
                run_live_demo(duration_s=args.duration or 10.0, model_path=args.model, rate_hz=args.rate) or 0
            )
    return offline_demo(args.model, args.trial, args.rows)


def held_out_trial(name: str):
    """One of the paper's test trials, simulated exactly (never seen in training)."""
    from ..physics.crane import Crane
    from ..physics.datasets import PAPER_TEST_TRIALS, PAPER_TRIALS, crane_trial

    if name not in PAPER_TEST_TRIALS:
        raise ConfigError(f"trial '{name}' is not held out; choose one of {', '.join(PAPER_TEST_TRIALS)}")
    spec = next(s for s in PAPER_TRIALS if s.name == name)
    return crane_trial(Crane(), spec)


def offline_demo(model_path, trial_name: str, rows: int) -> int:
    from ..inference.evaluation import evaluate_trial, model_order_inputs
    from ..inference.runtime import ServoLnnRuntime
    from ..timing import summary_us, time_calls

    rt = ServoLnnRuntime(model_path)
    if rt.metadata.system not in ("", "crane"):
        raise ConfigError(
            f"{rt.path.name} models '{rt.metadata.system}'; the offline demo replays crane trials"
        )
    print(f"model: {rt.path} ({rt.metadata.family}, free {rt.free_joints}, servo {rt.servo_joints})")
    print(f"simulating held-out trial '{trial_name}' (20 s, RK45 at 1e-10) ...", flush=True)
    trial = held_out_trial(trial_name)
    out, m = evaluate_trial(rt, trial)
    q, qd, qdd, Q = model_order_inputs(trial, rt.joints)
    f, e = slice(0, rt.n_f), slice(rt.n_f, rt.n)

    idx = np.linspace(0, len(trial.t) - 1, max(rows, 2)).astype(int)
    header = (
        f"{'t [s]':>7} | {'Q_e true':>9} {'Q_e est':>9} | {'qdd_f true':>10} {'qdd_f est':>10} | "
        f"{'E true':>8} {'E est':>8}"
    )
    print(header)
    print("-" * len(header))
    offset = m["E_offset"]
    for i in idx:
        print(
            f"{trial.t[i]:7.2f} | {Q[i, e][0]:9.4f} {out['Q_e'][i][0]:9.4f} | "
            f"{qdd[i, f][0]:10.4f} {out['qdd_f'][i][0]:10.4f} | {trial.E[i]:8.4f} {out['E'][i] - offset:8.4f}"
        )
    print("-" * len(header))
    print(
        f"samples {len(trial.t)}: Q_e relative RMS error {100 * m['Q_e_rel_rms']:.2f} %, "
        f"q̈_f nMSE {m['qdd_f_nmse']:.2e}, E RMS error {m['E_rms']:.2e} J "
        f"(after removing the constant {offset:+.4f} J: V is known up to a constant)"
    )
    i = 0

    def one_sample():
        nonlocal i
        i = (i + 1) % len(q)
        rt.evaluate(q[i], qd[i], qdd[i, e], Q[i, f])

    s = summary_us(time_calls(one_sample, 2000))
    print(
        f"one sample at a time, all outputs, 1 thread: median {s['median_us']:.1f} µs, p99 "
        f"{s['p99_us']:.1f} µs"
    )
    return 0


# ------------------------------------------------------------------------------ --dac (demos/dac.py)
def add_dac_demo_arguments(parser):
    parser.add_argument(
        "--output",
        default="reports/dac_demo",
        help="folder for the figures and summary (default reports/dac_demo)",
    )
    parser.add_argument("--duration", type=float, default=None, help="simulated seconds (default 6, quick 3)")
    parser.add_argument("--quick", action="store_true", help="shorter run")
    parser.add_argument("--no-avoidance", action="store_true", help="switch the obstacle potential off")
    parser.add_argument(
        "--plant-mismatch",
        action="store_true",
        help="the arm differs from its URDF: record, train the learned port, compare three runs",
    )


def run_dac_demo(args) -> int:
    import json

    from ..demos.dac import CIRCLE_RADIUS, simulate_demo, summarize, write_figures

    if getattr(args, "plant_mismatch", False):
        return run_plant_mismatch(args)
    duration = getattr(args, "duration", None) or (3.0 if getattr(args, "quick", False) else 6.0)
    folder = Path(getattr(args, "output", None) or "reports/dac_demo")
    print(
        f"DAC demo: demo arm, law III, circle r = {CIRCLE_RADIUS} m, obstacle on the wrist path, "
        f"{duration:.1f} s simulated"
    )
    out = simulate_demo(
        duration,
        avoidance=not getattr(args, "no_avoidance", False),
        progress=lambda i, n: print(f"  step {i}/{n}", end="\r", flush=True),
    )
    print()
    summary = summarize(out)
    paths = write_figures(out, folder)
    (folder / "dac_summary.json").write_text(json.dumps(summary, indent=2))
    for k, v in summary.items():
        print(f"  {k:38s} {v:.4g}")
    print("figures: " + ", ".join(str(p) for p in paths))
    return 0


def run_plant_mismatch(args) -> int:
    import json

    from ..demos.dac import (
        DEMO_MISMATCH_VALUES,
        TASK_SECONDS,
        compare_three,
        demo_plant,
        record_arm,
        train_port,
        write_recordings_bag,
    )
    from ..inference.residual import ResidualRuntime

    quick = getattr(args, "quick", False)
    folder = Path(getattr(args, "output", None) or "reports/dac_demo") / "plant_mismatch"
    folder.mkdir(parents=True, exist_ok=True)
    arm, plant = demo_plant()
    names = list(plant.certain.joint_names)
    print(f"DAC with plant mismatch: {DEMO_MISMATCH_VALUES}")
    print(
        "1. record the arm under the model-only controller (task, circles, excitations; 500 Hz) ...",
        flush=True,
    )
    logs = record_arm(arm, plant, quick, progress=lambda m: print(m, flush=True))
    bag = folder / "recordings"
    if bag.exists():
        import shutil

        shutil.rmtree(bag)
    write_recordings_bag(bag, logs, names)
    print(f"   wrote {bag} ({sum(len(g.t) for g in logs)} joint states)")
    epochs = int(getattr(args, "epochs", None) or (40 if quick else 300))
    print(
        f"2. train the learned port: ros-lnn train --model dac_residual --bag {bag} "
        f"--config config/dac_residual.yaml --epochs {epochs} ...",
        flush=True,
    )
    model = train_port(bag, folder, epochs, progress=lambda m: print("   " + m, flush=True))
    port = ResidualRuntime(model, names)
    print(
        f"3. load {model} with ONNX Runtime; the same task three times "
        f"(law II on the tool circle's joint path, {TASK_SECONDS:.0f} s at 500 Hz) ...",
        flush=True,
    )
    runs = compare_three(arm, plant, port)
    summary = {k: v["tracking_rms_m"] for k, v in runs.items()}
    doc = {"tracking_rms_m": summary, "mismatch": DEMO_MISMATCH_VALUES, "model": str(model)}
    (folder / "summary.json").write_text(json.dumps(doc, indent=2))
    a, b, c = (summary[k] for k in ("model-only", "data-assisted", "exact-model"))
    print(f"   data-assisted / model-only = 1/{a / b:.0f}, data-assisted / exact-model = {b / c:.1f}")
    print(f"tracking rms [m]: model-only {a:.3g}, data-assisted {b:.3g}, exact-model {c:.3g}")
    return 0
