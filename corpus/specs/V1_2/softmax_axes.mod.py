# SOFTMAX along every axis of a rank-3 tensor (AddAllAxis moves the softmax axis).
model = Model()
x = Input("x", "TENSOR_FLOAT32", "{2, 1, 2}")
axis = Int32Scalar("axis", -1)
y = Output("y", "TENSOR_FLOAT32", "{2, 1, 2}")
model.Operation("SOFTMAX", x, 1.0, axis).To(y)

# Along the last axis: pairs (0, ln 3) -> (1/4, 3/4) and (0, 0) -> (1/2, 1/2).
Example({x: [0.0, 1.0986122886681098, 5.0, 5.0], y: [0.25, 0.75, 0.5, 0.5]}).AddAllAxis(x, y, axis)
