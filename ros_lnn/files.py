"""Files a user names (a parameter, a command-line option): checked before anything is read or
written, so that a FIFO, a device or a directory in the wrong place gives one line instead of a hang,
an endless read or a file written somewhere else.

* :func:`output_file_problem` / :func:`open_output` — a file to write: its directory exists and is
  writable; if the file exists it is a regular file. The file written is exactly the name given.
* :func:`input_file_problem` / :func:`read_text_limited` — a file to read: a regular file (no FIFO,
  no device, no directory), at most ``limit`` bytes.
* :func:`atomic_output` / :func:`write_atomically` — a file others read while it may be rewritten (a
  model a node loads, a bag's metadata.yaml): replaced in one step, never seen half written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ConfigError

#: Longest configuration file read (a YAML mapping of options is a few kB).
MAX_CONFIG_BYTES = 1024 * 1024


def _kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def _nearest_existing(p: Path) -> Path:
    while not p.exists() and p.parent != p:
        p = p.parent
    return p


def output_dir_problem(path) -> str:
    """Why ``path`` cannot be (created and) written as a directory ('' when it can)."""
    p = Path(os.fspath(path)).expanduser()
    if p.exists():
        if not p.is_dir():
            return "exists and is not a directory"
        return "" if os.access(p, os.W_OK | os.X_OK) else "is a directory this process cannot write"
    base = _nearest_existing(p.absolute())
    if not base.is_dir():
        return f"cannot be created: {base} is not a directory"
    if not os.access(base, os.W_OK | os.X_OK):
        return f"cannot be created: {base} is not writable"
    return ""


def output_file_problem(path, create_parents: bool = False) -> str:
    """Why ``path`` cannot be written as a regular file ('' when it can); ``create_parents``: a
    missing directory is fine when it can be created."""
    text = os.fspath(path)
    if not text:
        return "is empty"
    if "\0" in text:
        return "contains a NUL character"
    p = Path(text).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return f"cannot be checked ({exc.strerror or exc})"
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            return f"is {_kind(st.st_mode)}, not a regular file"
        if not os.access(p, os.W_OK):
            return "is not writable"
        return ""
    if create_parents and not parent.exists():
        problem = output_dir_problem(parent)
        return f"is in a directory that {problem}" if problem else ""
    if not parent.is_dir():
        return f"is in a directory that does not exist ({parent})"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"is in a directory this process cannot write ({parent})"
    return ""


def open_output(path):
    """The binary file object of ``path`` for writing, opened so that it never blocks and never writes
    anything but a regular file of exactly that name; OSError / ConfigError (one line) otherwise."""
    p = Path(os.fspath(path)).expanduser()
    # O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of blocking the process
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{p} is {_kind(st.st_mode)}, not a regular file: nothing written")
        os.ftruncate(fd, 0)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def input_file_problem(path, limit: int | None = None) -> str:
    """Why ``path`` cannot be read as a regular file of at most ``limit`` bytes ('' when it can)."""
    p = Path(os.fspath(path)).expanduser()
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}, not a regular file"
    if limit is not None and st.st_size > limit:
        return f"is {st.st_size} bytes; at most {limit} are read"
    return ""


def read_text_limited(path, limit: int = MAX_CONFIG_BYTES, what: str = "file") -> str:
    """The text of a regular file of at most ``limit`` bytes; ConfigError naming the file otherwise
    (the check and the read share one open descriptor, so a file swapped in between is caught too)."""
    p = Path(os.fspath(path)).expanduser()
    problem = input_file_problem(p, limit)
    if problem:
        raise ConfigError(f"{what} {p} {problem}")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"{what} {p} cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ConfigError(f"{what} {p} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{what} {p} is larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {p} is not UTF-8 text") from None


#: Deepest nesting of lists and mappings a configuration file may have.
MAX_YAML_DEPTH = 64


def load_yaml(path, what: str = "config", limit: int = MAX_CONFIG_BYTES):
    """The YAML document of a configuration file, read by :func:`read_text_limited` and parsed by a
    safe loader that refuses aliases (``*name``: a few lines can expand to gigabytes) and nesting
    deeper than :data:`MAX_YAML_DEPTH`; ConfigError (one line) on any of these or invalid YAML."""
    text = read_text_limited(path, limit, what)
    return parse_yaml(text, f"{what} {Path(os.fspath(path)).expanduser()}")


def parse_yaml(text: str, source: str = "YAML"):
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise ConfigError(
                    f"{source}: YAML aliases (*{event.anchor}) are not accepted; write the value out"
                )
            self.depth += 1
            if self.depth > MAX_YAML_DEPTH:
                raise ConfigError(f"{source}: nested deeper than {MAX_YAML_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    try:
        return yaml.load(text, Loader=Loader)  # a SafeLoader subclass: plain data only
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply") from None


@contextmanager
def atomic_output(path) -> Iterator:
    """A binary file to write ``path``'s new content into: a unique temporary file in the same
    directory (``.<name>.<random>.tmp``), flushed to the disk (fsync) and renamed over ``path``
    (``os.replace``, atomic on POSIX) when the block ends, the directory synced too. A reader sees the
    old file or the new one, never part of one; an error or a kill on the way leaves ``path`` as it was
    (and at most the temporary file, removed on an error)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def write_atomically(path, data: bytes) -> Path:
    """``path`` replaced by ``data`` in one step (:func:`atomic_output`)."""
    with atomic_output(path) as fh:
        fh.write(data)
    return Path(path)


def _sync_directory(directory: Path) -> None:
    """The rename itself onto the disk (a directory entry); where a directory cannot be opened, skipped."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
