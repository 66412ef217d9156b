"""``ros-lnn bench zoo [STUDY ...]``: the papers' studies (docs/studies.md), each reproducing one table
with its seeds, scale and time (short names of docs/papers.md):

    servo-seeds   ServoLNN on the crane over seeds: softplus vs ReLU on diag(L), with/without Q_e, and
                  the untrained network (the ServoLNN paper, Sec. 5.3 and Fig. 8)
    tlnn          TLNN vs LNN vs HNN vs neural ODE, absolute / relative angles, free 2-, 3-, 4-link chains
                  (the TLNN paper, Sec. 2.2)
    tlnn-forced   the same four in absolute angles on a 4-link chain under constant joint torques, and the
                  paper's 4-link example (Q = 0.05) (the TLNN paper, Fig. 6)
    lnn-nh        LNN vs LNN-nh on the three nonholonomic examples (the nonholonomic-LNN paper)
    partial       cost of the chain dynamics vs n: whole, serial columns, parallel columns (threads and
                  batched), the partial-Lagrangian paper's O(n⁴) → O(n³)
    examples      the partial-Lagrangian paper's examples as simulations, with their first-law residual
    delan         DeLaN on the character data: torque errors and rollouts (Euler, symplectic Euler, RK4)

Without a study name every study runs (≈ 1.5 h on a quiet 2-core CPU). Each writes
``<out>/<study>.json`` (figures, seeds, scale, seconds, load average) and PNG plots under ``<out>``
(default ``reports/zoo``, not committed). ``--quick`` shrinks every study to a smoke run; ``--seeds`` and
``--epochs`` override a study's scale (``servo-seeds --epochs 10000`` is the paper's schedule).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

STUDIES = ("servo-seeds", "tlnn", "tlnn-forced", "lnn-nh", "partial", "examples", "delan")


def _servo_seeds(args, out):
    from ...zoo.servo_seeds import format_table, run_study

    seeds = tuple(range(args.seeds or (2 if args.quick else 10)))
    epochs = args.epochs or (40 if args.quick else 3000)
    result = run_study(seeds, epochs, n_train=512 if args.quick else None, plot_dir=out)
    print(format_table(result))
    return result


def _partial(args, out):
    from ...zoo.partial_cost import format_parallel, format_table, measure, measure_parallel

    result = {}
    for batch in (1, 256):
        r = measure(range(1, 11), batch=batch, autograd=(batch == 1), min_time=0.02 if args.quick else 0.2)
        print(f"batch {batch}: seconds per evaluation of Q (microseconds), exponents fitted over n = 3..10")
        print(format_table(r))
        result[f"batch_{batch}"] = r
    ns = range(1, 6) if args.quick else (*range(1, 11), 12, 16, 24, 32)
    parallel = measure_parallel(ns, min_time=0.02 if args.quick else 0.2, plot_dir=out)
    print(format_parallel(parallel))
    result["parallel"] = parallel
    return result


def _examples(args, out):
    import numpy as np

    from ...zoo.partial_lagrangian_examples import run_examples

    sims = run_examples(duration=3.0 if args.quick else 10.0, n_samples=301 if args.quick else 1001)
    result = {}
    for name, entry in sims.items():
        row = {}
        for mode, sim in entry.items():
            if sim is None:
                continue
            row[mode] = {
                "E0": float(sim["E"][0]),
                "E_end": float(sim["E"][-1]),
                "first_law_residual": float(np.abs(sim["E"] - sim["E"][0] - sim["work"]).max()),
                "q_end": sim["q"][-1].tolist(),
                "qd_end_max": float(np.abs(sim["qd"][-1]).max()),
            }
        result[name] = row
        print(name, json.dumps(row))
    _plot_examples(sims, out)
    return result


def _plot_examples(sims, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(sims), figsize=(3.6 * len(sims), 5.5), squeeze=False)
    for col, (name, entry) in enumerate(sims.items()):
        for row, mode in enumerate(("damped", "controlled")):
            ax, sim = axes[row, col], entry[mode]
            if sim is None:
                ax.axis("off")
                continue
            ax.plot(sim["t"], sim["q"])
            ax.set_title(f"{name}: {mode}", fontsize=9)
            ax.set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(out / "partial_lagrangian_examples.png", dpi=100)
    plt.close(fig)


def _lnn_nh(args, out):
    from ...zoo.nonholonomic_study import format_table, run_study

    kw = (
        dict(
            n_trajectories=6,
            duration=2.0,
            n_samples=21,
            epochs=3,
            hidden=(32, 32),
            rollout_duration=2.0,
            n_rollouts=2,
        )
        if args.quick
        else dict(
            n_trajectories=40,
            duration=5.0,
            n_samples=51,
            epochs=300,  # the paper's
            hidden=(128, 128),
            rollout_duration=15.0,
            n_rollouts=5,
        )
    )
    if args.epochs:
        kw["epochs"] = args.epochs
    seeds = tuple(range(args.seeds or (1 if args.quick else 3)))
    result = run_study(seeds=seeds, plot_dir=out, **kw)
    print(format_table(result))
    return result


def _tlnn_options(args) -> dict:
    """The TLNN studies' options: ``--quick`` a tiny run, ``--epochs`` the schedule."""
    kw = (
        dict(n_ic=4, duration=2.0, epochs=3, tlnn_width=8, n_rollouts=3, rollout_duration=1.0)
        if args.quick
        else {}
    )
    if args.epochs:
        kw["epochs"] = args.epochs
    return kw


