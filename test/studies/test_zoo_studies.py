"""Tiny versions of the papers' studies (``ros-lnn bench zoo``): each runs in seconds and checks what the
full study's table rests on."""

import json

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.physics.chain import PlanarChain, rod  # noqa: E402
from ros_lnn.physics.chain_motion import integrate, random_states  # noqa: E402
from ros_lnn_lab.studies.rollouts import METHODS, rollout  # noqa: E402


# -- ServoLNN seeds ---------------------------------------------------------------------------------
def test_servo_seeds_trained_runs_beat_the_untrained_network():
    from ros_lnn_lab.studies.config import StudyConfig
    from ros_lnn_lab.studies.servo_seeds import format_table, run_study

    config = StudyConfig(seeds=(0, 1), epochs=60, samples=512).silent()
    r = run_study(config, configs=(("softplus", True),))
    runs = r["configs"]["softplus diag, with Q_e"]["runs"]
    untrained = r["untrained"]["softplus diag, untrained"]["runs"]
    assert [x["seed"] for x in runs] == [0, 1] and r["epochs"] == 60
    for trained, start in zip(runs, untrained):
        assert trained["final_loss"] < 0.8 * start["loss_with_qe"]
        assert trained["qdd_f_nmse"] < start["qdd_f_nmse"]
        assert trained["curve_loss"][-1] < trained["curve_loss"][0]
    # different seeds start from different networks (only the seed changes between runs)
    assert untrained[0]["qdd_f_nmse"] != untrained[1]["qdd_f_nmse"]
    s = r["configs"]["softplus diag, with Q_e"]["summary"]["qdd_f_nmse"]
    assert s["min"] <= s["median"] <= s["max"] and s["n"] == 2
    assert "| softplus diag, with Q_e | 0/2 |" in format_table(r)


def test_untrained_baseline_is_the_network_the_run_starts_from():
    """The baseline's metrics equal those of run() with zero optimiser steps' worth of change: the same
    seed builds the same network (checked on the loss, evaluated independently of the study code)."""
    from ros_lnn.families import Network
    from ros_lnn.models.losses import WITH_QE, loss_terms
    from ros_lnn.training.sources import load
    from ros_lnn.training.spec import RunSpec
    from ros_lnn_lab.studies.servo_seeds import untrained_baseline

    row = untrained_baseline("relu", 3, n_train=256)
    spec = RunSpec(family="servo_lnn", diag_activation="relu", seed=3, n_train=256).resolved()
    data = load(spec.family_spec, spec, lambda s: None)
    torch.manual_seed(3)
    model = spec.family_spec.build(data.shape, Network((64,), "softplus", 0.01, "relu"))
    spec.family_spec.normalise(model, data.train)
    batch = {k: torch.as_tensor(data.train[k], dtype=torch.float64) for k in ("q", "qd", "qdd", "Q")}
    with torch.no_grad():
        loss = sum(float(v) for v in loss_terms(model.double(), batch, WITH_QE).values())
    assert row["loss_with_qe"] == pytest.approx(loss, rel=1e-9)


# -- rollouts ---------------------------------------------------------------------------------------
def test_integrators_converge_at_their_orders_on_an_oscillator():
    """q̈ = −q from (1, 0): q(t) = cos t. Euler and symplectic Euler are first order, RK4 fourth."""
    q0, v0 = torch.ones(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)

    def oscillator(q, v, Q):
        return v, -q

    order = {}
    for method in METHODS:
        err = [
            abs(rollout(oscillator, q0, v0, 2.0, dt, method)[-1, 0, 0].item() - np.cos(2.0))
            for dt in (0.02, 0.01)
        ]
        order[method] = np.log2(err[0] / err[1])
    assert order["euler"] == pytest.approx(1.0, abs=0.1)
    assert order["symplectic_euler"] == pytest.approx(1.0, abs=0.1)
    assert order["rk4"] == pytest.approx(4.0, abs=0.2)
    # symplectic Euler keeps the oscillator's energy bounded over many periods; explicit Euler grows it
    energy = {
        m: (rollout(oscillator, q0, v0, 60.0, 0.05, m)[..., :].pow(2).sum(-1) / 2)[-1].item()
        for m in ("euler", "symplectic_euler")
    }
    assert abs(energy["symplectic_euler"] - 0.5) < 0.05 and energy["euler"] > 2.0


def test_rollout_forces_enter_as_constant_or_function_of_time():
    q0, v0 = torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)

    def pushed(q, v, Q):
        return v, Q

    const = rollout(pushed, q0, v0, 1.0, 0.01, "rk4", torch.full((1, 1), 2.0, dtype=torch.float64))
    assert const[-1, 0, 0].item() == pytest.approx(1.0, rel=1e-12)  # q = t² for q̈ = 2
    ramp = rollout(
        pushed, q0, v0, 1.0, 0.01, "rk4", lambda t: torch.full((1, 1), 6.0 * t, dtype=torch.float64)
    )
    assert ramp[-1, 0, 0].item() == pytest.approx(1.0, rel=1e-10)  # q = t³ for q̈ = 6t


