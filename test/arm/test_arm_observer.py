"""The external-torque observers against physics: the Panda simulated with Pinocchio's ABA (RK4, 1 kHz,
a tracking controller) under scripted external joint torques; the observers see only q, q̇ and the
motor torque, and are compared with the torque the simulator applied."""

from __future__ import annotations

import functools
import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import observer as ob
from ros_lnn.arm import simulation as sim
from ros_lnn.arm.rigid_body import ArmRigidBody, pinocchio
from ros_lnn.errors import ConfigError

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
K = 100.0
PULSES = (
    sim.Pulse(1, 5.0, 0.6, 0.2),
    sim.Pulse(5, -0.6, 1.2, 0.15),
    sim.Pulse(3, 3.0, 1.7, 0.3),
    sim.Pulse(0, -2.5, 2.3, 0.12),
)


@functools.lru_cache(maxsize=1)
def panda() -> ArmRigidBody:
    return ArmRigidBody.from_urdf(URDF, JOINTS)


@functools.lru_cache(maxsize=2)
def run(jitter: float = 0.0) -> sim.ArmRun:
    return sim.simulate_arm(panda(), 2.6, pulses=PULSES, jitter=jitter, seed=3)


def windows(r, t, pulses, settle):
    """(pulse, samples from start + settle to its end) for each pulse; and the samples far from any pulse."""
    free = np.ones(len(t), dtype=bool)
    out = []
    for p in pulses:
        out.append((p, (t >= p.start + settle) & (t < p.end)))
        free &= ~((t >= p.start) & (t < p.end + 8 / K))
    return out, free


@pytest.mark.parametrize("jitter", [0.0, 0.3], ids=["regular", "irregular-stamps"])
def test_momentum_observer_recovers_applied_torque_within_10_percent_after_3_over_K(jitter):
    data = run(jitter)
    if jitter:
        steps = np.diff(data.t)
        assert steps.std() / steps.mean() > 0.2
    r = ob.run_observer(ob.MomentumObserver(panda(), K), data.t, data.q, data.qd, data.tau)
    pulses, free = windows(r, data.t, PULSES, 3 / K)
    for p, sel in pulses:
        err = np.abs(r[sel] - data.tau_ext[sel])
        assert sel.sum() > 50
        assert err.max() <= 0.1 * abs(p.magnitude), (p, err.max(0))
    # no external torque: the residual stays at the integration error (after the first 0.2 s)
    quiet = free & (data.t > 0.2)
    assert (
        np.abs(r[quiet]).max() < 0.01 * min(abs(p.magnitude) for p in PULSES) * 10
    )  # < 10 % of the smallest
    assert np.abs(r[quiet]).max() < 0.06


def test_direct_observer_recovers_applied_torque_after_its_filter_settles():
    data = run()
    r = ob.run_observer(ob.DirectObserver(panda(), K, window=9), data.t, data.q, data.qd, data.tau)
    pulses, free = windows(r, data.t, PULSES, 3 / K + 0.009)  # + the 9-sample q̈ window
    for p, sel in pulses:
        assert np.abs(r[sel] - data.tau_ext[sel]).max() <= 0.1 * abs(p.magnitude)
    assert np.abs(r[free & (data.t > 0.2)]).max() < 0.06


def test_observer_step_response_is_first_order_with_gain_K():
    data = run()
    r = ob.run_observer(ob.MomentumObserver(panda(), K), data.t, data.q, data.qd, data.tau)
    p = PULSES[0]
    k = np.searchsorted(data.t, p.start + 1 / K)
    # 1 − e^{-1} of the step after 1/K (plus the half-sample of the trapezoid)
    assert abs(r[k, p.joint] / p.magnitude - (1 - np.exp(-1))) < 0.06


def test_model_effort_is_the_torque_the_motors_gave_when_nothing_pushes():
    data = run()
    obs = ob.MomentumObserver(panda(), K)
    errs = []
    for k in range(len(data.t)):
        obs.update(data.t[k], data.q[k], data.qd[k], data.tau[k])
        if 0.2 < data.t[k] < PULSES[0].start:
            errs.append(obs.model_effort - data.tau[k])
    scale = np.abs(data.tau).max(0)
    assert (np.abs(np.array(errs)).max(0) < 0.02 * scale + 0.05).all()


