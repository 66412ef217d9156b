"""ROS-free pieces of the estimator's runtime: derivative estimation from sampled streams, servo-plan
interpolation and rollouts (numpy only)."""
