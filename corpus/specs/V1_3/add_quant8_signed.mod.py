# ADD in signed and unsigned quant8 (the results agree up to the 128 offset).
model = Model()
a = Input("a", "TENSOR_FLOAT32", "{4}")
b = Input("b", "TENSOR_FLOAT32", "{4}")
out = Output("out", "TENSOR_FLOAT32", "{4}")
model.Operation("ADD", a, b, 0).To(out)

def quant(kind, zero_point):
    return DataTypeConverter(name=kind).Identify({
        a: ("TENSOR_" + kind.upper() if kind != "quant8" else "TENSOR_QUANT8_ASYMM", 0.5, zero_point),
        b: ("TENSOR_" + kind.upper() if kind != "quant8" else "TENSOR_QUANT8_ASYMM", 0.5, zero_point),
        out: ("TENSOR_" + kind.upper() if kind != "quant8" else "TENSOR_QUANT8_ASYMM", 1.0, zero_point),
    })

Example({a: [1.0, 2.5, -3.0, 0.5], b: [1.0, 0.5, -1.0, 4.0], out: [2.0, 3.0, -4.0, 4.5]}).AddVariations(
    quant("quant8", 128), quant("quant8_asymm_signed", 0))
