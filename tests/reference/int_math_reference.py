"""Reference values for frost's integer and bool math and type promotion
(tests/test_int_math.cpp), made with PyTorch 2.x on the CPU:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 safetensors
    venv/bin/python tests/reference/int_math_reference.py

writes tests/data/int_math_reference.safetensors with
- `promote.tensor` [10, 10] (uint8): torch.result_type of two 1-d tensors
  of dtypes i and j, as numbers in frost's DType order (DTYPES below);
  `promote.scalar` [10, 3]: a tensor of dtype i with a Python bool, int and
  float scalar; `promote.where` [10, 10]: torch.where(mask, a_i, b_j).dtype;
- for each integer dtype d: `a.<d>`, `b.<d>` (b has no zeros, no MIN / -1) and `<op>.<d>`
  for the binary ops below, `v.<d>` (the values) for the unary ops, `shift.<d>` (shift amounts, out of
  range included) with `lshift.<d>` / `rshift.<d>`, `sum.<d>`, `prod.<d>`,
  `cumsum`-free reductions and `truediv.<d>` (float32);
- `bool.a`, `bool.b` and their bitwise ops and sum;
- for float32 and float64: `fa.<d>`, `fb.<d>` with remainder / fmod /
  floor_divide (div rounding_mode="floor") and trunc division.
"""
import pathlib

import torch
from safetensors.torch import save_file

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.uint8, torch.int8, torch.int16,
          torch.int32, torch.float16, torch.bfloat16]
NAMES = ["float32", "float64", "int64", "bool", "uint8", "int8", "int16", "int32", "float16", "bfloat16"]
INTS = {"uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64}


def sample(dt):
    if dt == torch.bool:
        return torch.tensor([True, False])
    if dt.is_floating_point:
        return torch.tensor([1.5], dtype=dt)
    return torch.tensor([3], dtype=dt)


def promotion(out):
    code = {d: i for i, d in enumerate(DTYPES)}
    t = torch.zeros(10, 10, dtype=torch.uint8)
    w = torch.zeros(10, 10, dtype=torch.uint8)
    s = torch.zeros(10, 3, dtype=torch.uint8)
    mask = torch.tensor([True])
    for i, di in enumerate(DTYPES):
        for j, dj in enumerate(DTYPES):
            t[i, j] = code[torch.result_type(sample(di), sample(dj))]
            w[i, j] = code[torch.where(mask, sample(di)[:1], sample(dj)[:1]).dtype]
        for k, v in enumerate([True, 2, 2.5]):
            s[i, k] = code[torch.result_type(sample(di), v)]
    out["promote.tensor"], out["promote.where"], out["promote.scalar"] = t, w, s


def values(dt, nonzero):
    info = torch.iinfo(dt)
    vals = [0, 1, -1, 2, -2, 3, -7, 7, 13, -13, 100, -100, 127, -128, 255, 1000, -1000, 32767, -32768,
            65535, 2**31 - 1, -(2**31), 2**40 + 3, -(2**40) - 5, 2**63 - 1, -(2**63)]
    vals = [v for v in vals if info.min <= v <= info.max]
    if nonzero:
        vals = [v for v in vals if v != 0]
    return torch.tensor(vals, dtype=dt)


def ints(out):
    for n, dt in INTS.items():
        a = values(dt, False)
        b = values(dt, True)
        # pair every a with every b: the grids cover signs, wraparound and MIN / -1
        A = a.repeat_interleave(len(b))
        B = b.repeat(len(a))
        # MIN / -1 overflows; PyTorch's CPU dies of SIGFPE on it for int32 and
        # int64 (frost wraps: tests/test_int_math.cpp checks that separately)
        keep = ~((A == torch.iinfo(dt).min) & (B == -1))
        A, B = A[keep], B[keep]
        out[f"a.{n}"], out[f"b.{n}"] = A, B
        out[f"add.{n}"] = A + B
        out[f"sub.{n}"] = A - B
        out[f"mul.{n}"] = A * B
        out[f"floordiv.{n}"] = torch.div(A, B, rounding_mode="floor")
        out[f"truncdiv.{n}"] = torch.div(A, B, rounding_mode="trunc")
        out[f"remainder.{n}"] = torch.remainder(A, B)
        out[f"fmod.{n}"] = torch.fmod(A, B)
        out[f"truediv.{n}"] = A / B
        out[f"and.{n}"] = A & B
        out[f"or.{n}"] = A | B
        out[f"xor.{n}"] = A ^ B
        out[f"maximum.{n}"] = torch.maximum(A, B)
        out[f"minimum.{n}"] = torch.minimum(A, B)
        out[f"v.{n}"] = a
        out[f"not.{n}"] = ~a
        out[f"neg.{n}"] = -a
        out[f"abs.{n}"] = torch.abs(a)
        out[f"sign.{n}"] = torch.sign(a)
        out[f"clamp.{n}"] = torch.clamp(a, -100 if dt != torch.uint8 else 2, 100)
        bits = torch.iinfo(dt).bits
        sh = [0, 1, 2, 3, bits - 1, bits, bits + 1] + ([-1] if dt != torch.uint8 else [])
        S = torch.tensor(sh, dtype=dt).repeat(len(a))
        X = a.repeat_interleave(len(sh))
        out[f"shx.{n}"], out[f"shift.{n}"] = X, S
        out[f"lshift.{n}"] = X << S
        out[f"rshift.{n}"] = X >> S
        e = torch.tensor([0, 1, 2, 3, 5, 7, 13], dtype=dt).repeat(len(a))
        P = a.repeat_interleave(7)
        out[f"powx.{n}"], out[f"powe.{n}"], out[f"pow.{n}"] = P, e, torch.pow(P, e)
        out[f"sum.{n}"] = a.sum()
        out[f"prod.{n}"] = a[:6].prod()
        out[f"max.{n}"], out[f"min.{n}"] = a.max(), a.min()
        out[f"argmax.{n}"], out[f"argmin.{n}"] = a.argmax(), a.argmin()
        out[f"mulscalar.{n}"] = a * 3
        out[f"mulfloat.{n}"] = a * 2.5  # float32


def bools(out):
    a = torch.tensor([False, False, True, True])
    b = torch.tensor([False, True, False, True])
    out["bool.a"], out["bool.b"] = a, b
    out["bool.and"], out["bool.or"], out["bool.xor"], out["bool.not"] = a & b, a | b, a ^ b, ~a
    out["bool.sum"] = a.sum()
    out["bool.prod"] = a.prod()
    out["bool.addint"] = a + 2  # int64


def floats(out):
    for n, dt in {"float32": torch.float32, "float64": torch.float64}.items():
        v = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 0.3, 1e10, -3.75, float("inf"), float("nan")],
                         dtype=dt)
        w = torch.tensor([1.0, -1.0, 2.0, -2.0, 0.7, -0.7, 3.0, float("inf"), 0.0], dtype=dt)
        A = v.repeat_interleave(len(w))
        B = w.repeat(len(v))
        out[f"fa.{n}"], out[f"fb.{n}"] = A, B
        out[f"fremainder.{n}"] = torch.remainder(A, B)
        out[f"ffmod.{n}"] = torch.fmod(A, B)
        out[f"ffloordiv.{n}"] = torch.div(A, B, rounding_mode="floor")
        out[f"ftruncdiv.{n}"] = torch.div(A, B, rounding_mode="trunc")


def main():
    out = {}
    promotion(out)
    ints(out)
    bools(out)
    floats(out)
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "int_math_reference.safetensors"
    save_file({k: v.contiguous() for k, v in out.items()}, str(path))
    print(f"wrote {len(out)} tensors to {path} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
