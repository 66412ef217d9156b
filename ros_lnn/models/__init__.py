"""torch nn.Modules: analytic-derivative MLP, ServoLNN/DeLaN, LNN/LNN-nh, TLNN, neural ODE, losses,
input normalisation, ONNX export. Which family a model is, and how it trains, is ros_lnn.families'."""
