"""llm_torch_check.py - cdcgemm-llm's tokens against PyTorch (llm_check.sh).

usage: python3 llm_torch_check.py CHECKPOINT RUN.json

The tool checks its logits against its own reference, the same decoder with
the products computed in double: a mistake in the decoder itself (attention,
rotary embeddings, the checkpoint's layout) would pass that check. This one
is independent: the llama2.c checkpoint read here and run by PyTorch, in
float64, written from llama2.c's model.py, teacher-forced on the run's
prompt and generated tokens (the JSON's prompt_ids and token_ids); the run's
greedy token at every step must be PyTorch's argmax, unless PyTorch's top
two are within 1e-4 of the largest logit (a near-tie, counted). Exit 0:
every step agrees; 1: a step differs (named); 2: bad input; 77: PyTorch is
not installed (python3-torch; .ci/run installs it).
"""
import json
import struct
import sys

try:
    import torch
except ImportError:
    print("PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(77)

NEAR_TIE = 1e-4


def read_checkpoint(path):
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack("<7i", data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    floats = torch.frombuffer(bytearray(data[28:]), dtype=torch.float32).double()
    head = dim // heads
    kv_dim = kv_heads * head
    shapes = [("embedding", (vocab, dim)), ("rms_att", (layers, dim)),
              ("wq", (layers, dim, dim)), ("wk", (layers, kv_dim, dim)),
              ("wv", (layers, kv_dim, dim)), ("wo", (layers, dim, dim)),
              ("rms_ffn", (layers, dim)), ("w1", (layers, hidden, dim)),
              ("w2", (layers, dim, hidden)), ("w3", (layers, hidden, dim)),
              ("rms_final", (dim,)), ("rope", (seq * head,))]
    if not shared:
        shapes.append(("classifier", (vocab, dim)))
    w, at = {}, 0
    for name, shape in shapes:
        count = 1
        for s in shape:
            count *= s
        if at + count > floats.numel():
            sys.exit("%s: %s past the file's end" % (path, name))
        w[name] = floats[at:at + count].reshape(shape)
        at += count
    if shared:
        w["classifier"] = w["embedding"]
    config = dict(dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, head=head, seq=seq)
    return config, w


def rmsnorm(x, weight):
    return weight * x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)


def rotary(x, positions, head):
    """x: (T, heads, head); llama2.c's rotation of pairs (2i, 2i + 1)."""
    i = torch.arange(0, head, 2, dtype=torch.float64)
    freq = 1.0 / (10000.0 ** (i / head))
    angle = positions[:, None].double() * freq[None, :]
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def logits_of(config, w, tokens):
    """Every position's logits for the token sequence, causal attention."""
    c = config
    T = len(tokens)
    x = w["embedding"][torch.tensor(tokens)]
    positions = torch.arange(T)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(c["layers"]):
        h = rmsnorm(x, w["rms_att"][l])
        q = (h @ w["wq"][l].T).view(T, c["heads"], c["head"])
        k = (h @ w["wk"][l].T).view(T, c["kv_heads"], c["head"])
        v = (h @ w["wv"][l].T).view(T, c["kv_heads"], c["head"])
        q, k = rotary(q, positions, c["head"]), rotary(k, positions, c["head"])
        repeat = c["heads"] // c["kv_heads"]
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / (c["head"] ** 0.5) + mask
        attended = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v)
        x = x + attended.reshape(T, c["dim"]) @ w["wo"][l].T
        h = rmsnorm(x, w["rms_ffn"][l])
        gate, up = h @ w["w1"][l].T, h @ w["w3"][l].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w["w2"][l].T
    return rmsnorm(x, w["rms_final"]) @ w["classifier"].T


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    config, w = read_checkpoint(sys.argv[1])
    run = json.load(open(sys.argv[2]))
    run = run[0] if isinstance(run, list) else run
    prompt, generated = run["prompt_ids"], run["token_ids"]
    if not prompt or not generated:
        print("no prompt or no tokens in %s" % sys.argv[2], file=sys.stderr)
        return 2
    sequence = prompt + generated
    logits = logits_of(config, w, sequence[:-1])
    near_ties = 0
    for step, token in enumerate(generated):
        row = logits[len(prompt) - 1 + step]
        top2 = torch.topk(row, 2)
        best = int(top2.indices[0])
        margin = float(top2.values[0] - top2.values[1])
        if margin < NEAR_TIE * float(row.abs().max()):
            near_ties += 1
            continue
        if best != token:
            print("step %d: the run took token %d, PyTorch's argmax is %d (margin %.3g)"
                  % (step, token, best, margin))
            return 1
    print("%d tokens as PyTorch's greedy choice (%d near-ties), %d-token prompt"
          % (len(generated), near_ties, len(prompt)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
