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

Each study takes one :class:`~ros_lnn_lab.studies.config.StudyConfig`: its module's ``DEFAULTS``
(``QUICK`` under
``--quick``) with the options given, built in one place (:func:`study_config`); the options of this
module's own command line are generated from the StudyConfig fields (:func:`add_study_arguments`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import platform
import time
from pathlib import Path

from ros_lnn_lab.studies.config import StudyConfig

#: study name -> its module in :mod:`ros_lnn_lab.studies` (``DEFAULTS``, ``QUICK``: its StudyConfigs).
MODULES = {
    "servo-seeds": "servo_seeds",
    "tlnn": "tlnn_study",
    "tlnn-forced": "tlnn_study",
    "lnn-nh": "nonholonomic_study",
    "partial": "partial_cost",
    "examples": "partial_lagrangian_examples",
    "delan": "delan_benchmark",
}
#: study name -> the functions of its module that run it and format its table (None: it prints none).
RUNNERS = {
    "servo-seeds": ("run_study", "format_table"),
    "tlnn": ("run_study", "format_table"),
    "tlnn-forced": ("run_forced_study", "format_forced_table"),
    "lnn-nh": ("run_study", "format_table"),
    "partial": ("run_study", None),
    "examples": ("run_study", None),
    "delan": ("run_study", None),
}
STUDIES = tuple(MODULES)
DEFAULT_OUTPUT = Path("reports/zoo")


def _study_module(name: str):
    return importlib.import_module(f"ros_lnn_lab.studies.{MODULES[name]}")


def study_config(args, study: str) -> StudyConfig:
    """The one place the options become a study's :class:`StudyConfig`: the study's ``DEFAULTS`` (its
    ``QUICK`` under ``--quick``), replaced by every option given (each field's ``option`` metadata names
    it and parses it; unset or 0 keeps the study's value), the output folder (default reports/zoo) and
    progress on stdout."""
    module = _study_module(study)
    config = module.QUICK if getattr(args, "quick", False) else module.DEFAULTS
    given = {}
    for f in dataclasses.fields(StudyConfig):
        cli = f.metadata.get("cli")
        if cli is None or f.name in ("quick", "output"):
            continue
        value = getattr(args, _flag(f)[2:].replace("-", "_"), None)
        if value is not None and cli["parse"] is not None:
            value = cli["parse"](value)
        if value:
            given[f.name] = value
    output = Path(getattr(args, "output", None) or DEFAULT_OUTPUT)
    return config.replace(**given, output=output, progress=print)


def _run_study(name: str, config: StudyConfig):
    """Run study ``name`` and print its table where it has one."""
    module = _study_module(name)
    run, table = RUNNERS[name]
    result = getattr(module, run)(config)
    if table is not None:
        print(getattr(module, table)(result))
    return result


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def bench_zoo(args) -> dict:
    import torch

    torch.set_num_threads(int(getattr(args, "threads", None) or 1))
    studies = getattr(args, "studies", None) or STUDIES
    unknown = [s for s in studies if s not in STUDIES]
    if unknown:
        from ros_lnn.errors import ConfigError

        raise ConfigError(f"bench zoo: unknown study {', '.join(unknown)}; choose from {', '.join(STUDIES)}")
    configs = {name: study_config(args, name) for name in studies}
    out = Path(getattr(args, "output", None) or DEFAULT_OUTPUT)
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for name, config in configs.items():
        start, cpu, load = time.perf_counter(), time.process_time(), _load()
        print(f"== {name} (load average {load})", flush=True)
        figures = _run_study(name, config)
        record = {
            "study": name,
            "quick": config.quick,
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


def _flag(f: dataclasses.Field) -> str:
    """A StudyConfig field's option (``--seeds`` for ``seeds``)."""
    return f.metadata["cli"]["flag"] or "--" + f.name.replace("_", "-")


def add_study_arguments(parser) -> None:
    """The study options, one per :class:`StudyConfig` field with ``option`` metadata (flag, help, type,
    arity); ``--output`` also as ``--out``."""
    for f in dataclasses.fields(StudyConfig):
        cli = f.metadata.get("cli")
        if cli is None:
            continue
        kwargs = {k: v for k, v in cli.items() if k not in ("flag", "parse")}
        flags = [_flag(f)] + (["--out"] if f.name == "output" else [])
        parser.add_argument(*flags, dest=f.name, **kwargs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("studies", nargs="*", choices=STUDIES, help="which studies (default: all)")
    parser.add_argument("--threads", type=int, default=1)
    add_study_arguments(parser)
    bench_zoo(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
