"""The command line reads only what it should (issue 23): a configuration file is a regular file of at
most 1 MiB, parsed without YAML aliases or deep nesting, and its values of the wrong type are one line
and exit code 2; a bag is a directory or a regular file (a FIFO or device is refused, never read);
``--out`` is checked (writable, not a directory) before any training."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ros_lnn.cli import main
from ros_lnn.errors import ConfigError


def _cli(*argv, timeout=60):
    """The command in its own process (a hang fails the test instead of stalling it)."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from ros_lnn.cli import main; sys.exit(main())", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stderr, time.monotonic() - t0


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("bag:\n  joint_states_topic: 5\n  free_joints: [pendulum_joint]\n", "joint_states_topic"),
        ("bag:\n  servo_effort: [a, b]\n  free_joints: [pendulum_joint]\n", "servo_effort"),
        ("bag:\n  savgol_window: [1]\n  free_joints: [pendulum_joint]\n", "savgol_window"),
        ("bag:\n  gap_factor: .nan\n  free_joints: [pendulum_joint]\n", "gap_factor"),
        ("bag:\n  free_joints: {a: 1}\n", "free_joints"),
        ("bag:\n  joint_kinds: [a]\n  free_joints: [pendulum_joint]\n", "joint_kinds"),
    ],
)
def test_mapping_values_of_the_wrong_type_are_one_line(tmp_path, body, named):
    from ros_lnn.bags.mapping import BagMapping

    path = tmp_path / "map.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=named) as info:
        BagMapping.from_yaml(path)
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_yaml_aliases_are_refused_at_once(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{k}: &a{k} [" + ",".join([f"*a{k - 1}"] * 9) + "]" for k in range(1, 10)]
    path = tmp_path / "laughs.yaml"
    path.write_text("bag:\n" + "\n".join("  " + line for line in lines) + "\n")
    from ros_lnn.files import load_yaml

    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="aliases"):
        load_yaml(path)
    assert time.monotonic() - t0 < 1.0


def test_deep_nesting_and_big_files_are_refused(tmp_path):
    from ros_lnn.files import MAX_CONFIG_BYTES, load_yaml

    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(ConfigError, match="nested"):
        load_yaml(deep)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_CONFIG_BYTES)
    with pytest.raises(ConfigError, match="at most"):
        load_yaml(big)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_config_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = {"fifo": tmp_path / "map.yaml", "dev_zero": "/dev/zero", "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    rc, err, _ = _cli("evaluate", "--bag", str(tmp_path / "absent"), "--config", str(path))
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "not a regular file" in err  # and returned: a read of the FIFO would hang past _cli's timeout


def test_a_fifo_named_as_a_bag_is_refused_not_read(tmp_path):
    fifo = tmp_path / "rec.mcap"
    os.mkfifo(fifo)
    rc, err, _ = _cli("evaluate", "--bag", str(fifo))
    assert rc == 2 and "Traceback" not in err, err
    assert "FIFO" in err and len(err.strip().splitlines()) == 1, err


def test_train_out_checked_before_training(tmp_path, capsys):
    folder = tmp_path / "x.onnx"
    folder.mkdir()
    assert main(["train", "--model", "lnn", "--out", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "directory" in err, err
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            assert main(["train", "--model", "lnn", "--out", str(locked / "m.onnx")]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "cannot write" in err, err
        finally:
            locked.chmod(0o700)
