#!/usr/bin/env python3
"""all-MiniLM-L6-v2 on PyTorch (sentence-transformers): the anchor of lprag's encoder rows.

Embeds every passage of a corpus.json ("title\\ntext", at most 256 tokens) the way
`cargo bench -p lprag-model --bench encoder` does with lprag's burn encoder: batches of 32,
mean pooling, L2 norm (sentence-transformers sorts by length, as lprag does), on N threads.
Prints passages/s (median of --repeats runs after a warm-up run); --device cuda runs it on
the GPU in fp32 (TF32 off, PyTorch's default), to set beside `LPRAG_BENCH_DEVICE=wgpu:0`; with --compare FILE (a
JSON list of lprag's vectors, `LPRAG_BENCH_VECTORS=FILE cargo bench ...`) also the lowest
cosine between the two encoders' vector for each passage.

    pip install torch sentence-transformers        # PyPI only
    python3 scripts/anchors/encoder_anchor.py MODEL_DIR ../shared/data/musique-100/corpus.json --threads 2

MODEL_DIR is a local copy of sentence-transformers/all-MiniLM-L6-v2 (the Hugging Face
cache's snapshot directory, or `scripts/fetch-model.sh`'s); nothing is downloaded.
"""

import argparse
import json
import os
import statistics
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("corpus")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--limit", type=int, default=0, help="only the first N passages")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", help="lprag's vectors (JSON list of lists), same order")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU")
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    corpus = json.load(open(args.corpus))
    texts = [f"{d['title']}\n{d['text']}" for d in corpus]
    if args.limit:
        texts = texts[: args.limit]
    model = SentenceTransformer(args.model_dir, device=args.device)
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    model.max_seq_length = 256

    def run():
        t = time.perf_counter()
        vectors = model.encode(
            texts, batch_size=args.batch, normalize_embeddings=True, convert_to_numpy=True
        )
        return time.perf_counter() - t, vectors

    run()  # warm-up
    times = []
    for _ in range(args.repeats):
        seconds, vectors = run()
        times.append(seconds)
        print(f"{len(texts)} passages in {seconds:.2f} s: {len(texts) / seconds:.1f} passages/s",
              flush=True)
    median = statistics.median(times)
    print(
        f"sentence-transformers on torch {torch.__version__}, {args.device}, {'/'.join(dtypes)}, "
        f"{args.threads} threads, batch {args.batch}: {len(texts) / median:.1f} passages/s "
        f"(median of {len(times)})"
    )
    if args.device.startswith("cuda"):
        print(f"GPU: {torch.cuda.get_device_name()}, TF32 matmul "
              f"{'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}")
    if args.compare:
        import numpy as np

        theirs = np.asarray(json.load(open(args.compare)), dtype=np.float32)
        theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
        cos = (theirs * vectors).sum(axis=1)
        print(f"cosine to lprag's vectors: min {cos.min():.6f}, mean {cos.mean():.6f}")


if __name__ == "__main__":
    main()
