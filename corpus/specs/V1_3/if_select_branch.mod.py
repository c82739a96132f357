# IF choosing between a branch that doubles its input and one that negates it.
def branch(name, op, scalar):
    m = Model(name)
    x = Input("x", "TENSOR_FLOAT32", "{3}")
    y = Output("y", "TENSOR_FLOAT32", "{3}")
    m.Operation(op, x, [scalar, scalar, scalar], 0).To(y)
    return m

double = branch("double", "MUL", 2.0)
negate = branch("negate", "MUL", -1.0)
cond = Input("cond", "TENSOR_BOOL8", "{1}")
x = Input("x", "TENSOR_FLOAT32", "{3}")
y = Output("y", "TENSOR_FLOAT32", "{3}")
model = Model().Operation("IF", cond, double, negate, x).To(y)
Example({cond: [True], x: [1.0, -2.0, 0.5], y: [2.0, -4.0, 1.0]}, name="then")
Example({cond: [False], x: [1.0, -2.0, 0.5], y: [-1.0, 2.0, -0.5]}, name="else")
