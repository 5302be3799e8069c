# Writes tests/data/reference.safetensors, the file tests/test_safetensors.cpp
# reads: the bytes are torch tensors' own (little-endian) storage, laid out
# the way huggingface/safetensors' serializer does (tensors sorted by dtype,
# largest first, then by name; compact JSON header with __metadata__ first,
# padded with spaces to a multiple of 8), written by hand so the python
# safetensors package is not needed.
# Run with Debian's python3-torch: /usr/bin/python3 tests/data/make_reference_safetensors.py
import json, os, struct
import torch

tensors = {
    "weight": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1,
    "bias": torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64),
    "steps": torch.tensor([[1, -2], [3, 1 << 40]], dtype=torch.int64),
    "half": torch.tensor([1.0, -2.5, 65504.0, 2.0 ** -24, 1.0 / 3.0], dtype=torch.float16),
    "brain": torch.tensor([1.0, -3.14159, 1e-3], dtype=torch.bfloat16),
    "count": torch.tensor([7, -8, 2147483647], dtype=torch.int32),
    "scalar": torch.tensor(42.0, dtype=torch.float32),
    "empty": torch.zeros(0, 3, dtype=torch.float32),
}
metadata = {"format": "pt", "source": "frost test"}
# safetensors' Dtype enum order (its serializer sorts by it, descending).
order = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]
names = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int32: "I32"}

def raw(t):
    t = t.contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""

items = sorted(tensors.items(), key=lambda kv: (-order.index(names[kv[1].dtype]), kv[0]))
header = {"__metadata__": metadata}
data = b""
for name, t in items:
    b = raw(t.reshape(-1) if t.dim() == 0 else t)
    header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.safetensors")
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
for name, t in items:
    print(name, names[t.dtype], list(t.shape), t.to(torch.float64).reshape(-1).tolist() if t.is_floating_point() else t.reshape(-1).tolist())
print(len(h), len(data))
