"""An arm model for the node tests: a real, small identification (``ros_lnn.arm.training.train_arm``, the
fit alone) on a recording of the benchmarks' simulated Panda, the arm ``arm_sim`` simulates."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PANDA_URDF = ROOT / "config" / "robots" / "panda" / "panda.urdf"
PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


def train_panda_model(folder: Path, seconds: float = 6.0, residual: str = "off") -> Path:
    """``folder/panda.onnx``, trained on ``seconds`` of the simulated Panda at 1 kHz."""
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.arm.training import train_arm

    arm, truth, friction, noise = sim.panda_generator()
    run = sim.simulate_arm(truth, seconds, nominal=arm, friction=friction, noise=noise, seed=41)
    out = Path(folder) / "panda.onnx"
    train_arm(
        [run.recording("r")], PANDA_URDF, ArmMapping(actuated_joints=PANDA_JOINTS), out=out, residual=residual
    )
    return out