# -- TLNN study: forces -----------------------------------------------------------------------------
def test_joint_torques_do_the_work_of_the_absolute_angle_forces():
    from ros_lnn.physics.chain_motion import to_relative
    from ros_lnn_lab.studies.tlnn_study import joint_torques

    rng = np.random.default_rng(0)
    Q_abs, d_phi = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    d_rel = to_relative(d_phi, d_phi)[0]
    np.testing.assert_allclose((joint_torques(Q_abs) * d_rel).sum(-1), (Q_abs * d_phi).sum(-1), rtol=1e-12)


def test_forced_chain_gains_the_work_of_its_constant_torques():
    chain = PlanarChain([rod(f"j{i}") for i in range(3)])
    rng = np.random.default_rng(1)
    q0, qd0 = random_states(3, 2, rng, 0.5, 0.5)
    tau = rng.uniform(-0.5, 0.5, (2, 3))
    q, qd, _ = integrate(chain, q0, qd0, 2.0, 50.0, forces=tau)
    flat = q.reshape(-1, 3)
    E = chain.dynamics(flat, qd.reshape(-1, 3), qdd=np.zeros_like(flat))["E"].reshape(q.shape[:2])
    work = ((q - q[0]) * tau).sum(-1)  # constant torques: W = τ·Δq
    assert np.abs(E - E[0] - work).max() < 1e-6 and np.abs(work).max() > 0.05


def test_tiny_forced_study_feeds_the_forces_to_every_model():
    from ros_lnn_lab.studies.tlnn_study import (
        DEFAULTS,
        FAMILIES,
        forced_study,
        format_forced_table,
        make_model,
    )

    config = DEFAULTS.replace(
        trajectories=4, duration=1.0, epochs=1, hidden=(8,), rollouts=3, rollout_duration=0.5
    ).silent()
    r = forced_study(
        2,
        config,
        rollout_hz=20.0,
        example={"phi": [0.3, -0.2], "phid": [0.1, 0.0], "Q": [0.05, 0.05]},
    )
    assert list(r["models"]) == [f"{f} (absolute)" for f in FAMILIES]
    for m in r["models"].values():
        assert np.all(np.isfinite(m["E_median"])) and len(m["example_E"]) == len(r["t"])
        assert m["example_E"][0] == 0.0
    assert "paper example" in format_forced_table(r)
    q, qd = torch.zeros(3, 2, dtype=torch.float64), torch.ones(3, 2, dtype=torch.float64)
    for family in FAMILIES:
        model = make_model(family, 2, 8, forced=True).double()
        with torch.no_grad():
            free, pushed = model(q, qd), model(q, qd, torch.full((3, 2), 0.5, dtype=torch.float64))
        assert not torch.allclose(free, pushed), family


# -- LNN-nh -----------------------------------------------------------------------------------------
def test_tiny_nonholonomic_study_summarises_the_ratio_over_seeds():
    from ros_lnn_lab.studies.config import StudyConfig
    from ros_lnn_lab.studies.nonholonomic_study import format_table, run_study

    config = StudyConfig(
        seeds=(0, 1),
        trajectories=9,
        duration=1.0,
        epochs=2,
        hidden=(16, 16),
        rollouts=2,
        rollout_duration=0.5,
    ).silent()
    r = run_study(config, systems=("particle",), n_samples=11)
    assert r["scale"]["n_trajectories"] == 9 and r["scale"]["n_samples"] == 11
    s = r["systems"]["particle"]["summary"]
    runs = r["systems"]["particle"]["runs"]
    assert s["acc_mse_ratio"] == pytest.approx(
        [x["LNN"]["acc_mse_test"] / x["LNN-nh"]["acc_mse_test"] for x in runs]
    )
    assert 0 <= s["seeds_nh_less_final_drift"] <= 2
    # LNN-nh keeps the known constraint along its rollouts up to the integrator's drift (a barely trained
    # W is stiff: measured 6e-6 and 1.5e-2 against the plain LNN's 3.4)
    for x in runs:
        assert x["LNN-nh"]["constraint_max"] < 0.01 * x["LNN"]["constraint_max"]
    assert "| particle (" not in format_table(r) and "| particle |" in format_table(r)


