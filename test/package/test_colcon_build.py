"""`colcon build` of ros_lnn and interfaces/ros_lnn_msgs in a scratch workspace, as on a ROS install,
with colcon, ament_cmake and rosidl from PyPI (the ros-build extras): the install tree holds every
executable `ros2 run ros_lnn ...` would find, the share files the launch files name, and messages that
import from the install."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HAVE_RCLPY

ROOT = Path(__file__).resolve().parents[2]
PREFIX = Path(sys.prefix)
COLCON = Path(sys.executable).parent / "colcon"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not COLCON.is_file() or not HAVE_RCLPY,
        reason="colcon and the ROS wheels are not installed (extras ros-build, ros)",
    ),
]


def console_scripts() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "console_scripts" for k in node.keys
        ):
            scripts = node.values[[k.value for k in node.keys].index("console_scripts")]
            return [s.value.split("=")[0].strip() for s in scripts.elts]
    raise AssertionError("setup.py declares no console_scripts")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("ws")
    env = dict(os.environ, AMENT_PREFIX_PATH=str(PREFIX), CMAKE_PREFIX_PATH=str(PREFIX))
    cmd = [
        str(COLCON),
        "--log-base",
        str(ws / "log"),
        "build",
        "--base-paths",
        str(ROOT),
        str(ROOT / "interfaces"),
        "--build-base",
        str(ws / "build"),
        "--install-base",
        str(ws / "install"),
        "--cmake-args",
        "-DBUILD_TESTING=OFF",
        f"-DPython3_EXECUTABLE={sys.executable}",
        f"-DCMAKE_PROJECT_INCLUDE={ROOT / 'interfaces' / 'pypi_wheels.cmake'}",
    ]
    proc = subprocess.run(cmd, check=False, cwd=ws, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "Finished <<< ros_lnn " in proc.stdout and "Finished <<< ros_lnn_msgs " in proc.stdout
    return ws / "install"


def test_install_tree_has_every_executable_and_share_file(workspace):
    lib = workspace / "ros_lnn" / "lib" / "ros_lnn"
    assert sorted(p.name for p in lib.iterdir()) == sorted(console_scripts())
    share = workspace / "ros_lnn" / "share" / "ros_lnn"
    for name in (
        ["package.xml", "models/crane_servo_lnn.onnx"]
        + [str(p.relative_to(ROOT)) for p in sorted((ROOT / "launch").glob("*.launch.py"))]
        + [str(p.relative_to(ROOT)) for p in sorted((ROOT / "config").iterdir()) if p.is_file()]
    ):
        assert (share / name).is_file(), f"colcon did not install share/ros_lnn/{name}"
    assert (workspace / "ros_lnn_msgs" / "share" / "ros_lnn_msgs" / "msg" / "Energy.msg").is_file()


def test_installed_package_runs_from_the_install_tree(workspace, tmp_path):
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    env = dict(
        os.environ,
        AMENT_PREFIX_PATH=os.pathsep.join(
            [str(workspace / "ros_lnn"), str(workspace / "ros_lnn_msgs"), str(PREFIX)]
        ),
        PYTHONPATH=os.pathsep.join(str(workspace / p / site) for p in ("ros_lnn", "ros_lnn_msgs")),
        LD_LIBRARY_PATH=os.pathsep.join(
            [str(workspace / "ros_lnn_msgs" / "lib"), os.environ.get("LD_LIBRARY_PATH", "")]
        ),
    )
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    probe = (
        "import ros_lnn, ros_lnn_msgs.msg as m\n"
        "from ament_index_python.packages import get_package_share_directory as share\n"
        "print(ros_lnn.__file__); print(share('ros_lnn')); print(m.Energy(power=2.5).power)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    module, share, power = out.stdout.split()
    assert module.startswith(str(workspace / "ros_lnn"))
    assert share == str(workspace / "ros_lnn" / "share" / "ros_lnn")
    assert power == "2.5"
    cli = subprocess.run(
        [str(workspace / "ros_lnn" / "lib" / "ros_lnn" / "ros-lnn"), "--help"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0 and "usage: ros-lnn" in cli.stdout, cli.stderr[-3000:]
