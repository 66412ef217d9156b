"""Model-zoo studies (``ros-lnn bench zoo`` once wired; also ``python -m ros_lnn.commands.bench_zoo``;
the papers by their short names of docs/papers.md):

    partial       cost of the chain dynamics vs n (whole vs partial sum vs critical path), partial-Lagrangian
                  paper
    examples      the partial-Lagrangian paper's examples as simulations, with their first-law residual
    nonholonomic  LNN vs LNN-nh on the three nonholonomic examples, nonholonomic-LNN paper
    tlnn          TLNN vs LNN vs neural ODE, absolute / relative angles, 2-, 3- and 4-link chains, TLNN paper

PNG plots go to ``reports/zoo/`` (not committed). ``--quick`` shrinks every study to a smoke run.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

STUDIES = ("partial", "examples", "nonholonomic", "tlnn")


def _partial(quick, out):
    from ..zoo.partial_cost import format_table, measure

    result = {}
    for batch in (1, 256):
        r = measure(range(1, 11), batch=batch, autograd=(batch == 1), min_time=0.02 if quick else 0.2)
        print(f"batch {batch}: seconds per evaluation of Q (microseconds), exponents fitted over n = 3..10")
        print(format_table(r))
        result[f"batch_{batch}"] = r
    return result


def _examples(quick, out):
    import numpy as np

    from ..zoo.partial_lagrangian_examples import run_examples

    sims = run_examples(duration=3.0 if quick else 10.0, n_samples=301 if quick else 1001)
    result = {}
    for name, entry in sims.items():
        row = {}
        for mode, sim in entry.items():
            if sim is None:
                continue
            row[mode] = {"E0": float(sim["E"][0]), "E_end": float(sim["E"][-1]),
                         "first_law_residual": float(np.abs(sim["E"] - sim["E"][0] - sim["work"]).max()),
                         "q_end": sim["q"][-1].tolist(), "qd_end_max": float(np.abs(sim["qd"][-1]).max())}
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


def _nonholonomic(quick, out):
    from ..zoo.nonholonomic_study import run_study

    kw = (dict(n_trajectories=6, duration=2.0, n_samples=21, epochs=3, hidden=(32, 32), rollout_duration=2.0,
               n_rollouts=2) if quick else dict(n_trajectories=40, duration=5.0, n_samples=51, epochs=60,
                                                 hidden=(128, 128), rollout_duration=15.0, n_rollouts=5))
    return run_study(plot_dir=out, **kw)


def _tlnn(quick, out, links=(2, 3, 4)):
    from ..zoo.tlnn_study import run_study

    kw = (dict(n_ic=4, duration=2.0, epochs=3, tlnn_width=8, n_rollouts=3, rollout_duration=1.0)
          if quick else {})
    return run_study(links=tuple(links), plot_dir=out, **kw)


def bench_zoo(args) -> dict:
    import torch

    torch.set_num_threads(int(getattr(args, "threads", None) or 1))
    quick = bool(getattr(args, "quick", False))
    studies = getattr(args, "studies", None) or STUDIES
    out = Path(getattr(args, "out", None) or "reports/zoo")
    result = {}
    for name in studies:
        start = time.perf_counter()
        print(f"== {name}")
        extra = {"links": args.links} if name == "tlnn" and getattr(args, "links", None) else {}
        result[name] = globals()[f"_{name}"](quick, out, **extra)
        print(f"== {name} took {time.perf_counter() - start:.0f} s")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", nargs="*", choices=STUDIES, help="which studies (default: all)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="reports/zoo", help="folder for PNG plots")
    parser.add_argument("--json", help="write the figures as JSON")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--links", type=int, nargs="+", help="chain sizes of the tlnn study (default 2 3 4)")
    args = parser.parse_args(argv)
    result = bench_zoo(args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