def test_noise_friction_and_mismatch_widen_the_residual_of_the_urdf_observer():
    arm = panda()
    truth = sim.perturbed_arm(arm, seed=1)
    fr = sim.TrueFriction.like_a_real_arm(arm.effort_limits())
    data = sim.simulate_arm(truth, 1.5, nominal=arm, friction=fr, noise=sim.Noise(), seed=5)
    nominal = ob.run_observer(ob.MomentumObserver(arm, K), data.t, data.q, data.qd, data.tau)[300:]
    exact_dyn = ob.RigidDynamics(truth)
    exact_dyn.non_rigid_torque = lambda q, qd: fr.torque(np.asarray(q), np.asarray(qd))
    exact = ob.run_observer(ob.MomentumObserver(exact_dyn, K), data.t, data.q, data.qd, data.tau)[300:]
    # the true dynamics leave noise only; the URDF's leave the model error (friction, masses)
    assert (np.abs(exact).max(0) < 0.5 * np.abs(nominal).max(0)).sum() >= 6
    # what is left with the true dynamics is the q̇ noise through the momentum: ~ K · M · σ_q̇ (< 0.4 N·m rms)
    assert np.sqrt((exact**2).mean(0)).max() < 0.4


def test_wrench_at_a_frame_from_joint_torques_by_virtual_work():
    """τ = Jᵀ F by finite differences of the frame's placement (not the Jacobian under test)."""
    pin = pinocchio()
    arm = panda()
    est = ob.WrenchEstimator(arm, "panda_hand_tcp", damping=1e-4)
    rng = np.random.default_rng(0)
    model, data = arm.model, arm.model.createData()
    fid = model.getFrameId("panda_hand_tcp")

    def placement(q):
        x = np.zeros(arm.n)
        x[arm.order] = q
        pin.framesForwardKinematics(model, data, x)
        return data.oMf[fid].translation.copy(), data.oMf[fid].rotation.copy()

    for _ in range(3):
        q = np.array([0.2, -0.4, 0.1, -2.0, 0.3, 1.8, 0.5]) + rng.normal(0, 0.2, 7)
        F = rng.normal(0, 10, 6)
        p0, R0 = placement(q)
        tau = np.empty(7)
        eps = 1e-6
        for i in range(7):
            dq = np.zeros(7)
            dq[i] = eps
            p1, R1 = placement(q + dq)
            dtheta = pin.log3(R1 @ R0.T)
            tau[i] = (F[:3] @ (p1 - p0) + F[3:] @ dtheta) / eps
        # the estimate is in the frame's own axes
        expected = np.concatenate([R0.T @ F[:3], R0.T @ F[3:]])
        np.testing.assert_allclose(est.wrench(q, tau), expected, atol=2e-3 * np.abs(F).max())
    with pytest.raises(ConfigError, match="not in the URDF"):
        ob.WrenchEstimator(arm, "no_such_frame")


def test_detector_hysteresis_and_onsets():
    th = ob.Thresholds(("a", "b"), np.array([1.0, 2.0]), np.array([0.5, 0.0]), release=0.5, hold_s=0.01)
    det = ob.CollisionDetector(th)
    qd = np.array([2.0, 0.0])  # band: 2.0 and 2.0
    seq = [
        (0.0, [1.9, 0.0]),
        (0.001, [2.1, 0.0]),
        (0.002, [3.0, 0.0]),
        (0.003, [1.5, 0.0]),
        (0.004, [2.5, 0.0]),
        (0.005, [0.5, 0.0]),
        (0.010, [0.5, 0.0]),
        (0.016, [0.5, 0.0]),
        (0.017, [2.2, -2.5]),
    ]
    onsets = [(o.t, o.joint, o.residual) for t, r in seq for o in det.update(t, np.array(r), qd)]
    # one collision until |r| stayed below 1.0 for 10 ms; then a new one on both joints
    assert onsets == [(0.001, 0, 2.1), (0.017, 0, 2.2), (0.017, 1, -2.5)]


