"""torch models: analytic-derivative MLP, ServoLNN/DeLaN, losses, ONNX export."""
