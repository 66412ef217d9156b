"""An arm model with friction memory end to end, on generated recordings of a Panda whose friction is
the LuGre model (presliding, breakaway, a torque held at rest — not the model's stop operators):
identified with the rigid body, exported with its state in and out, run sample by sample as the
observer runs it, judged against the fit without memory where the arm stands."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import identification as idn
from ros_lnn.arm import observer as ob
from ros_lnn.arm.evaluation import evaluate_arm, motion_phases, phase_rre
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, write_recording
from ros_lnn.arm.mapping import ArmMapping
from ros_lnn.arm.model import STATE_INPUT, ArmModel
from ros_lnn.arm.programs import point_to_point
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.arm.samples import filtered_samples
from ros_lnn.arm.simulation import Pulse
from ros_lnn.arm.training import train_arm

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
OPTIONS = GeneratorOptions(rate_hz=200.0, effort="joint_states")


@pytest.fixture(scope="module")
def arm_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("memory")
    gen = ArmGenerator(URDF, JOINTS, seed=5, dynamic_friction=True)
    recordings = {}
    for name, seed, duration in (("train", 31, 50.0), ("test", 32, 25.0)):
        prog = point_to_point(gen.limits, duration, seed=seed)
        rec = gen.generate(prog.duration, trajectory=prog, options=OPTIONS, seed=seed)
        recordings[name] = write_recording(folder / name, rec)
    stops = point_to_point(gen.limits, 25.0, seed=33)
    pushes = [
        Pulse(j, 0.08 * gen.effort_limits[j] * (-1) ** k, a + 0.1, 0.2)
        for k, ((a, b), j) in enumerate(zip(stops.stops(), [1, 3, 4, 5, 6, 0, 2] * 3))
        if b - a > 0.5
    ][:6]
    push_rec = gen.generate(stops.duration, trajectory=stops, options=OPTIONS, seed=33, pushes=pushes)
    recordings["push"] = write_recording(folder / "push", push_rec)
    mapping = ArmMapping(actuated_joints=tuple(JOINTS), physically_consistent=False)
    models = {}
    for memory in ("auto", "off"):
        out = folder / f"arm_{memory}.onnx"
        train_arm(
            [read_arm_bag(recordings["train"], mapping)], URDF, mapping, out=out, residual="off",
            ripple="off", fast_torque="off", friction_memory=memory,
        )  # fmt: skip
        models[memory] = ArmModel(out)
    return recordings, mapping, models, pushes, push_rec


def scalar_stops(q, widths):
    out = np.zeros((*q.shape, len(widths)))
    for j in range(q.shape[1]):
        for i, w in enumerate(widths):
            p = q[0, j]
            for k in range(len(q)):
                p = min(max(p, q[k, j] - w), q[k, j] + w)
                out[k, j, i] = (q[k, j] - p) / w
    return out


def test_the_memory_is_kept_and_halves_the_error_where_the_arm_stands(arm_data):
    recordings, mapping, models, _, _ = arm_data
    model, plain = models["auto"], models["off"]
    assert model.memory is not None and plain.memory is None
    assert model.memory.active.sum() >= 5
    assert STATE_INPUT in {i.name for i in model.session.get_inputs()}
    kept = model.meta["metrics"]["friction_memory"]["kept"]
    assert sum(kept.values()) == model.memory.active.sum()
    s = filtered_samples([read_arm_bag(recordings["test"], mapping)], 0.0, mapping.gap_factor, raw_tau=True)
    phases = motion_phases(s.t, s.qd, s.starts)
    with_memory = phase_rre(s.tau, model.torque_of(s), phases)
    without = phase_rre(s.tau, plain.torque_of(s), phases)
    standing, standing0 = (np.nanmean(r["standing"]["rre"]) for r in (with_memory, without))
    assert standing < 0.5 * standing0
    overall = np.mean(idn.relative_error_percent(s.tau, model.torque_of(s)))
    assert overall < np.mean(idn.relative_error_percent(s.tau, plain.torque_of(s)))


def test_the_graph_runs_the_stop_operators_with_state_in_and_out(arm_data):
    recordings, mapping, models, _, _ = arm_data
    model = models["auto"]
    rec = read_arm_bag(recordings["test"], mapping)
    q, qd = rec.q[:400], rec.qd[:400]
    held = np.einsum("tjk,jk->tj", scalar_stops(q, model.memory.widths), model.memory.weights)
    static = model.friction_torque(qd)
    # sample by sample, as an observer runs it: the state each call returns goes into the next
    state, steps = None, []
    for k in range(len(q)):
        torque, state = model.step_non_rigid(q[k], qd[k], state)
        steps.append(torque)
    np.testing.assert_allclose(np.array(steps) - model.residual_torque(q, qd), static + held, atol=2e-3)
    # the whole stream at once from the states computed first
    batch = model.non_rigid_torque(q, qd, model.friction_states(q))
    np.testing.assert_allclose(batch, np.array(steps), rtol=1e-3, atol=1e-4)  # float32 states
    # no state given: neutral, no memory torque
    np.testing.assert_allclose(
        model.non_rigid_torque(q, qd), static + model.residual_torque(q, qd), atol=1e-4
    )


def test_the_observer_sees_the_pushes_and_not_the_held_friction(arm_data):
    """A person pushes the standing arm six times: the memory model's momentum observer follows each
    push, and between them — where the fit's observer carries the friction the joints hold — stays
    near zero."""
    _, _, models, pushes, rec = arm_data
    t = rec.t
    out = {}
    for name, model in models.items():
        observer = ob.make_observer(model, "momentum", 100.0)
        out[name] = ob.run_observer(observer, t, rec.q, rec.qd, rec.effort)  # logged: joint torques
    r = out["auto"]
    quiet = np.ones(len(t), dtype=bool)
    for p in pushes:
        window = (t >= p.start) & (t < p.end + 0.3)
        quiet &= ~window
        inside = (t >= p.start + 0.1) & (t < p.end)
        assert np.median(r[inside, p.joint]) == pytest.approx(p.magnitude, rel=0.25)
    standing = quiet & np.all(np.abs(rec.qd_true) < 1e-9, axis=1) & (t > 1.0)
    rest_memory = np.abs(out["auto"][standing]).max(0)
    rest_fit = np.abs(out["off"][standing]).max(0)
    assert np.median(rest_memory / rest_fit) < 0.5


def test_evaluate_prints_the_phases_and_the_floor(arm_data, tmp_path):
    recordings, mapping, models, _, _ = arm_data
    result = evaluate_arm(models["auto"], [read_arm_bag(recordings["test"], mapping)], mapping)
    entry = result["test"]
    assert set(entry["phases"]["share"]) == {"moving", "standing", "reversing"}
    assert (
        entry["torque_rre_standing_mean_percent"]
        < entry["least_squares_fit"]["torque_rre_standing_mean_percent"] + 1e-9
    )
    r = subprocess.run(
        [sys.executable, "-m", "ros_lnn.cli", "evaluate", "--model", str(models["auto"].path), "--bag",
         str(recordings["test"]), "--no-plots", "--json", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "standing: |q̇| < 0.02 rad/s" in r.stdout and "friction memory on" in r.stdout
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["test"]["torque_rre_standing_mean_percent"] == pytest.approx(
        entry["torque_rre_standing_mean_percent"]
    )


class _GraphStepDynamics:
    """The observer's dynamics built independently, sample by sample: the arm model's own M, C, g
    (a fresh Pinocchio workspace each) and friction + residual from its graph with the friction state
    in and out (:meth:`ArmModel.step_non_rigid`: the graph advances the state), started as
    ``friction_state_start: measured`` starts it."""

    def __init__(self, model):
        self.model, self.n, self.joints, self.state = model, model.n, model.joints, None

    def reset(self):
        self.state = None

    def start_from(self, q, qd, tau):
        from ros_lnn.arm.presliding import state_matching

        m = self.model
        if m.memory is None:
            return
        unexplained = tau - m.gravity_torque(q) - m.coriolis_matrix(q, qd) @ qd - m.non_rigid_torque(q, qd)[0]
        self.state = state_matching(m.memory, q, unexplained)

    def terms(self, q, qd):
        m = self.model
        torque, self.state = m.step_non_rigid(q, qd, self.state)
        return m.mass_matrix(q), m.coriolis_matrix(q, qd), m.gravity_torque(q), torque


@pytest.mark.parametrize("memory", ["auto", "off"])
def test_the_batched_observer_gives_what_the_graph_sample_by_sample_gives(arm_data, memory):
    """The pushes on the standing arm through the momentum observer in a node's batches (one graph
    call per batch, the friction state advanced per sample in numpy) against the observer fed sample
    by sample by dynamics built apart (the graph's own state out, float32): the same residual to the
    graph's float32 round-off, the same collision onsets."""
    _, _, models, pushes, rec = arm_data
    model = models[memory]
    t, q, qd, tau = rec.t, rec.q, rec.qd, rec.effort
    one = ob.make_observer(_GraphStepDynamics(model), "momentum", 100.0)
    r_one = np.array([one.update(float(t[k]), q[k], qd[k], tau[k]) for k in range(len(t))])
    batched = ob.make_observer(model, "momentum", 100.0)
    r_batch = np.empty_like(r_one)
    rng = np.random.default_rng(7)
    a = 0
    while a < len(t):
        b = min(len(t), a + int(rng.choice([1, 2, 5, 20, 100])))
        r_batch[a:b] = batched.update_batch(t[a:b], q[a:b], qd[a:b], tau[a:b])
        a = b
    np.testing.assert_allclose(r_batch, r_one, rtol=0, atol=2e-3)
    static = 0.04 * np.array([87, 87, 87, 87, 12, 12, 12], dtype=float)  # half a push
    th = ob.Thresholds(JOINTS, static, np.zeros(7), hold_s=0.1)
    found = []
    for r in (r_one, r_batch):
        det = ob.CollisionDetector(th)
        found.append([(k, o.joint) for k, onsets in det.update_batch(t, r, qd) for o in onsets])
    assert found[0] == found[1]
    assert {j for _, j in found[0]} >= {p.joint for p in pushes}
