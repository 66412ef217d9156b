"""Subcommands of ``ros-lnn`` (see ros_lnn/cli.py)."""