def test_calibrate_bounds_the_collision_free_residual_and_learns_the_velocity_band(tmp_path):
    rng = np.random.default_rng(0)
    t = np.arange(0, 120, 0.001)
    qd = np.column_stack([np.sin(0.5 * t) * 2.0, np.cos(0.3 * t)])
    r = rng.standard_normal(qd.shape) * (0.1 + np.array([0.3, 0.0]) * np.abs(qd))
    th = ob.calibrate([(t, r, qd)], ("a", "b"), false_alarm_rate_per_h=0.1)
    assert th.velocity_slope[0] > 0.5 and th.velocity_slope[1] < 0.2 * th.static[1] + 1e-9
    band = th.band(qd)
    assert (np.abs(r) < band).all()  # no alarm on the calibration data
    assert ((np.abs(r) / band).max(0) <= 1 / 1.1 + 1e-9).all()  # the 10 % margin over the largest seen
    # a fresh stretch of the same process: no alarm either (10 min at a target of 0.1 per hour)
    t2 = np.arange(0, 600, 0.001)
    qd2 = np.column_stack([np.sin(0.7 * t2) * 2.0, np.cos(0.2 * t2)])
    r2 = rng.standard_normal(qd2.shape) * (0.1 + np.array([0.3, 0.0]) * np.abs(qd2))
    assert (np.abs(r2) < th.band(qd2)).all()
    path = tmp_path / "th.yaml"
    th.save(path)
    back = ob.Thresholds.load(path)
    np.testing.assert_allclose(back.static, th.static)
    assert back.reordered(("b", "a")).static[0] == th.static[1]
    with pytest.raises(ConfigError, match="no values for joints"):
        back.reordered(("c",))
    path.write_text("joints: {a: {static: -1}}\n")
    with pytest.raises(ConfigError, match="finite and > 0"):
        ob.Thresholds.load(path)
    with pytest.raises(Exception, match="at least"):
        ob.calibrate([(t[:2000], r[:2000], qd[:2000])], ("a", "b"))


def test_rest_test_fires_on_a_change_of_the_settled_residual_of_a_standing_arm():
    th = ob.Thresholds(
        ("a", "b"), np.array([3.0, 3.0]), np.zeros(2), hold_s=0.01, rest=np.array([0.5, 0.5]), settle_s=0.1
    )
    det = ob.CollisionDetector(th)
    still, moving = np.zeros(2), np.array([0.0, 0.5])
    onsets = []
    for k in range(400):  # 1 kHz: the arm stands; joint a holds a bias of 2 (under the band of 3)
        t = k * 1e-3
        r = np.array([2.0 + (0.8 if 0.25 <= t < 0.3 else 0.0), 0.0])  # a push of 0.8 from t = 0.25
        onsets += [(round(o.t, 3), o.joint) for o in det.update(t, r, still)]
    assert onsets == [(0.25, 0)]  # the bias never fires, the change does; the baseline is set at 0.1 s
    assert det.baseline[0] == pytest.approx(2.0)
    # one joint moving: no baseline on any joint, only the band
    det.reset()
    for k in range(400):
        t = k * 1e-3
        r = np.array([2.0 + (0.8 if t >= 0.25 else 0.0), 0.0])
        assert not det.update(t, r, moving)
    assert np.isnan(det.baseline).all()


