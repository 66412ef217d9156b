"""Simulator, Trial storage and the paper data set: energy balance along trajectories, sampling,
force-driven replay, split."""

import numpy as np
import pytest

from ros_lnn.errors import DataError
from ros_lnn.physics.chain import PlanarChain
from ros_lnn.physics.crane import Crane
from ros_lnn.physics.datasets import (
    PAPER_TEST_TRIALS,
    PAPER_TRAIN_TRIALS,
    PAPER_TRIALS,
    chain_trials,
    crane_trial,
    force_function,
    paper_crane_trials,
    paper_split,
    position_servo,
)
from ros_lnn.physics.simulate import CosineServo, SimulationError, simulate, stationary_servo
from ros_lnn.physics.trials import Trial, load_trials, save_trials

SPEC = PAPER_TRIALS[4]  # multi-frequency cart motion from θ(0) = 1


@pytest.fixture(scope="module")
def paper_trials():
    return paper_crane_trials()  # cached under $ROS_LNN_CACHE or the temp dir after the first run


def power(trial):
    return np.einsum("ni,ni->n", trial.qd, trial.Q)


def test_energy_rate_by_finite_differences_converges_to_power():
    """dE/dt from samples of E(t) → q̇ᵀQ at second order as the sample spacing shrinks."""
    errors = []
    for h in (4e-3, 2e-3):
        t = np.arange(0.0, 3.0 + h / 2, h)
        trial = simulate(Crane(), 3.0, [1.0], [0.0], servo=position_servo(SPEC), t_eval=t)
        errors.append(np.abs(np.gradient(trial.E, trial.t, edge_order=2) - power(trial)).max())
    assert errors[1] < errors[0] / 3.5, errors  # second order: ratio 4
    assert errors[1] < 1e-4 * np.abs(power(trial)).max()


def test_machinery_energy_rate_equals_power_on_samples():
    trial = crane_trial(Crane(), SPEC)
    out = Crane().dynamics(trial.q, trial.qd, qdd=trial.qdd)
    np.testing.assert_allclose(out["E_dot"], power(trial), atol=1e-13)
    np.testing.assert_allclose(out["E"], trial.E, atol=1e-13)


def test_ground_truth_matches_closed_form_and_servo():
    crane = Crane()
    servo = position_servo(SPEC)
    trial = simulate(crane, 2.0, [1.0], [0.0], servo=servo)
    x, xd, xdd = (np.array([servo(t)[k][0] for t in trial.t]) for k in range(3))
    np.testing.assert_array_equal(trial.q_e[:, 0], x)
    np.testing.assert_array_equal(trial.qd[:, 1], xd)
    np.testing.assert_array_equal(trial.qdd[:, 1], xdd)
    theta_dd, force = crane.closed_form_acceleration(trial.q[:, 0], trial.qd[:, 0], xdd)
    np.testing.assert_allclose(trial.qdd[:, 0], theta_dd, atol=1e-12)
    np.testing.assert_allclose(trial.Q_e[:, 0], force, atol=1e-12)
    np.testing.assert_allclose(trial.Q_f, 0.0, atol=1e-14)


def test_applied_force_on_free_coordinate_appears_in_Q_and_energy_balance():
    torque = lambda t, q, qd: [-0.05 * qd[0] + 0.02 * np.sin(3 * t)]  # noqa: E731  damper + drive
    t = np.linspace(0, 4, 2001)
    trial = simulate(Crane(), 4.0, [0.5], [0.0], servo=stationary_servo([0.0]), force=torque, t_eval=t)
    np.testing.assert_allclose(
        trial.Q_f[:, 0], [torque(ti, q, qd)[0] for ti, q, qd in zip(trial.t, trial.q, trial.qd)], atol=1e-14
    )
    P = power(trial)
    work = np.concatenate([[0.0], np.cumsum(0.5 * (P[1:] + P[:-1]) * np.diff(t))])
    assert np.abs(trial.E - trial.E[0]).max() > 1e-2  # the drive really changes E
    np.testing.assert_allclose(trial.E - trial.E[0], work, atol=1e-6)


def test_sampling_modes():
    servo = position_servo(SPEC)
    steps = simulate(Crane(), 2.0, [1.0], [0.0], servo=servo)
    assert steps.t[0] == 0.0 and steps.t[-1] == 2.0 and np.all(np.diff(steps.t) > 0)
    assert len(steps) == steps.attrs["steps"] + 1
    refined = simulate(Crane(), 2.0, [1.0], [0.0], servo=servo, refine=4)
    assert len(refined) == 4 * steps.attrs["steps"] + 1
    dense = simulate(Crane(), 2.0, [1.0], [0.0], servo=servo, t_eval=steps.t)
    np.testing.assert_allclose(dense.q, steps.q, atol=1e-12)
    np.testing.assert_allclose(dense.Q, steps.Q, atol=1e-11)
    dop = simulate(Crane(), 2.0, [1.0], [0.0], servo=servo, method="DOP853", t_eval=steps.t[-1:])
    np.testing.assert_allclose(dop.q[-1], steps.q[-1], atol=1e-8)


