"""PyTorch-exported models for tests/test_pytorch_models.cpp.

For each model, tests/data/<name>.safetensors holds its state_dict exactly as
PyTorch names and lays it out (what safetensors.torch.save_file writes), and
tests/data/<name>_io.safetensors holds an input and PyTorch's output for it.
Written by hand in the safetensors layout so the python safetensors package
is not needed. Run with Debian's python3-torch:

    /usr/bin/python3 tests/reference/export_models.py
"""
import json
import os
import struct

import torch
import torch.nn as nn

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
NAMES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def save(tensors, name):
    header, blob = {"__metadata__": {"format": "pt"}}, b""
    for key in sorted(tensors):
        t = tensors[key].detach().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[key] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                       "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(DATA, name + ".safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


torch.manual_seed(0)

# A small CNN with batch norm whose running statistics are not the defaults.
cnn = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, stride=2), nn.BatchNorm2d(16), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5))
for _ in range(3):
    cnn(torch.randn(4, 3, 12, 12) * 2 + 0.5)
cnn.eval()
x = torch.randn(2, 3, 12, 12)
with torch.no_grad():
    save(cnn.state_dict(), "cnn")
    save({"input": x, "output": cnn(x)}, "cnn_io")

# A two-layer batch-first LSTM: output and final states.
lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True)
x = torch.randn(2, 5, 4)
with torch.no_grad():
    out, (h, c) = lstm(x)
    save(lstm.state_dict(), "lstm")
    save({"input": x, "output": out, "h_n": h, "c_n": c}, "lstm_io")

# MultiheadAttention with a key padding mask; non-zero biases.
mha = nn.MultiheadAttention(8, 2, batch_first=True)
with torch.no_grad():
    mha.in_proj_bias.uniform_(-0.5, 0.5)
    mha.out_proj.bias.uniform_(-0.5, 0.5)
mha.eval()
q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8)
mask = torch.tensor([[False, False, False, True], [False, False, True, True]])
with torch.no_grad():
    out, w = mha(q, k, v, key_padding_mask=mask)
    save(mha.state_dict(), "mha")
    save({"query": q, "key": k, "value": v, "key_padding_mask": mask.to(torch.float32),
          "output": out, "weights": w}, "mha_io")
# MultiheadAttention with kdim/vdim (separate projection weights), bias_k /
# bias_v, a zero attention slot, and both masks.
mha = nn.MultiheadAttention(8, 2, batch_first=True, kdim=5, vdim=6, add_bias_kv=True, add_zero_attn=True)
with torch.no_grad():
    mha.in_proj_bias.uniform_(-0.5, 0.5)
    mha.out_proj.bias.uniform_(-0.5, 0.5)
mha.eval()
q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 5), torch.randn(2, 4, 6)
mask = torch.tensor([[False, False, False, True], [False, True, False, False]])
attn = torch.randn(3, 4) * 0.5
with torch.no_grad():
    out, w = mha(q, k, v, key_padding_mask=mask, attn_mask=attn)
    save(mha.state_dict(), "mha_kv")
    save({"query": q, "key": k, "value": v, "key_padding_mask": mask.to(torch.float32), "attn_mask": attn,
          "output": out, "weights": w}, "mha_kv_io")
print("wrote", sorted(f for f in os.listdir(DATA) if f.endswith(".safetensors")))
