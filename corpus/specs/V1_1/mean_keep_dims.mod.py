# MEAN over axis 1 with and without keep_dims.
model = Model()
x = Input("x", "TENSOR_FLOAT32", "{2, 3}")
axes = Parameter("axes", "TENSOR_INT32", "{1}", [1])
out = Output("out", "TENSOR_FLOAT32", "{2, 1}")
model.Operation("MEAN", x, axes, 1).To(out)
Example({x: [1.0, 2.0, 6.0, -3.0, 0.0, 0.0], out: [3.0, -1.0]})

model2 = Model("flat")
x2 = Input("x", "TENSOR_FLOAT32", "{2, 3}")
out2 = Output("out", "TENSOR_FLOAT32", "{2}")
model2.Operation("MEAN", x2, [1], 0).To(out2)
Example({x2: [1.0, 2.0, 6.0, -3.0, 0.0, 0.0], out2: [3.0, -1.0]}, model=model2)