def _tlnn(args, out):
    from ...zoo.tlnn_study import format_table, run_study

    result = run_study(links=tuple(args.links or (2, 3, 4)), plot_dir=out, **_tlnn_options(args))
    print(format_table(result))
    return result


def _tlnn_forced(args, out):
    from ...zoo.tlnn_study import format_forced_table, run_forced_study

    result = run_forced_study(plot_dir=out, **_tlnn_options(args))
    print(format_forced_table(result))
    return result


def _delan(args, out):
    from ...zoo.delan_benchmark import run_benchmark

    epochs = args.epochs or (300 if args.quick else 10_000)
    return run_benchmark(args.data, epochs=epochs, quick=args.quick, plot_dir=out)


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def bench_zoo(args) -> dict:
    import torch

    torch.set_num_threads(int(getattr(args, "threads", None) or 1))
    for key, default in (
        ("quick", False),
        ("seeds", None),
        ("epochs", None),
        ("links", None),
        ("data", None),
    ):
        if not hasattr(args, key):
            setattr(args, key, default)
    studies = getattr(args, "studies", None) or STUDIES
    unknown = [s for s in studies if s not in STUDIES]
    if unknown:
        from ...errors import ConfigError

        raise ConfigError(f"bench zoo: unknown study {', '.join(unknown)}; choose from {', '.join(STUDIES)}")
    out = Path(getattr(args, "output", None) or "reports/zoo")
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for name in studies:
        start, cpu, load = time.perf_counter(), time.process_time(), _load()
        print(f"== {name} (load average {load})", flush=True)
        figures = globals()[f"_{name.replace('-', '_')}"](args, out)
        record = {
            "study": name,
            "quick": bool(args.quick),
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu,
            "load_average_start": load,
            "load_average_end": _load(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
            f"torch threads {torch.get_num_threads()}",
            "result": figures,
        }
        with open(out / f"{name}.json", "w") as fh:
            json.dump(record, fh, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
        print(
            f"== {name} took {record['seconds']:.0f} s (CPU {record['cpu_seconds']:.0f} s, load "
            f"{record['load_average_start']} -> {record['load_average_end']}); "
            f"figures in {out / (name + '.json')}"
        )
        result[name] = record
    return result


def add_study_arguments(parser) -> None:
    parser.add_argument("--seeds", type=int, help="number of seeds (servo-seeds: default 10, lnn-nh: 3)")
    parser.add_argument("--epochs", type=int, help="training epochs of the study's models")
    parser.add_argument("--links", type=int, nargs="+", help="chain sizes of the tlnn study (default 2 3 4)")
    parser.add_argument(
        "--output",
        "--out",
        dest="output",
        default="reports/zoo",
        help="folder for JSON and PNG (default reports/zoo)",
    )
    parser.add_argument("--data", help="DeLaN character data: its folder or character_data.npz")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("studies", nargs="*", choices=STUDIES, help="which studies (default: all)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    add_study_arguments(parser)
    bench_zoo(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
