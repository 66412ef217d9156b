"""ROS-free pieces of the runtime: derivative estimation from sampled streams, servo-plan
interpolation, servo excitations and a fixed-step real-time integrator (numpy only)."""