# -- partial Lagrangian: the columns in parallel ----------------------------------------------------------
def test_parallel_and_serial_columns_give_identical_forces():
    from ros_lnn_lab.studies.partial_cost import (
        batched_columns,
        engine_column,
        measure_parallel,
        threaded_columns,
    )

    r = measure_parallel((1, 2, 3, 5), min_time=0.0, workers=2)
    for row in r["rows"]:
        assert row["threads_vs_serial_max_diff"] == 0.0  # the same columns, on other threads
        assert row["batched_above_own_max"] == 0.0  # D_k 𝓛_i = 0 for k > i exactly
        assert row["batched_vs_serial_max_diff"] < 1e-12
        assert row["sum_vs_whole_max_diff"] < 1e-11
    assert set(r["exponents"]) == {"whole", "serial", "critical_path", "batched", "serial_engine", "threads"}

    # against the analytic columns of the chain (numpy, the paper's Table 1), independent of autograd
    from concurrent.futures import ThreadPoolExecutor

    chain = PlanarChain.uniform(4, mass=1.3, length=0.7, com=0.3, inertia=0.05)
    rng = np.random.default_rng(2)
    q, qd, qdd = (rng.normal(size=4) for _ in range(3))
    analytic = chain.partial_forces(q, qd, qdd)  # (n, links): column i = D 𝓛_i
    batched = batched_columns(chain)(*(torch.as_tensor(x) for x in (q, qd, qdd))).numpy()
    np.testing.assert_allclose(batched.T, analytic, atol=1e-12)
    with ThreadPoolExecutor(2) as pool:
        cols = threaded_columns(engine_column(chain), 4, pool)(*(torch.as_tensor(x) for x in (q, qd, qdd)))
    for i, c in enumerate(cols):
        np.testing.assert_allclose(c.numpy(), analytic[: i + 1, i], atol=1e-12)


# -- the command ------------------------------------------------------------------------------------------
def test_bench_zoo_writes_each_study_with_seeds_scale_time_and_load(tmp_path, capsys):
    from ros_lnn.cli import main

    assert (
        main(
            [
                "bench",
                "zoo",
                "servo-seeds",
                "--quick",
                "--seeds",
                "1",
                "--epochs",
                "5",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    record = json.loads((tmp_path / "servo-seeds.json").read_text())
    assert record["study"] == "servo-seeds" and record["quick"] and record["seconds"] > 0
    assert len(record["load_average_start"]) == 3 and record["cpu_seconds"] > 0
    assert record["result"]["seeds"] == [0] and record["result"]["epochs"] == 5
    assert (tmp_path / "servo_seeds.png").is_file()
    assert "| configuration (1 seeds, 5 epochs)" in capsys.readouterr().out


def test_bench_zoo_builds_each_study_config_from_its_options():
    """One StudyConfig per study: its DEFAULTS (QUICK under --quick), then the options given; the bench
    command line offers every StudyConfig option."""
    import argparse

    from ros_lnn.cli import build_parser
    from ros_lnn_lab.bench.zoo import add_study_arguments, study_config
    from ros_lnn_lab.studies import nonholonomic_study, servo_seeds, tlnn_study
    from ros_lnn_lab.studies.config import StudyConfig

    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int)
    add_study_arguments(parser)
    args = parser.parse_args(["--quick", "--seeds", "3", "--links", "2", "--out", "somewhere"])
    servo = study_config(args, "servo-seeds")
    assert servo == servo_seeds.QUICK.replace(seeds=(0, 1, 2), links=(2,), output=servo.output)
    assert str(servo.output) == "somewhere" and servo.quick and servo.epochs == 40
    tlnn = study_config(parser.parse_args(["--epochs", "7", "--links", "2", "3"]), "tlnn")
    assert tlnn == tlnn_study.DEFAULTS.replace(epochs=7, links=(2, 3), output=tlnn.output)
    assert str(tlnn.output) == "reports/zoo"
    nh = study_config(parser.parse_args([]), "lnn-nh")
    assert nh.seeds == (0, 1, 2) and nh.epochs == 300 and not nh.quick
    assert nonholonomic_study.QUICK.seeds == (0,) and nonholonomic_study.QUICK.quick
    with pytest.raises(TypeError, match="no n_ic"):
        StudyConfig().replace(n_ic=3)
    bench = build_parser().parse_args(["bench", "zoo", "tlnn", "--quick", "--seeds", "2", "--epochs", "4"])
    assert study_config(bench, "tlnn") == tlnn_study.QUICK.replace(
        seeds=(0, 1), epochs=4, output=study_config(bench, "tlnn").output
    )


def test_bench_study_names_are_checked_in_one_line(capsys):
    from ros_lnn.cli import main

    assert main(["bench", "zoo", "nonsense"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown study nonsense" in err and "servo-seeds" in err and "\n" not in err
    with pytest.raises(SystemExit) as stop:  # study names are bench zoo's only: argparse says so
        main(["bench", "train", "tlnn"])
    assert stop.value.code == 2 and "unrecognized arguments: tlnn" in capsys.readouterr().err
