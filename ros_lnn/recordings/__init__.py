"""Realistic robot recordings of simulated plants (rosbag2 with joint states only, noise, quantisation,
jitter, a gap) with their exact truth, recording sets for train/test, and structural least-squares
baselines."""
