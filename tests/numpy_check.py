#!/usr/bin/python3
"""numpy_check.py - float32 matmuls in numpy with one weight matrix reused.

Run with libcdcgemm LD_PRELOADed: numpy reaches cblas_sgemm (matrix products)
and cblas_sgemv (matrix-vector products, as a model decoding one token at a
time does) from an extension module that Python loaded RTLD_LOCAL. Exits 77
when numpy is not installed.
Prints "numpy_check: max_rel_error=E result=PASS|FAIL"."""
import sys

try:
    import numpy as np
except ImportError:
    print("numpy_check: numpy is not installed (apt-get install python3-numpy)")
    sys.exit(77)

rng = np.random.default_rng(0)
w = rng.standard_normal((256, 512)).astype(np.float32)  # FC weights, out x in
worst = 0.0
for it in range(6):
    x = rng.standard_normal((512, 32)).astype(np.float32)  # a batch of 32, as columns
    ref = w.astype(np.float64) @ x.astype(np.float64)
    y = w @ x  # cblas_sgemm
    worst = max(worst, float(np.linalg.norm(y - ref) / np.linalg.norm(ref)))
    yt = x.T @ w.T  # transposed views of the same memory: the same weights
    worst = max(worst, float(np.linalg.norm(yt - ref.T) / np.linalg.norm(ref)))
    v = x[:, 0].copy()  # one token
    refv = w.astype(np.float64) @ v.astype(np.float64)
    yv = w @ v  # cblas_sgemv
    worst = max(worst, float(np.linalg.norm(yv - refv) / np.linalg.norm(refv)))
    yvt = v @ w.T  # the transposed view: cblas_sgemv with the other transpose
    worst = max(worst, float(np.linalg.norm(yvt - refv) / np.linalg.norm(refv)))
ok = worst < 1e-5
print("numpy_check: max_rel_error=%.3g result=%s" % (worst, "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
