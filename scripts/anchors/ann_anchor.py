#!/usr/bin/env python3
"""Query-latency anchors: what a user would run instead of LP-RAG's candidate stage.

Reads the vectors `lprag-eval retrieval --embedding-cache DIR` wrote (LPEMBC01 records) for
a padded MuSiQue corpus, then times, per question and on THREADS threads, a numpy flat
inner-product scan and FAISS HNSW (M 32, efConstruction 200 unless --ef-construction, each
efSearch of --ef-search: 64 and 256 unless told), with passage Recall@2/@5 (HippoRAG
protocol: passage string = title + "\\n" + text). The graph is built on --build-threads
threads (default: THREADS); the queries always run on THREADS. With --faiss-index FILE the
built graph is written to FILE when FILE does not exist, and read from it when it does (a
rerun skips the build; the file is never overwritten).

With --lprag JSON (the file of `lprag-eval scale --json`, run just before on the same
corpus) it prints each LP-RAG row's p50 as a ratio to the anchors of this run.

Usage:
    python scripts/anchors/ann_anchor.py CACHE.bin DATASET_DIR [--threads N] [--lprag JSON]
        [--build-threads N] [--ef-construction N] [--ef-search N,N...] [--faiss-index FILE]
Needs (PyPI): numpy, faiss-cpu.
"""
import argparse
import json
import os
import struct
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("cache")
ap.add_argument("dataset")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--lprag", help="lprag-eval scale --json output to compare with")
ap.add_argument("--build-threads", type=int, help="threads for the FAISS build (default: --threads)")
ap.add_argument("--ef-construction", type=int, default=200)
ap.add_argument("--ef-search", default="64,256", help="comma-separated efSearch values")
ap.add_argument("--faiss-index", help="write the built index here, or read it if it exists")
args = ap.parse_args()
efs = [int(e) for e in args.ef_search.split(",")]
if args.faiss_index and not os.path.exists(args.faiss_index):
    where = os.path.dirname(os.path.abspath(args.faiss_index))
    if not os.path.isdir(where):  # found out before the build, not after it
        sys.exit(f"--faiss-index {args.faiss_index}: no directory {where}")
# Thread counts must be set before numpy and faiss load their BLAS / OpenMP.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
import numpy as np  # noqa: E402
import faiss  # noqa: E402

faiss.omp_set_num_threads(args.threads)
corpus = json.load(open(f"{args.dataset}/corpus.json"))
questions = json.load(open(f"{args.dataset}/questions.json"))
passages = [f"{d['title']}\n{d['text']}" for d in corpus]
want = set(passages) | {q["question"] for q in questions}
vec = {}
with open(args.cache, "rb") as f:
    head = f.read(12)
    assert head[:8] == b"LPEMBC01", "not an lprag-eval embedding cache"
    dim = struct.unpack("<I", head[8:])[0]
    while True:
        h = f.read(4)
        if len(h) < 4:
            break
        n = struct.unpack("<I", h)[0]
        t = f.read(n)
        v = f.read(4 * dim)
        if len(v) < 4 * dim:
            break
        s = t.decode("utf-8", "replace")
        if s in want:
            vec[s] = np.frombuffer(v, dtype="<f4")
missing = sum(p not in vec for p in passages)
X = np.stack([vec.get(p, np.zeros(dim, np.float32)) for p in passages]).astype(np.float32)
index_of = {p: i for i, p in enumerate(passages)}


def passage_of(p):
    return f"{p['title']}\n{p.get('paragraph_text', p.get('text', ''))}"


Q, gold = [], []
for q in questions:
    if q["question"] not in vec:
        continue
    Q.append(vec[q["question"]])
    gold.append({index_of[passage_of(p)] for p in q["paragraphs"]
                 if p.get("is_supporting") and passage_of(p) in index_of})
Q = np.stack(Q).astype(np.float32)
del vec  # X and Q hold what is needed; at 1M passages the dict is another 4 GB


def recall(ranked):
    return {k: 100 * np.mean([len(set(ranked[i][:k]) & g) / max(len(g), 1)
                              for i, g in enumerate(gold)]) for k in (2, 5)}


def timed(fn):
    ts, out = [], []
    for q in Q:
        t = time.perf_counter()
        out.append(fn(q))
        ts.append(time.perf_counter() - t)
    ts = np.array(ts) * 1000
    return out, float(np.percentile(ts, 50)), float(np.percentile(ts, 95))


def row(out, p50, p95):
    return {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
            **{f"R@{k}": round(v, 2) for k, v in recall(out).items()}}


res = {"passages": len(passages), "dim": dim, "missing_vectors": missing,
       "questions": len(Q), "threads": args.threads}
res["numpy_flat"] = row(*timed(lambda q: np.argsort(-(X @ q))[:20].tolist()))
t = time.perf_counter()
if args.faiss_index and os.path.exists(args.faiss_index):
    hnsw = faiss.read_index(args.faiss_index)
    if hnsw.ntotal != len(passages) or hnsw.d != dim:
        sys.exit(f"--faiss-index {args.faiss_index}: {hnsw.ntotal} vectors of {hnsw.d}, "
                 f"not this corpus's {len(passages)} of {dim}")
    res["faiss_hnsw_read_s"] = round(time.perf_counter() - t, 1)
else:
    faiss.omp_set_num_threads(args.build_threads or args.threads)
    hnsw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = args.ef_construction
    hnsw.add(X)
    res["faiss_hnsw_build_s"] = round(time.perf_counter() - t, 1)
    res["faiss_hnsw_build_threads"] = args.build_threads or args.threads
    res["faiss_hnsw_ef_construction"] = args.ef_construction
    faiss.omp_set_num_threads(args.threads)
    if args.faiss_index:
        faiss.write_index(hnsw, args.faiss_index)
for ef in efs:
    hnsw.hnsw.efSearch = ef
    res[f"faiss_hnsw_ef{ef}"] = row(*timed(lambda q: hnsw.search(q[None, :], 20)[1][0].tolist()))
print(json.dumps(res))

if args.lprag:
    rows = json.load(open(args.lprag))
    rows = rows.get("results", rows) if isinstance(rows, dict) else rows
    anchors = [("numpy flat", res["numpy_flat"]["p50_ms"])] + [
        (f"FAISS HNSW ef{ef}", res[f"faiss_hnsw_ef{ef}"]["p50_ms"]) for ef in efs]
    print("\n| row | R@2 | R@5 | p50 (ms) | " + " | ".join(f"÷ {a}" for a, _ in anchors) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(anchors))
    for name, a in [("numpy flat", res["numpy_flat"])] + [
            (f"FAISS HNSW ef{ef}", res[f"faiss_hnsw_ef{ef}"]) for ef in efs]:
        print(f"| {name} | {a['R@2']:.2f} | {a['R@5']:.2f} | {a['p50_ms']:.2f} | "
              + " | ".join(f"{a['p50_ms'] / v:.2f}×" for _, v in anchors) + " |")
    for r in rows:
        if r.get("passages") != len(passages):
            continue
        rr = r["result"]
        p50 = rr["query_ms_p50"]
        rec = rr["recall"]
        print(f"| {rr['retriever']} | {100 * rec['2']:.2f} | {100 * rec['5']:.2f} | {p50:.2f} | "
              + " | ".join(f"{p50 / v:.2f}×" for _, v in anchors) + " |")
