"""``ros-lnn simulate``: simulate the reference systems and write the trials (npz)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import ConfigError


def add_arguments(parser):
    parser.add_argument(
        "--system",
        choices=("crane", "chain"),
        default="crane",
        help="crane: the 11 trials of the ServoLNN paper (default); chain: n-link excitation trials",
    )
    parser.add_argument("--links", type=int, default=2, help="chain: number of links (default 2)")
    parser.add_argument(
        "--servo",
        default=None,
        help="comma-separated servo joints (chain default: joint_1; '' for none; crane: cart_joint only)",
    )
    parser.add_argument("--trials", type=int, default=3, help="chain: number of trials (default 3)")
    parser.add_argument("--duration", type=float, default=5.0, help="chain: seconds per trial (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="chain: random seed of the excitations")
    parser.add_argument(
        "--no-cache", action="store_true", help="crane: regenerate instead of using the cache"
    )
    parser.add_argument("--out", help="output file (.npz)")
    parser.add_argument(
        "--bag",
        help="(also) write the trials as a rosbag2 directory: /joint_states, "
        "/servo_commands, /ground_truth (see ros_lnn/bags/writer.py)",
    )
    parser.add_argument(
        "--storage",
        choices=("sqlite3", "mcap"),
        default="sqlite3",
        help="rosbag2 storage of --bag (default sqlite3)",
    )


def make_trials(args, progress=print):
    from ..physics.chain import PlanarChain
    from ..physics.datasets import chain_trials, paper_crane_trials

    servo = None if args.servo is None else tuple(s for s in args.servo.split(",") if s.strip())
    if args.system == "crane":
        if servo not in (None, ("cart_joint",)):
            raise ConfigError(f"--servo {args.servo}: the crane data set drives cart_joint only")
        return paper_crane_trials(cache=not args.no_cache, progress=lambda n: progress(f"simulating {n}"))
    if args.links < 1:
        raise ConfigError(f"--links {args.links}: a chain needs at least one link")
    chain = PlanarChain.uniform(args.links, servo_joints=("joint_1",) if servo is None else servo)
    progress(f"simulating {args.trials} trials of a {args.links}-link chain, servo {chain.servo_names}")
    return chain_trials(chain, n_trials=args.trials, duration=args.duration, seed=args.seed)


def trial_writer(path):
    """The function that writes trials to ``path``, chosen by its suffix (.npz); checked before any
    simulation runs so a bad ``--out`` fails at once."""
    from ..physics.trials import save_trials

    path = Path(path)
    if path.suffix != ".npz":
        raise ConfigError(f"--out {path}: unsupported output format '{path.suffix}' (use .npz)")
    if path.is_dir():
        raise ConfigError(f"--out {path} is a folder; give a file name ending in .npz")
    _check_writable(path)

    def write(trials):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_trials(path, trials)
        except OSError as exc:
            reason = exc.strerror or exc
            raise ConfigError(f"--out {path}: cannot write it ({reason}); choose another path") from None

    return write


def _check_writable(path: Path) -> None:
    """Fail before any simulation when ``path``'s folder cannot be created or written."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        reason = exc.strerror or exc
        raise ConfigError(f"--out {path}: cannot write there ({reason}); choose another path") from None


def write_trials(path, trials) -> None:
    trial_writer(path)(trials)


def run(args) -> int:
    start = time.perf_counter()
    if not args.out and not args.bag:
        raise ConfigError("give --out FILE.npz and/or --bag DIR")
    write = trial_writer(args.out) if args.out else None
    if args.bag and Path(args.bag).exists():
        raise ConfigError(f"--bag {args.bag} exists already; remove it or choose another path")
    trials = make_trials(args, progress=lambda msg: print(msg, file=sys.stderr))
    samples = sum(len(t) for t in trials)
    if write:
        write(trials)
        print(f"wrote {len(trials)} trials ({samples} samples) to {args.out}")
    if args.bag:
        from ..bags.writer import write_trials_bag

        write_trials_bag(args.bag, trials, args.storage)
        print(f"wrote {len(trials)} trials ({samples} samples) to rosbag2 {args.bag} ({args.storage})")
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 0
