"""The suite's split: the ROS tests (marker ``ros``, given by test/conftest.py to every test of a file
that uses ROS) run on both distributions, the rest once."""

from pathlib import Path

from conftest import uses_ros

TEST = Path(__file__).resolve().parents[1]
REPO = TEST.parent


def test_node_and_launch_tests_are_ros_tests_and_the_math_is_not():
    for path in sorted((TEST / "nodes").glob("test_*.py")) + [TEST / "package" / "test_launch_files.py"]:
        assert uses_ros(path), path
    for name in ("physics/test_physics_crane.py", "arm/test_presliding.py", "models/test_models_losses.py"):
        assert not uses_ros(TEST / name), name


def test_every_file_that_imports_rclpy_runs_on_both_distributions():
    for path in sorted(TEST.rglob("test_*.py")):
        text = path.read_text()
        if "import rclpy" in text or "from rclpy" in text:
            assert uses_ros(path), path


def test_make_test_runs_the_ros_tests_on_jazzy():
    make = (REPO / "Makefile").read_text()
    jazzy = next(line for line in make.splitlines() if "Jazzy wheels" in line and "pytest" in line)
    assert "-m ros" in jazzy
    kilted = next(line for line in make.splitlines() if "Kilted wheels" in line and "pytest" in line)
    assert "-m ros" not in kilted