def test_set_up_errors_name_the_joints():
    with pytest.raises(SimulationError, match="cart_joint"):
        simulate(Crane(), 1.0, [0.0], [0.0])
    with pytest.raises(SimulationError, match="pendulum_joint"):
        simulate(Crane(), 1.0, [0.0, 1.0], [0.0], servo=stationary_servo([0.0]))


def test_cosine_servo_derivatives_are_exact():
    servo = CosineServo(
        amplitude=[[0.3, -0.1], [0.2, 0.0]],
        omega=[[1.0, 4.0], [2.0, 1.0]],
        phase=[[0.1, 0.2], [0.0, 0.0]],
        decay=[[0.2, 0.0], [0.5, 0.0]],
        offset=[1.0, -1.0],
    )
    t, h = 0.7, 1e-5
    _q, qd, qdd = servo(t)
    np.testing.assert_allclose(qd, (servo(t + h)[0] - servo(t - h)[0]) / (2 * h), atol=1e-9)
    np.testing.assert_allclose(qdd, (servo(t + h)[1] - servo(t - h)[1]) / (2 * h), atol=1e-9)


def test_trials_round_trip_and_bad_files(tmp_path):
    trials = chain_trials(PlanarChain.uniform(2, servo_joints=("joint_2",)), n_trials=2, duration=0.5)
    path = tmp_path / "chain.npz"
    save_trials(path, trials)
    back = load_trials(path)
    assert [t.name for t in back] == ["chain_0", "chain_1"]
    for a, b in zip(trials, back):
        assert (a.coordinate_names, a.free_joints, a.servo_joints) == (
            b.coordinate_names,
            b.free_joints,
            b.servo_joints,
        )
        for key in ("t", "q", "qd", "qdd", "Q", "T", "V", "E", "M"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
        assert b.attrs["links"][0]["joint"] == "joint_1"
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(DataError, match=r"junk\.npz"):
        load_trials(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(DataError, match=r"other\.npz"):
        load_trials(tmp_path / "other.npz")
    with pytest.raises(DataError, match=r"missing\.npz"):
        load_trials(tmp_path / "missing.npz")
    with pytest.raises(DataError, match="shape"):
        Trial(
            name="bad",
            system="crane",
            coordinate_names=("a",),
            free_joints=("a",),
            servo_joints=(),
            t=np.zeros(3),
            q=np.zeros((3, 2)),
            qd=np.zeros((3, 1)),
            qdd=np.zeros((3, 1)),
            Q=np.zeros((3, 1)),
            T=np.zeros(3),
            V=np.zeros(3),
            E=np.zeros(3),
            M=np.zeros((3, 1, 1)),
        )


def test_paper_trials_follow_the_paper_setup(paper_trials):
    assert len(paper_trials) == 11
    for trial in paper_trials:
        assert trial.coordinate_names == ("pendulum_joint", "cart_joint")
        assert trial.servo_joints == ("cart_joint",) and trial.free_joints == ("pendulum_joint",)
        assert trial.t[0] == 0.0 and trial.t[-1] == 20.0
        assert trial.q[0, 1] == pytest.approx(0.0, abs=1e-15) and trial.q[0, 0] in (0.0, 1.0)
        np.testing.assert_allclose(trial.Q_f, 0.0, atol=1e-13)  # the pendulum is unforced
    stationary = next(t for t in paper_trials if t.name == "stationary")
    assert np.all(stationary.q[:, 1] == 0) and np.all(stationary.qd[:, 1] == 0)
    assert sum(t.attrs.get("force_driven", False) for t in paper_trials) == 4
    assert {t.q[0, 0] for t in paper_trials} == {0.0, 1.0}


def test_force_driven_replay_reproduces_the_applied_force(paper_trials):
    """Sec. 3.4: replaying the cart motion of a force-driven run as position input, the exact Q_e of
    the servo view is the applied force. Residual = the replay's re-integration error."""
    for spec in [s for s in PAPER_TRIALS if s.kind == "force"]:
        trial = next(t for t in paper_trials if t.name == spec.name)
        applied = np.array([force_function(spec)(t) for t in trial.t])
        assert np.abs(applied).max() > 0.1
        np.testing.assert_allclose(trial.Q_e[:, 0], applied, atol=1e-7)


def test_paper_split(paper_trials):
    train, test = paper_split(paper_trials, n_train_samples=4096, seed=0)
    assert len(train["t"]) == 4096 and train["q"].shape == (4096, 2) and train["M"].shape == (4096, 2, 2)
    assert train["names"] == list(PAPER_TRAIN_TRIALS) and len(train["names"]) == 6
    assert test["names"] == [n for n in (t.name for t in paper_trials) if n in PAPER_TEST_TRIALS]
    assert len(test["t"]) == sum(len(t) for t in paper_trials if t.name in PAPER_TEST_TRIALS)
    names = [t.name for t in paper_trials]
    assert all(names[i] in PAPER_TRAIN_TRIALS for i in np.unique(train["trial"]))
    assert all(names[i] in PAPER_TEST_TRIALS for i in np.unique(test["trial"]))
    again, _ = paper_split(paper_trials, seed=0)
    np.testing.assert_array_equal(again["q"], train["q"])
    other, _ = paper_split(paper_trials, seed=1)
    assert not np.array_equal(other["q"], train["q"])


def test_test_trials_lie_inside_the_training_ranges(paper_trials):
    _train, test = paper_split(paper_trials)
    train_all = [t for t in paper_trials if t.name in PAPER_TRAIN_TRIALS]
    for key in ("q", "qd", "qdd"):
        lo = np.min([getattr(t, key).min(0) for t in train_all], axis=0)
        hi = np.max([getattr(t, key).max(0) for t in train_all], axis=0)
        assert np.all(test[key].min(0) >= lo) and np.all(test[key].max(0) <= hi), key


def test_cache_round_trip(tmp_path, paper_trials):
    path = tmp_path / "crane.npz"
    first = paper_crane_trials(cache=path, specs=PAPER_TRIALS[:2])
    assert path.is_file()
    second = paper_crane_trials(cache=path, specs=PAPER_TRIALS[:2])
    for a, b, c in zip(first, second, paper_trials[:2]):
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_allclose(a.Q, c.Q, atol=1e-12)
    path.write_bytes(b"damaged")  # a broken cache file is regenerated, not an error
    third = paper_crane_trials(cache=path, specs=PAPER_TRIALS[:2])
    np.testing.assert_array_equal(third[1].q, first[1].q)
    assert len(load_trials(path)) == 2


def test_chain_trials_energy_balance():
    chain = PlanarChain.uniform(3, servo_joints=("joint_1", "joint_3"))
    trials = chain_trials(chain, n_trials=2, duration=1.0)
    assert [t.servo_joints for t in trials] == [("joint_1", "joint_3")] * 2
    for trial in trials:
        out = chain.dynamics(trial.q, trial.qd, qdd=trial.qdd)
        np.testing.assert_allclose(out["E_dot"], power(trial), atol=1e-12)
        np.testing.assert_allclose(trial.Q_f, 0.0, atol=1e-12)
        assert np.abs(trial.Q_e).max() > 1e-2


def test_simulate_command_writes_trials(tmp_path, capsys):
    from ros_lnn.cli import main

    out = tmp_path / "chain.npz"
    assert (
        main(
            [
                "simulate",
                "--system",
                "chain",
                "--links",
                "3",
                "--servo",
                "joint_1,joint_3",
                "--trials",
                "2",
                "--duration",
                "0.5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    trials = load_trials(out)
    assert len(trials) == 2 and trials[0].servo_joints == ("joint_1", "joint_3")
    assert trials[0].coordinate_names == ("joint_1", "joint_2", "joint_3")
    assert main(["simulate", "--system", "chain", "--servo", "joint_9", "--out", str(out)]) == 2
    assert "joint_9" in capsys.readouterr().err
    assert main(["simulate", "--out", str(tmp_path / "x.csv")]) == 2
    assert ".csv" in capsys.readouterr().err


def test_step_simulator_matches_one_long_simulation():
    from ros_lnn.physics.simulate import StepSimulator

    servo = position_servo(SPEC)
    whole = simulate(Crane(), 2.0, [1.0], [0.0], servo=servo, t_eval=[2.0])
    stepper = StepSimulator(Crane(), [1.0], [0.0])
    for _ in range(100):
        stepper.step(0.02, servo=servo)
    out = stepper.outputs()
    assert stepper.t == pytest.approx(2.0, abs=1e-12)
    np.testing.assert_allclose(out["q"], whole.q[-1], atol=1e-9)
    np.testing.assert_allclose(out["Q"], whole.Q[-1], atol=1e-8)
    with pytest.raises(SimulationError, match="cart_joint"):
        stepper.step(0.01)


def test_the_trial_cache_is_private_and_a_shared_one_is_not_trusted(tmp_path, monkeypatch):
    """The default cache is the user's own folder (not a predictable shared /tmp path); a folder others
    may write is not used, so a file planted there is never loaded."""
    import os

    from ros_lnn.physics import datasets

    monkeypatch.delenv("ROS_LNN_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = datasets.default_cache_dir()
    assert folder == tmp_path / "xdg" / "ros_lnn"
    assert datasets.private_cache_dir(folder) and (folder.stat().st_mode & 0o777) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not datasets.private_cache_dir(shared)
    if hasattr(os, "getuid"):
        planted = folder / "planted.npz"
        planted.write_bytes(b"x")
        planted.chmod(0o666)
        assert not datasets._trusted_file(planted)
