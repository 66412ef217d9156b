"""A model export killed mid-write (a real process, killed by the kernel at the write that crosses its
file-size limit: RLIMIT_FSIZE with SIGXFSZ's default action) leaves the previous model where the nodes
look for it, never part of a model; a plain write killed the same way leaves a truncated file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import requires_torch

pytestmark = requires_torch
pytest.importorskip("onnx")

#: Writes the shipped model's graph to ``path`` the way ``how`` says, its file size limited to ``limit``.
SCRIPT = textwrap.dedent(
    """
    import resource, signal, sys
    import onnx
    from ros_lnn.inference.runtime import default_model_path
    from ros_lnn.models.export import write_proto
    path, how, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    proto = onnx.load(str(default_model_path()))
    proto.doc_string = "the new model " + "x" * 4096
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: the kernel then only refuses
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    if how == "export":
        write_proto(proto, "ros_lnn", onnx.load(str(default_model_path())).metadata_props[0].value, path)
    else:
        with open(path, "wb") as fh:
            fh.write(proto.SerializeToString())
    """
)


def _killed_write(path, how: str, limit: int) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), how, str(limit)],
        env=dict(os.environ),
        capture_output=True,
        timeout=300,
    )
    return proc.returncode


@pytest.mark.parametrize("how", ["export", "plain"])
def test_an_export_killed_mid_write_leaves_the_previous_model(tmp_path, how):
    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path

    path = tmp_path / "models" / "crane_servo_lnn.onnx"
    path.parent.mkdir()
    previous = default_model_path().read_bytes()
    path.write_bytes(previous)
    assert _killed_write(path, how, limit=len(previous) // 2) == -signal.SIGXFSZ
    if how == "plain":  # the old way: the model the nodes load is cut in half
        assert 0 < path.stat().st_size <= len(previous) // 2
        with pytest.raises(Exception):  # noqa: B017 - ONNX Runtime's own error types
            ServoLnnRuntime(path)
        return
    assert path.read_bytes() == previous  # untouched: the nodes still load the previous model
    assert ServoLnnRuntime(path).model_id
    others = [p.name for p in path.parent.iterdir() if p != path]
    assert all(name.startswith(".crane_servo_lnn.onnx.") and name.endswith(".tmp") for name in others), others
    assert not [p for p in path.parent.glob("*.onnx") if p != path]


def test_an_export_with_room_replaces_the_model_in_one_step(tmp_path):
    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path

    path = tmp_path / "crane_servo_lnn.onnx"
    path.write_bytes(b"the previous model")
    assert _killed_write(path, "export", limit=10 * 1024 * 1024) == 0
    assert ServoLnnRuntime(path).model_id
    assert path.stat().st_size > len(default_model_path().read_bytes())  # the new one, with its doc string
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
