"""ONNX Runtime inference on numpy (never imports torch)."""
