# WHILE: add 1.5 to x until the counter reaches 5 (five iterations).
cond_model = Model("cond")
c_x = Input("c_x", "TENSOR_FLOAT32", "{1}")
c_i = Input("c_i", "TENSOR_INT32", "{1}")
c_out = Output("c_out", "TENSOR_BOOL8", "{1}")
cond_model.IdentifyInputs(c_x, c_i)  # first, so the unused c_x is input 0
cond_model.Operation("LESS", c_i, [5]).To(c_out)

body = Model("body")
b_x = Input("b_x", "TENSOR_FLOAT32", "{1}")
b_i = Input("b_i", "TENSOR_INT32", "{1}")
b_x2 = Output("b_x2", "TENSOR_FLOAT32", "{1}")
b_i2 = Output("b_i2", "TENSOR_INT32", "{1}")
body.Operation("ADD", b_x, [1.5], 0).To(b_x2)
body.Operation("ADD", b_i, [1], 0).To(b_i2)

x = Input("x", "TENSOR_FLOAT32", "{1}")
i = Input("i", "TENSOR_INT32", "{1}")
x_out = Output("x_out", "TENSOR_FLOAT32", "{1}")
i_out = Output("i_out", "TENSOR_INT32", "{1}")
model = Model().Operation("WHILE", cond_model, body, x, i).To(x_out, i_out)
Example({x: [0.25], i: [0], x_out: [7.75], i_out: [5]}).DisableLifeTimeVariation()
Example({x: [0.25], i: [7], x_out: [0.25], i_out: [7]}, name="zero_iterations").DisableLifeTimeVariation()
