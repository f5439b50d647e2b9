#!/usr/bin/env python3
"""How far int8 would take all-MiniLM-L6-v2 from f32: the cosine of each vector to its
f32 twin and MuSiQue-style flat-cosine recall, with nn.Linear fake-quantised on PyTorch.

The probe behind the int8 rows of docs/benchmarks.md ("lprag's CPU kernels"): weights
are rounded to int8 per output column (symmetric), activations to uint8 per row
(asymmetric, zero point), as a VNNI kernel would compute them; the products are then
exact, so this measures the rounding alone. PyPI: torch, sentence-transformers, numpy.

    python3 scripts/anchors/quantization_probe.py MODEL_DIR ../shared/data/musique-100 \\
        [--mode rows|weights|activations|g64] [--keep REGEX ...] [--threads 2]
"""
import argparse
import json
import re

import numpy as np
import torch
import torch.nn as nn
from sentence_transformers import SentenceTransformer


def quantize_weight(w):
    scale = w.abs().amax(dim=1, keepdim=True) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(w / scale).clamp(-127, 127) * scale


def quantize_rows(x, group=None):
    shape = x.shape
    if group:
        x = x.reshape(*shape[:-1], shape[-1] // group, group)
    lo = x.amin(dim=-1, keepdim=True).clamp(max=0)
    hi = x.amax(dim=-1, keepdim=True).clamp(min=0)
    scale = (hi - lo) / 255.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.round(-lo / scale)
    q = (torch.round(x / scale) + zero).clamp(0, 255)
    return ((q - zero) * scale).reshape(shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("data_dir", help="a folder with corpus.json and questions.json")
    ap.add_argument("--mode", default="rows", help="rows, weights, activations or gN")
    ap.add_argument("--keep", action="append", default=[],
                    help="leave the linear layers whose name matches this regex in f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    corpus = json.load(open(f"{args.data_dir}/corpus.json"))
    questions = json.load(open(f"{args.data_dir}/questions.json"))
    passages = [p["title"] + "\n" + p["text"] for p in corpus]
    asked = [q["question"] for q in questions]
    where = {(p["title"], p["text"]): i for i, p in enumerate(corpus)}
    gold = [[where[(p["title"], p["paragraph_text"])] for p in q["paragraphs"]
             if p.get("is_supporting")] for q in questions]

    model = SentenceTransformer(args.model_dir, device="cpu")

    def embed():
        with torch.no_grad():
            enc = lambda t: model.encode(t, batch_size=args.batch, convert_to_numpy=True,
                                         normalize_embeddings=True)
            return enc(passages), enc(asked)

    def recall(p, q):
        scores = q @ p.T
        hits = [0.0, 0.0]
        for qi, g in enumerate(gold):
            order = np.argsort(-scores[qi], kind="stable")
            for slot, k in enumerate((2, 5)):
                hits[slot] += len(set(order[:k].tolist()) & set(g)) / len(g)
        return [100 * h / len(gold) for h in hits]

    p32, q32 = embed()
    print("f32: R@2 %.2f, R@5 %.2f" % tuple(recall(p32, q32)))

    plain = nn.Linear.forward
    names = {id(m): n for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    group = int(args.mode[1:]) if re.fullmatch(r"g\d+", args.mode) else None

    def fake_int8(self, x):
        name = names.get(id(self), "")
        if any(re.search(k, name) for k in args.keep):
            return plain(self, x)
        w = self.weight if args.mode == "activations" else quantize_weight(self.weight)
        if args.mode != "weights":
            x = quantize_rows(x, group)
        return nn.functional.linear(x, w, self.bias)

    nn.Linear.forward = fake_int8
    p8, q8 = embed()
    nn.Linear.forward = plain
    cos = np.concatenate([(p32 * p8).sum(1), (q32 * q8).sum(1)])
    r2, r5 = recall(p8, q8)
    print(f"int8 ({args.mode}, f32 kept: {args.keep or 'none'}): cosine to f32 lowest "
          f"{cos.min():.5f}, mean {cos.mean():.5f}; R@2 {r2:.2f}, R@5 {r5:.2f}")


if __name__ == "__main__":
    main()
