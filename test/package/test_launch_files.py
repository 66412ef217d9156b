"""Launch files, parameter files, URDFs and the RViz config.

Every launch file is evaluated against an install tree built from setup.py's own data_files (so a
file the launch names but setup.py does not install fails here), with the real ament index lookup.
launch and launch_ros have no wheels on PyPI, so the evaluation runs on test/_launch_stand_in.py, which
performs the substitutions and conditions as launch does; where the real launch_ros imports (a ROS
install), the launch files are also built with the real classes. The parameter files are also loaded
by rcl itself through the nodes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import runpy
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import _launch_stand_in as stand_in
import pytest
import yaml

from conftest import HAVE_RCLPY

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
MY_LAUNCH_FILES = [p for p in LAUNCH_FILES if p.name in ("estimator.launch.py", "demo.launch.py")]


def _real_launch_available() -> bool:
    try:
        import launch_ros.actions

        import launch

        return hasattr(launch, "LaunchDescription") and hasattr(launch_ros.actions, "LifecycleNode")
    except Exception:  # noqa: BLE001
        return False


REAL_LAUNCH = _real_launch_available()


@pytest.fixture(scope="module")
def setup_kwargs():
    """What setup.py passes to setup(), captured by running it (cwd = the source tree)."""
    import setuptools

    captured = {}
    original = setuptools.setup
    cwd = os.getcwd()
    setuptools.setup = lambda **kw: captured.update(kw)
    try:
        os.chdir(ROOT)
        runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    finally:
        setuptools.setup = original
        os.chdir(cwd)
    return captured


@pytest.fixture(scope="module")
def install_prefix(setup_kwargs, tmp_path_factory):
    """An install prefix holding exactly the data_files of setup.py."""
    prefix = tmp_path_factory.mktemp("install")
    for dest, files in setup_kwargs["data_files"]:
        for f in files:
            target = prefix / dest / Path(f).name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / f, target)
    return prefix


def evaluate_launch_file(path: Path, prefix: Path, overrides: dict, monkeypatch) -> list[dict]:
    """The nodes a launch of ``path`` with ``overrides`` (name:=value) starts, resolved: package, executable,
    name, namespace, lifecycle, autostart, parameters (files as paths, dicts with typed values),
    remappings, arguments."""
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    return stand_in.run(path, overrides, monkeypatch)


def node_parameters(executable: str) -> dict:
    """name -> default of every parameter the ros_lnn node declares."""
    module = importlib.import_module(f"ros_lnn.nodes.{executable}.parameters")
    return {p.name: p.default for p in module.PARAMETERS}


def test_launch_files_exist():
    names = {p.name for p in LAUNCH_FILES}
    assert {
        "estimator.launch.py",
        "demo.launch.py",
        "dac_controller.launch.py",
        "dac_demo.launch.py",
        "dac_ros2_control.launch.py",
        "arm.launch.py",
    } <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_files_use_substitutions_not_python_file_reading(path):
    tree = ast.parse(path.read_text())
    calls = {
        n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
    }
    assert not calls & {"open", "get_package_share_directory", "read_text"}, path.name
    assert "FindPackageShare" in calls and "PathJoinSubstitution" in calls


@pytest.mark.skipif(
    not REAL_LAUNCH,
    reason="launch_ros is not importable here (no wheels on PyPI): the launch "
    "files are evaluated with test/_launch_stand_in.py",
)
@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_real_launch_builds_every_launch_description(path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from launch import LaunchDescription

    assert isinstance(module.generate_launch_description(), LaunchDescription)


CASES = [
    ("estimator.launch.py", {}),
    (
        "estimator.launch.py",
        {"rviz": "true", "namespace": "robot1", "model": "custom.onnx", "use_sim_time": "true"},
    ),
    ("estimator.launch.py", {"autostart": "false", "servo_commands": "/arm/servo_plan"}),
    ("estimator.launch.py", {"respawn": "false", "respawn_delay": "2.5"}),
    ("demo.launch.py", {}),
    ("demo.launch.py", {"system": "chain", "rviz": "false", "use_sim_time": "true"}),
    (
        "demo.launch.py",
        {"estimate_qdd": "true", "namespace": "demo", "model": "m.onnx", "autostart": "false"},
    ),
    ("demo.launch.py", {"respawn": "false", "respawn_delay": "0.5"}),
]


@pytest.mark.parametrize("name,overrides", CASES, ids=[f"{n}:{o}" for n, o in CASES])
def test_launch_names_only_installed_files_executables_and_declared_parameters(
    name, overrides, install_prefix, setup_kwargs, monkeypatch
):
    monkeypatch.setenv("DISPLAY", ":0")  # RViz by default where a display is set (the headless case: below)
    nodes = evaluate_launch_file(ROOT / "launch" / name, install_prefix, overrides, monkeypatch)
    scripts = dict(s.replace(" ", "").split("=", 1) for s in setup_kwargs["entry_points"]["console_scripts"])
    share = install_prefix / "share" / "ros_lnn"
    ours = [n for n in nodes if n["package"] == "ros_lnn"]
    assert ours, f"{name} starts no ros_lnn node"
    sim_time = overrides.get("use_sim_time") == "true"
    for n in ours:
        assert n["executable"] in scripts, (
            f"{name}: executable {n['executable']} is not a console script in setup.py"
        )
        module, func = scripts[n["executable"]].split(":")
        assert callable(getattr(importlib.import_module(module), func))
        declared = node_parameters(n["executable"])
        assert n["namespace"] == overrides.get("namespace", "")
        for p in n["parameters"]:
            if isinstance(p, str):
                assert Path(p).is_file(), f"{name}: parameter file {p} is not installed"
                assert Path(p).parent == share / "config"
                continue
            for key, value in p.items():
                assert key in declared or key == "use_sim_time", (
                    f"{name}: {n['executable']} has no parameter {key}"
                )
                if key in declared:
                    assert type(value) is type(declared[key]), f"{name}: {key}={value!r}"
    estimators = [n for n in ours if n["executable"] == "servo_lnn"]
    assert len(estimators) == 1, "exactly one servo_lnn variant runs"
    est = estimators[0]
    overrides_of = {k: v for p in est["parameters"] if isinstance(p, dict) for k, v in p.items()}
    # the node brings itself up (its autostart parameter), after a respawn too; launch_ros does nothing
    assert est["lifecycle"] and est["autostart"] is False
    assert overrides_of["autostart"] is (overrides.get("autostart", "true") == "true")
    assert est["respawn"] is (overrides.get("respawn", "true") == "true")
    assert est["respawn_delay"] == float(overrides.get("respawn_delay", "1.0"))
    assert overrides_of["use_sim_time"] is sim_time
    assert overrides_of.get("model_path") == overrides.get("model")  # only an explicit model overrides
    if overrides.get("rviz", "true" if name == "demo.launch.py" else "false") == "true":
        rviz = [n for n in nodes if n["executable"] == "rviz2"]
        assert len(rviz) == 1 and Path(rviz[0]["arguments"][1]) == share / "config" / "ros_lnn.rviz"
        assert Path(rviz[0]["arguments"][1]).is_file()
        rsp = [n for n in nodes if n["executable"] == "robot_state_publisher"]
        assert len(rsp) == 1 and "<robot" in rsp[0]["parameters"][0]["robot_description"]
        system = overrides.get("system", "crane")
        assert (
            rsp[0]["parameters"][0]["robot_description"] == (share / "config" / f"{system}.urdf").read_text()
        )
        assert rsp[0]["parameters"][0]["use_sim_time"] is sim_time
    else:
        assert not [n for n in nodes if n["package"] != "ros_lnn"]
    if name == "demo.launch.py":
        executables = sorted(n["executable"] for n in ours)
        assert executables == ["servo_lnn", "sim"]
        sim = next(n for n in ours if n["executable"] == "sim")
        assert sim["parameters"][-1] == {"publish_clock": sim_time}  # the clock source never follows /clock
        system = overrides.get("system", "crane")
        assert Path(sim["parameters"][0]).name == f"{system}.yaml" == Path(est["parameters"][0]).name
        plan = "servo_commands" if overrides.get("estimate_qdd") == "true" else "sim/servo_plan"
        assert est["remappings"] == [("servo_commands", plan)]
    else:
        assert est["remappings"] == [("servo_commands", overrides.get("servo_commands", "servo_commands"))]


#: Nodes that are never respawned: the spawner runs once and exits, RViz is a window a person closes.
NOT_RESPAWNED = {"spawner", "rviz2"}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("overrides", [{}, {"respawn": "false"}, {"respawn_delay": "3.0", "rviz": "true"}])
def test_every_launch_file_respawns_its_nodes(path, overrides, install_prefix, monkeypatch):
    """respawn (default true) and respawn_delay (default 1 s) reach every node but the spawner and
    RViz; each lifecycle node of ours brings itself up (its autostart parameter), so a respawned process
    comes back active with the parameters the launch gave it."""
    if path.name == "dac_controller.launch.py":
        overrides = {k: v for k, v in overrides.items() if k != "rviz"}  # it starts no RViz
    nodes = evaluate_launch_file(path, install_prefix, overrides, monkeypatch)
    respawn = overrides.get("respawn", "true") == "true"
    delay = float(overrides.get("respawn_delay", "1.0"))
    for node in nodes:
        expected = (respawn, delay) if node["executable"] not in NOT_RESPAWNED else (False, None)
        assert (node["respawn"], node["respawn_delay"]) == expected, node["executable"]
        if node["lifecycle"]:
            params = {k: v for p in node["parameters"] if isinstance(p, dict) for k, v in p.items()}
            assert node["autostart"] is False and params["autostart"] is True, node["executable"]
    assert any(n["respawn"] for n in nodes) == respawn


def test_a_bad_launch_argument_is_refused(install_prefix, monkeypatch):
    with pytest.raises(stand_in.LaunchError, match="not one of"):
        evaluate_launch_file(
            ROOT / "launch" / "demo.launch.py", install_prefix, {"system": "arm"}, monkeypatch
        )
    with pytest.raises(stand_in.LaunchError, match="invalid condition"):
        evaluate_launch_file(
            ROOT / "launch" / "estimator.launch.py", install_prefix, {"rviz": "yes"}, monkeypatch
        )
    with pytest.raises(stand_in.LaunchError, match="invalid condition"):
        evaluate_launch_file(
            ROOT / "launch" / "estimator.launch.py", install_prefix, {"respawn": "always"}, monkeypatch
        )
    with pytest.raises(ValueError, match="could not convert"):
        evaluate_launch_file(
            ROOT / "launch" / "dac_demo.launch.py", install_prefix, {"respawn_delay": "soon"}, monkeypatch
        )


def test_every_config_file_and_the_default_model_are_installed(setup_kwargs):
    installed = {Path(f).as_posix() for _, files in setup_kwargs["data_files"] for f in files}
    for f in [
        "config/crane.yaml",
        "config/chain.yaml",
        "config/crane.urdf",
        "config/chain.urdf",
        "config/ros_lnn.rviz",
        "config/controllers.yaml",
        "config/dac_chain_ros2_control.urdf",
    ] + [p.relative_to(ROOT).as_posix() for p in LAUNCH_FILES]:
        assert (ROOT / f).is_file(), f
        assert f in installed, f"setup.py does not install {f}"
    model = ROOT / "models" / "crane_servo_lnn.onnx"
    if not model.is_file():
        pytest.skip(
            "models/crane_servo_lnn.onnx (the shipped model, produced by the training pipeline) "
            "is not in the tree yet"
        )
    assert "models/crane_servo_lnn.onnx" in installed


def _node_table(kind):
    if kind == "servo_lnn":
        from ros_lnn.nodes.servo_lnn.node import PARAMETERS
    else:
        from ros_lnn.nodes.sim.node import PARAMETERS
    return PARAMETERS


def _node_parameters(kind):
    return {p.name: p.default for p in _node_table(kind)}


@pytest.mark.skipif(not HAVE_RCLPY, reason="the node modules import rclpy")
@pytest.mark.parametrize("config", ["crane.yaml", "chain.yaml"])
def test_config_keys_are_declared_parameters_of_the_right_type(config):
    data = yaml.safe_load((ROOT / "config" / config).read_text())
    for key, section in data.items():
        kind = key.rsplit("/", 1)[-1]
        declared = _node_parameters(kind)
        assert not _node_table(kind).problems(section["ros__parameters"]), f"config/{config}: {kind}"
        for name, value in section["ros__parameters"].items():
            assert name in declared, f"config/{config}: {kind} has no parameter '{name}'"
            default = declared[name]
            if isinstance(default, bool) or isinstance(value, bool):
                assert isinstance(value, bool) and isinstance(default, bool), f"{config}: {name}"
            elif isinstance(default, float):
                assert isinstance(value, float), f"config/{config}: {name} must be a float (write 1.0, not 1)"
            elif isinstance(default, list) and default:
                assert isinstance(value, list) and all(type(v) is type(default[0]) for v in value), name
            elif not isinstance(default, list):
                assert type(value) is type(default), f"config/{config}: {name}"


@pytest.mark.parametrize("system", ["crane", "chain"])
def test_urdf_joints_match_the_config(system):
    robot = ET.parse(ROOT / "config" / f"{system}.urdf").getroot()
    movable = {j.get("name"): j for j in robot.findall("joint") if j.get("type") != "fixed"}
    links = {link.get("name") for link in robot.findall("link")}
    config = yaml.safe_load((ROOT / "config" / f"{system}.yaml").read_text())
    est = config["/**/servo_lnn"]["ros__parameters"]
    assert set(movable) == set(est["free_joints"]) | set(est["servo_joints"])
    for frame in est["marker_frames"] + [est["marker_frame"]]:
        assert frame in links, f"{system}.urdf has no link '{frame}' for the markers"
    if system == "chain":
        sim = config["/**/sim"]["ros__parameters"]
        assert sim["chain_joints"] == sorted(movable)
        assert sim["chain_servo_joints"] == est["servo_joints"]
    else:
        assert movable["cart_joint"].get("type") == "prismatic"


def test_rviz_config_shows_robot_and_estimator_markers():
    rviz = yaml.safe_load((ROOT / "config" / "ros_lnn.rviz").read_text())
    displays = {d["Class"]: d for d in rviz["Visualization Manager"]["Displays"]}
    assert displays["rviz_default_plugins/RobotModel"]["Description Topic"]["Value"] == "robot_description"
    markers = displays["rviz_default_plugins/MarkerArray"]
    assert markers["Topic"]["Value"] == "servo_lnn/markers"  # the estimator's ~/markers, relative
    assert rviz["Visualization Manager"]["Global Options"]["Fixed Frame"] == "world"


@pytest.mark.skipif(not HAVE_RCLPY, reason="rclpy is not importable")
def test_rcl_loads_the_parameter_files_into_the_nodes():
    import rclpy

    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode
    from ros_lnn.nodes.sim.node import SimNode

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    try:
        crane = ["--ros-args", "--params-file", str(ROOT / "config" / "crane.yaml")]
        est = ServoLnnNode(namespace="/cfg", context=context, cli_args=crane)
        assert est.get_parameter("marker_frames").value == ["cart"]
        assert est.get_parameter("autostart").value is True
        est.destroy_node()
        chain = ["--ros-args", "--params-file", str(ROOT / "config" / "chain.yaml")]
        sim = SimNode(namespace="/cfg", context=context, cli_args=chain)
        assert sim.system.coordinate_names == ("joint_1", "joint_2", "joint_3")
        assert sim.servo_names == ["joint_2"] and sim.dt == pytest.approx(1 / 200)
        sim.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def declared_arguments(path: Path, monkeypatch) -> dict:
    """name -> description of every argument ``path`` declares, read through the stand-in (no launch)."""
    for name, module in stand_in.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    description = stand_in.load(path)
    return {
        e.name: e.description for e in description.entities if isinstance(e, stand_in.DeclareLaunchArgument)
    }


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_launch_argument_is_listed_in_the_files_usage_and_the_readme(path, monkeypatch):
    arguments = declared_arguments(path, monkeypatch)
    assert arguments and all(arguments.values()), f"{path.name}: every argument has a description"
    usage = ast.get_docstring(ast.parse(path.read_text())) or ""
    lines = (ROOT / "docs" / "nodes.md").read_text().splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith(f"    ros2 launch ros_lnn {path.name}")]
    assert starts, f"docs/nodes.md shows no command line 'ros2 launch ros_lnn {path.name}'"
    end = starts[0] + 1
    while end < len(lines) and lines[end].startswith("        "):  # its continuation lines
        end += 1
    shown = "\n".join(lines[starts[0] : end])
    for name in arguments:
        assert f"{name}:=" in usage, f"{path.name}: its docstring does not list {name}:="
        assert f"{name}:=" in shown, f"docs/nodes.md: the {path.name} line does not list {name}:="


@pytest.mark.parametrize("name", ["demo.launch.py", "arm.launch.py"])
def test_rviz_is_off_on_a_headless_machine_and_on_where_a_display_is_set(name, install_prefix, monkeypatch):
    path = ROOT / "launch" / name
    args = {"model": "arm.onnx"} if name == "arm.launch.py" else {}

    def rviz(overrides):
        nodes = evaluate_launch_file(path, install_prefix, args | overrides, monkeypatch)
        return [n for n in nodes if n["executable"] == "rviz2"]

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert rviz({}) == []  # a headless robot computer: nothing that would exit 1
    assert len(rviz({"rviz": "true"})) == 1
    for variable, value in (("DISPLAY", ":0"), ("WAYLAND_DISPLAY", "wayland-0")):
        monkeypatch.setenv(variable, value)
        assert len(rviz({})) == 1
        assert rviz({"rviz": "false"}) == []
        monkeypatch.delenv(variable)


@pytest.mark.skipif(not HAVE_RCLPY, reason="the node modules import rclpy")
@pytest.mark.parametrize(
    "overrides",
    [
        {"model": "panda.onnx"},
        {"model": "panda.onnx", "controller": "true", "law": "feedforward_pd", "namespace": "arm1"},
        {"model": "panda.onnx", "thresholds": "th.yaml", "observer_gains": "[150.0]", "autostart": "false"},
    ],
)
def test_arm_launch_starts_the_observer_and_optionally_the_controller(overrides, install_prefix, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    nodes = evaluate_launch_file(ROOT / "launch" / "arm.launch.py", install_prefix, overrides, monkeypatch)
    by_exe = {n["executable"]: n for n in nodes}
    controller = overrides.get("controller") == "true"
    assert sorted(by_exe) == sorted(
        ["effort_observer"] + (["dac_controller", "effort_watchdog"] if controller else [])
    )
    autostart = overrides.get("autostart", "true") == "true"
    for n in nodes:
        assert n["namespace"] == overrides.get("namespace", "")
        declared = node_parameters(n["executable"])
        values = {k: v for p in n["parameters"] if isinstance(p, dict) for k, v in p.items()}
        for key, value in values.items():
            assert key in declared or key == "use_sim_time", f"{n['executable']} has no parameter {key}"
            if key in declared:
                assert type(value) is type(declared[key]), (n["executable"], key, value)
        if n["lifecycle"]:  # configures and activates itself, never through launch_ros (#445)
            assert n["autostart"] is False and values["autostart"] is autostart
            assert values["model_path"] == "panda.onnx"
    observer = {k: v for p in by_exe["effort_observer"]["parameters"] for k, v in p.items()}
    assert observer["gains"] == [float(overrides.get("observer_gains", "[50.0]").strip("[]"))]
    assert observer["thresholds"] == overrides.get("thresholds", "")
    if controller:
        dac = by_exe["dac_controller"]
        config = Path(dac["parameters"][0])
        assert config.name == "panda_arm_controller.yaml" and config.is_file()
        assert dac["parameters"][1]["law"] == "feedforward_pd"
        watchdog = by_exe["effort_watchdog"]
        assert watchdog["parameters"][0]["joints"] == [f"panda_joint{i}" for i in range(1, 8)]
        assert dict(watchdog["remappings"]) == {
            "commands_in": "dac_controller/joint_effort_command",
            "commands_out": "/effort_controller/commands",
        }


def test_arm_launch_runs_robot_state_publisher_on_xacro_output(install_prefix, monkeypatch, tmp_path):
    urdf = ROOT / "config" / "robots" / "panda" / "panda.urdf"
    overrides = {"model": "panda.onnx", "urdf": str(urdf), "rviz": "false"}
    if shutil.which("xacro") is None:  # the launch runs xacro (a URDF passes through it unchanged)
        with pytest.raises(stand_in.LaunchError, match="'xacro' not found"):
            evaluate_launch_file(ROOT / "launch" / "arm.launch.py", install_prefix, overrides, monkeypatch)
        return
    nodes = evaluate_launch_file(ROOT / "launch" / "arm.launch.py", install_prefix, overrides, monkeypatch)
    rsp = next(n for n in nodes if n["executable"] == "robot_state_publisher")
    assert "panda_joint7" in rsp["parameters"][0]["robot_description"]


@pytest.mark.skipif(not HAVE_RCLPY, reason="the node modules import rclpy")
def test_the_arm_rviz_config_and_the_controller_parameters():
    from ros_lnn.nodes.dac_controller.parameters import PARAMETERS

    rviz = yaml.safe_load((ROOT / "config" / "arm.rviz").read_text())
    displays = {d["Class"]: d for d in rviz["Visualization Manager"]["Displays"]}
    assert displays["rviz_default_plugins/Wrench"]["Topic"]["Value"] == "effort_observer/external_wrench"
    assert displays["rviz_default_plugins/Marker"]["Topic"]["Value"] == "effort_observer/collision_marker"
    assert displays["rviz_default_plugins/RobotModel"]["Description Topic"]["Value"] == "robot_description"
    values = yaml.safe_load((ROOT / "config" / "panda_arm_controller.yaml").read_text())
    params = values["/**/dac_controller"]["ros__parameters"]
    assert not PARAMETERS.problems(params) and set(params) <= {p.name for p in PARAMETERS}
