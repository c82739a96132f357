# DEPTHWISE_CONV_2D with depth multiplier 2, explicit padding, in NHWC and NCHW, relaxed
# and float16.
model = Model()
x = Input("x", "TENSOR_FLOAT32", "{1, 2, 2, 1}")
w = Parameter("w", "TENSOR_FLOAT32", "{1, 2, 2, 2}", [1.0, -1.0, 2.0, 0.0, 0.0, 1.0, -1.0, 0.5])
b = Parameter("b", "TENSOR_FLOAT32", "{2}", [0.0, 1.0])
layout = BoolScalar("layout", False)
y = Output("y", "TENSOR_FLOAT32", "{1, 1, 1, 2}")
model.Operation("DEPTHWISE_CONV_2D", x, w, b, 0, 0, 0, 0, 1, 1, 2, 0, layout).To(y)

# y[c] = sum over the 2x2 window of x * w[..., c] + b[c]
#   c=0: 1*1 + 2*2 + 3*0 + 4*(-1) = 1;  c=1: 1*(-1) + 2*0 + 3*1 + 4*0.5 + 1 = 5
Example({x: [1.0, 2.0, 3.0, 4.0], y: [1.0, 5.0]}).AddNchw(x, y, layout).AddVariations("relaxed", "float16")
