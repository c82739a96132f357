# ADD with every fused activation (AddAllActivations clamps the expected output).
model = Model()
a = Input("a", "TENSOR_FLOAT32", "{5}")
b = Input("b", "TENSOR_FLOAT32", "{5}")
act = Int32Scalar("act", 0)
out = Output("out", "TENSOR_FLOAT32", "{5}")
model.Operation("ADD", a, b, act).To(out)
Example({
    a: [-3.0, -0.75, 0.25, 2.0, 9.0],
    b: [0.5, 0.0, 0.5, 2.0, -1.0],
    out: [-2.5, -0.75, 0.75, 4.0, 8.0],
}).AddAllActivations(out, act)