def test_calibrate_sets_rest_thresholds_from_standing_stretches(tmp_path):
    rng = np.random.default_rng(2)
    t = np.arange(0, 120, 0.001)
    moving = (t % 10) < 4  # 4 s of motion, 6 s standing, twelve times
    qd = np.where(moving[:, None], 0.5, 0.0) * np.ones((1, 2))
    # standing, each stop settles at its own bias (within ±2) with small noise; moving: larger noise
    bias = rng.uniform(-2, 2, (12, 2))[(t // 10).astype(int)]
    r = np.where(moving[:, None], rng.normal(0, 0.5, qd.shape), bias + rng.normal(0, 0.05, qd.shape))
    th = ob.calibrate([(t, r, qd)], ("a", "b"), false_alarm_rate_per_h=0.1)
    assert th.info["rest_test"] == "calibrated" and th.rest is not None
    assert np.all(th.rest < 0.25 * th.static)  # the change at rest, not the bias of each stop
    # the calibration's changes are the detector's, sample by sample
    changes = ob._rest_changes(t[:25000], r[:25000], qd[:25000], 2, th.still_velocity, th.settle_s)
    det = ob.CollisionDetector(replace(th, rest=np.ones(2), static=np.full(2, 1e300)))
    standing = np.all(np.abs(qd) < th.still_velocity, axis=1)
    seen = [det._rest_change(t[k], r[k], standing[k]) for k in range(25000)]
    seen = np.array([np.zeros(2) if c is None else c for c in seen])  # None: no change
    settled = ~np.isnan(changes)
    np.testing.assert_allclose(seen[settled], changes[settled], atol=1e-12)
    assert np.all(seen[~settled] == 0.0) and settled.sum() > 10000
    back = ob.Thresholds.load(_saved(th, tmp_path / "th.yaml"))
    np.testing.assert_allclose(back.rest, th.rest)
    assert back.still_velocity == th.still_velocity and back.settle_s == th.settle_s
    # without 10 s of standing on every joint: no rest test, and the reason
    short = ob.calibrate([(t[:30000], r[:30000], np.full((30000, 2), 0.5))], ("a", "b"))
    assert short.rest is None and short.info["rest_test"].startswith("off")
    (tmp_path / "bad.yaml").write_text("joints: {a: {static: 1, rest: 0.1}, b: {static: 1}}\n")
    with pytest.raises(ConfigError, match="rest for every joint"):
        ob.Thresholds.load(tmp_path / "bad.yaml")


def _saved(th, path):
    th.save(path)
    return path


def test_gains_and_method_are_checked():
    with pytest.raises(ConfigError, match="gains"):
        ob.MomentumObserver(panda(), [1.0, -1.0, 1, 1, 1, 1, 1])
    with pytest.raises(ConfigError, match="method"):
        ob.make_observer(panda(), "kalman")


def test_observer_imports_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, ros_lnn.arm.observer, ros_lnn.arm.simulation, ros_lnn.arm.model; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _uneven_batches(n: int, seed: int):
    """Batch bounds as a node's wake-ups take them: mostly one or a few samples, sometimes dozens."""
    rng = np.random.default_rng(seed)
    bounds = [0]
    while bounds[-1] < n:
        bounds.append(min(n, bounds[-1] + int(rng.choice([1, 1, 2, 3, 7, 16, 64]))))
    return list(itertools.pairwise(bounds))


def _restarted(x, at: int = 1500, back_to: int = 1200):
    """The stream with a piece repeated: its time goes back at ``at`` (a restarted publisher)."""
    return np.concatenate((x[:at], x[back_to:]))


@pytest.mark.parametrize("method", ["momentum", "direct"])
def test_batched_observer_and_detector_give_what_the_samples_one_by_one_give(method):
    """update_batch over a node's uneven batches — irregular stamps, and a time that goes back inside a
    batch (a restart) — against update sample by sample (Pinocchio per state through RigidDynamics'
    own per-sample calls): the same r and model effort to round-off, and the detector's update_batch
    the same onsets as its update sample by sample (the bands and the rest test included)."""
    data = run(0.3)
    t, q, qd, tau = (_restarted(x) for x in (data.t, data.q, data.qd, data.tau))
    th = ob.Thresholds(
        JOINTS, np.array([1.5, 1.5, 1.5, 1.5, 0.4, 0.4, 0.4]), np.full(7, 0.3), hold_s=0.02,
        rest=np.full(7, 0.3), still_velocity=1.0, settle_s=0.05,
    )  # fmt: skip
    one = ob.make_observer(panda(), method, K)
    det_one = ob.CollisionDetector(th)
    r_one, effort_one, onsets_one = np.empty_like(q), np.empty_like(q), []
    for k in range(len(t)):
        r_one[k] = one.update(float(t[k]), q[k], qd[k], tau[k])
        effort_one[k] = one.model_effort
        onsets_one += [(k, o.joint, o.residual) for o in det_one.update(float(t[k]), r_one[k], qd[k])]
    batched = ob.make_observer(panda(), method, K)
    det = ob.CollisionDetector(th)
    r_batch, effort_batch, onsets = np.empty_like(q), np.empty_like(q), []
    for a, b in _uneven_batches(len(t), seed=4):
        r_batch[a:b] = batched.update_batch(t[a:b], q[a:b], qd[a:b], tau[a:b])
        effort_batch[a:b] = batched.model_efforts
        onsets += [
            (a + k, o.joint, o.residual) for k, found in det.update_batch(t[a:b], r_batch[a:b], qd[a:b])
            for o in found
        ]  # fmt: skip
    scale = np.abs(r_one).max()
    np.testing.assert_allclose(r_batch, r_one, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(effort_batch, effort_one, rtol=1e-9, atol=1e-9)
    assert len(onsets_one) >= 4  # the pulses (and the restart) are detected
    assert [o[:2] for o in onsets] == [o[:2] for o in onsets_one]
    np.testing.assert_allclose([o[2] for o in onsets], [o[2] for o in onsets_one], atol=1e-9 * scale)
    np.testing.assert_array_equal(det.active, det_one.active)
    np.testing.assert_allclose(det.peak, det_one.peak, atol=1e-9 * scale)


def _effort_steps(dt: float = 0.005, steps: int = 120):
    """The Panda released from rest under efforts that switch every 20 steps between gravity holding,
    zero and twice gravity (a watchdog zeroing the command, then a controller back), each held over one
    step (zero-order hold, the plant's RK4): ``(t, q, q̇, τ held until each stamp, τ from each stamp)``."""
    arm = panda()
    plant = sim.ArmPlant(arm, substeps=4)
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    qd = np.zeros(7)
    hold = arm.gravity_torque(q)
    levels = (hold, 0.0 * hold, 2.0 * hold)
    t, qs, qds, applied = [0.0], [q], [qd], []
    for k in range(steps):
        u = levels[(k // 20) % 3]
        q, qd = plant.step(q, qd, u, dt)
        applied.append(u)
        t.append((k + 1) * dt)
        qs.append(q)
        qds.append(qd)
    applied = np.array(applied)
    until = np.vstack((applied[:1], applied))  # the effort over the step that ended at each stamp
    start = np.vstack((applied, applied[-1:]))  # the effort over the step that starts at each stamp
    return np.array(t), np.array(qs), np.array(qds), until, start, hold


@pytest.mark.parametrize(
    "timing,column", [("held_until_stamp", 3), ("held_from_stamp", 4)], ids=["until", "from"]
)
def test_the_momentum_observer_with_the_effort_timing_of_the_stream_sees_no_torque_at_effort_steps(
    timing, column
):
    """No external torque acts: with the timing that matches how the efforts were held, r stays at the
    integration's round-off through steps of the full gravity torque; read as ``sampled`` (the trapezoid)
    every step shows as the one-sample error (1 − e^{−KΔt}) Δτ / 2 the module text predicts."""
    data = _effort_steps()
    t, q, qd, tau, hold = data[0], data[1], data[2], data[column], data[5]
    matched = ob.run_observer(ob.MomentumObserver(panda(), K, effort_timing=timing), t, q, qd, tau)
    trapezoid = ob.run_observer(ob.MomentumObserver(panda(), K), t, q, qd, tau)
    worst = np.abs(hold).max()
    assert np.abs(matched).max() < 2e-3 * worst, np.abs(matched).max()
    dt = t[1] - t[0]
    predicted = (1.0 - np.exp(-K * dt)) * 2.0 * worst / 2  # the largest step: 0 → 2 × gravity
    assert 0.9 * predicted < np.abs(trapezoid).max() < 1.1 * predicted, (np.abs(trapezoid).max(), predicted)


def test_an_unknown_effort_timing_is_refused():
    with pytest.raises(ConfigError, match="effort timing"):
        ob.make_observer(panda(), "direct", K, effort_timing="late")
