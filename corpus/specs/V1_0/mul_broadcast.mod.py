# Elementwise MUL with rank-2 x rank-1 broadcasting, float32 and quant8.
model = Model()
a = Input("a", "TENSOR_FLOAT32", "{2, 3}")
b = Input("b", "TENSOR_FLOAT32", "{3}")
act = Int32Scalar("act", 0)
out = Output("out", "TENSOR_FLOAT32", "{2, 3}")
model.Operation("MUL", a, b, act).To(out)

quant8 = DataTypeConverter().Identify({
    a: ("TENSOR_QUANT8_ASYMM", 0.5, 120),
    b: ("TENSOR_QUANT8_ASYMM", 0.25, 100),
    out: ("TENSOR_QUANT8_ASYMM", 1.0, 64),
})

Example({
    a: [1.0, -2.0, 3.5, 0.0, 10.0, -4.5],
    b: [2.0, 0.5, -1.0],
    out: [2.0, -1.0, -3.5, 0.0, 5.0, 4.5],
}).AddVariations(quant8)
