#!/usr/bin/python3
"""torch_check.py - an unmodified PyTorch program decoding with batch-1 products.

A toy decoder in float32: a prompt of 8 tokens through one batched product
(F.linear on a matrix: BLAS sgemm), then 40 tokens one at a time (F.linear on
a vector: sgemv, as a language model decodes), every product against the same
two weight matrices. Run with libcdcgemm LD_PRELOADed and CDCGEMM_MIN_FLOPS=0
(docs/drop-in.md): PyTorch's CPU BLAS calls (libtorch links libblas.so.3)
reach cdcgemm's sgemm_ / sgemv_, which send the repeating weights to the
workers. Each step's output is compared with the same product in float64.
Exits 77 when PyTorch is not installed.
Prints "torch_check: steps=N max_rel_error=E result=PASS|FAIL"."""
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_check: PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(77)

torch.set_num_threads(1)  # one BLAS caller at a time, as a decoder on a small device
gen = torch.Generator().manual_seed(0)
dim, hidden = 256, 512
w_up = torch.randn(hidden, dim, generator=gen) / dim ** 0.5  # out x in, nn.Linear's layout
w_down = torch.randn(dim, hidden, generator=gen) / hidden ** 0.5


def step(x):
    """One block: up, a nonlinearity, down (x: tokens x dim or dim)."""
    return F.linear(torch.tanh(F.linear(x, w_up)), w_down)


def reference(x):
    x64 = x.double()
    return (torch.tanh(x64 @ w_up.double().T) @ w_down.double().T).float()


worst, steps = 0.0, 0
prompt = torch.randn(8, dim, generator=gen)
out = step(prompt)  # the prompt: one batched product per matrix
ref = reference(prompt)
worst = max(worst, float((out - ref).norm() / ref.norm()))
x = out[-1]
for _ in range(40):  # the tokens: batch-1 products
    y = step(x)
    ref = reference(x)
    worst = max(worst, float((y - ref).norm() / ref.norm()))
    x = y / y.norm() * dim ** 0.5  # the next token's input, kept at scale
    steps += 1
ok = worst < 1e-4
print("torch_check: steps=%d max_rel_error=%.3g result=%s" %
      (steps, worst, "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
