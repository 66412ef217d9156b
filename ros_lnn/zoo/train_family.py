"""Train one zoo family on its reference data and save a checkpoint:
``python -m ros_lnn.zoo.train_family --model lnn_nh --system rolling_disk --out runs/disk_nh.pt``.

Families: ``lnn`` / ``lnn_nh`` on a nonholonomic example (particle, drone, rolling_disk); ``tlnn`` /
``lnn`` / ``node`` on a planar point-mass chain (``--system chain --links N``, absolute angles).
ServoLNN/DeLaN train through ``ros-lnn train`` (the project trainer); these families share the
acceleration-MSE loop :func:`ros_lnn.models.lnn.train_acceleration` and save ``{model_config,
model_state, history}`` like :func:`ros_lnn.models.lnn.save`. None of them exports to ONNX.
"""
from __future__ import annotations

import argparse
import json

FAMILIES = ("lnn", "lnn_nh", "tlnn", "node")
SYSTEMS = ("particle", "drone", "rolling_disk", "chain")


def add_arguments(parser) -> None:
    parser.add_argument("--model", choices=FAMILIES, required=True)
    parser.add_argument("--system", choices=SYSTEMS, required=True)
    parser.add_argument("--links", type=int, default=2, help="chain links (--system chain)")
    parser.add_argument("--trajectories", type=int, default=20)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 128])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="checkpoint file (.pt)")


def build(args):
    """(model, training data) for the chosen family and system."""
    import numpy as np

    from ..errors import ConfigError
    from ..models.lnn import for_system
    from ..physics.chain import PlanarChain
    from ..physics.nonholonomic import SYSTEMS as NH, make_dataset
    from .tlnn_study import chain_trajectories, make_model, to_absolute

    hidden = tuple(args.hidden)
    if args.system == "chain":
        if args.model == "lnn_nh":
            raise ConfigError("--model lnn_nh needs a constrained system: particle, drone or rolling_disk")
        chain = PlanarChain.uniform(args.links)
        trajs = chain_trajectories(chain, args.trajectories, args.duration, 25.0, args.seed)
        q, qd, qdd = to_absolute(*(np.concatenate([t[i] for t in trajs]) for i in range(3)))
        kind = {"lnn": "LNN", "tlnn": "TLNN", "node": "NODE"}[args.model]
        return make_model(kind, args.links, hidden), {"q": q, "qd": qd, "qdd": qdd}
    if args.model not in ("lnn", "lnn_nh"):
        raise ConfigError(f"--model {args.model} is for planar chains: use --system chain")
    system = NH[args.system]()
    data = make_dataset(system, args.trajectories, args.duration, 51, seed=args.seed)
    return for_system(system, args.model == "lnn_nh", hidden=hidden), data


def train_family(args) -> dict:
    import torch

    from ..models.lnn import train_acceleration

    torch.manual_seed(args.seed)
    model, data = build(args)
    history = train_acceleration(model, data, epochs=args.epochs, batch=args.batch, lr=args.lr, seed=args.seed,
                                 progress=print, log_every=max(1, args.epochs // 10))
    cfg = model.config() | ({"system": args.system} if args.system != "chain" else {})
    torch.save({"model_config": cfg, "model_state": model.state_dict(), "history": history,
                "command": vars(args)}, args.out)
    print(f"saved {args.model} checkpoint to {args.out}; final acceleration MSE {history['loss'][-1]:.3e}")
    return history


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    history = train_family(parser.parse_args(argv))
    print(json.dumps({"final_loss": history["loss"][-1], "seconds": history["seconds"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
