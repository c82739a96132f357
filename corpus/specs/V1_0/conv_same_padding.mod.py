# A 3x3 convolution with implicit SAME padding and stride 2 over a 1x4x4x1 input.
model = Model()
image = Input("image", "TENSOR_FLOAT32", "{1, 4, 4, 1}")
kernel = Parameter("kernel", "TENSOR_FLOAT32", "{1, 3, 3, 1}", [0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0])
bias = Parameter("bias", "TENSOR_FLOAT32", "{1}", [0.5])
out = Output("out", "TENSOR_FLOAT32", "{1, 2, 2, 1}")
model.Operation("CONV_2D", image, kernel, bias, 1, 2, 2, 0).To(out)

# SAME padding with stride 2 on 4 pixels pads 0 before and 1 after, so the windows are
# centred on pixels (1,1), (1,3), (3,1), (3,3); each output is the Laplacian there (zeros
# beyond the edge) plus the bias, e.g. (1,1): 2 + 5 + 7 + 10 - 4*6 + 0.5 = 0.5.
Example({
    image: [1.0, 2.0, 3.0, 4.0,
            5.0, 6.0, 7.0, 8.0,
            9.0, 10.0, 11.0, 12.0,
            13.0, 14.0, 15.0, 16.0],
    out: [0.5, -8.5, -17.5, -36.5],
})
