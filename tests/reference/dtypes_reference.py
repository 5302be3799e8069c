"""Reference values for frost's dtypes (tests/test_dtypes.cpp), made with
PyTorch 2.x and written by safetensors' own writer:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 safetensors
    venv/bin/python tests/reference/dtypes_reference.py

writes tests/data/dtypes_reference.safetensors with, for every dtype s,
`src.<s>` (values chosen to hit rounding, truncation and wraparound) and,
for every dtype d, `cast.<s>.<d>` = src.<s>.to(d) on PyTorch's CPU; for the
floating s, `special.<s>` (inf, -inf, NaN) and its casts to the floating
dtypes and bool.
"""
import pathlib

import torch
from safetensors.torch import save_file

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool,
    "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "float16": torch.float16, "bfloat16": torch.bfloat16,
}

# Floating sources: ties and near-ties for float16/bfloat16 rounding,
# truncation toward zero, wraparound into the narrow integers (within int32),
# float16's overflow, subnormals, signed zeros. Out-of-range values for the
# integers (NaN, inf, beyond int32) are left out: C++ leaves those undefined
# and PyTorch's CPU results there depend on the compiler (frost's choice is
# documented in fn::cast and tested in test_dtypes.cpp).
FLOATS = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -1.7, 1.7, 100.3, -100.3, 127.9, 128.0, -129.0, 255.9, 256.0, 300.0,
          -1.0, -200.0, 40000.5, 65504.0, 65519.0, 65520.0, 70000.0, -70000.0, 1.0009765625, 1.00048828125,
          1.0014648437, 1.00390625, 1.005859375, 3.0e-5, 6.0e-8, 3.0e-8, 1.0e-40, 123456789.0, -2147483520.0,
          0.333333333333]
FLOAT_SPECIALS = [float("inf"), float("-inf"), float("nan")]  # cast only to floating types and bool
INTS = [0, 1, -1, 2, 127, 128, 255, 256, -128, -129, 300, 32767, 32768, -32769, 65535, 70000, 2147483647,
        -2147483648, 2147483648, 16777217, 9007199254740993, -9007199254740993, 2**62 + 1, -(2**63), 2**63 - 1]


def source(name, dt):
    if dt == torch.bool:
        return torch.tensor([False, True, True, False])
    if dt == torch.float16:  # those that overflow to inf go with the specials
        return torch.tensor([v for v in FLOATS if abs(v) < 65520], dtype=torch.float64).to(dt)
    if dt.is_floating_point:
        return torch.tensor(FLOATS, dtype=torch.float64).to(dt)
    info = torch.iinfo(dt)
    return torch.tensor([v for v in INTS if info.min <= v <= info.max], dtype=dt)


def main():
    out = {}
    for s, sd in DTYPES.items():
        x = source(s, sd)
        out[f"src.{s}"] = x
        for d, dd in DTYPES.items():
            out[f"cast.{s}.{d}"] = x.to(dd)
        if sd.is_floating_point:
            sp = torch.tensor(FLOAT_SPECIALS, dtype=torch.float64).to(sd)
            out[f"special.{s}"] = sp
            for d, dd in DTYPES.items():
                if dd.is_floating_point or dd == torch.bool:
                    out[f"special.{s}.{d}"] = sp.to(dd)
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "dtypes_reference.safetensors"
    save_file({k: v.contiguous().clone() for k, v in out.items()}, str(path), metadata={"torch": torch.__version__})
    print(f"wrote {len(out)} tensors to {path}")


if __name__ == "__main__":
    main()
