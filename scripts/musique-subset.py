#!/usr/bin/env python3
"""The first N questions of a MuSiQue-format dataset with only their own paragraphs as
the corpus: a small benchmark for runs that pay per passage (LLM-written queries).

    python3 scripts/musique-subset.py N SRC_DIR OUT_DIR

SRC_DIR holds questions.json (MuSiQue records with `paragraphs`) and corpus.json
(`{"title", "text"}` records); OUT_DIR gets the same two files, the corpus restricted to
the passages of the kept questions, in the source corpus order.
"""
import json
import os
import sys

if len(sys.argv) != 4:
    sys.exit(__doc__)
n, src, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
questions = json.load(open(os.path.join(src, "questions.json")))[:n]
corpus = json.load(open(os.path.join(src, "corpus.json")))
wanted = {(p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"]}
kept = [c for c in corpus if (c["title"], c["text"]) in wanted]
os.makedirs(out, exist_ok=True)
json.dump(questions, open(os.path.join(out, "questions.json"), "w"))
json.dump(kept, open(os.path.join(out, "corpus.json"), "w"))
print(f"{len(questions)} questions, {len(kept)} passages -> {out}")
