#!/usr/bin/env python3
"""Write a BERT sentence encoder's weights as an ONNX model, without PyTorch.

Reads a Hugging Face model directory (``config.json`` and ``model.safetensors`` of a
``BertModel``, e.g. all-MiniLM-L6-v2 as unpacked by ``scripts/fetch-model.sh``) and writes
``model.onnx`` next to the tokenizer files there (or to ``--out``): inputs ``input_ids``,
``attention_mask``, ``token_type_ids`` (int64, ``[batch, sequence]``), output
``last_hidden_state`` (float32, ``[batch, sequence, hidden]``) — the layout fastembed's
user-defined models and ``lprag_adapters::fastembed::FastembedEncoder`` expect (mean
pooling and L2 normalisation happen there).

With ``--check`` the model is run once with onnxruntime on the reference texts of
``minilm_reference_vectors.json`` (when given) and the largest difference to their
sentence-transformers embeddings is printed; the script fails above 1e-4.

Usage:
    python3 scripts/export-onnx.py MODEL_DIR [--out FILE] [--check REFERENCE_JSON]
Needs: ``pip install onnx`` (and ``onnxruntime`` for ``--check``); numpy comes with onnx.
"""

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path):
    """Every tensor of a .safetensors file as a numpy array (float32 for floats)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    body = raw[8 + n :]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=DTYPES[meta["dtype"]]).reshape(meta["shape"])
        out[name.removeprefix("bert.")] = arr.astype(np.float32) if arr.dtype != np.int64 else arr
    return out


class Graph:
    """A tiny ONNX graph builder: unique names, initializers, nodes."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, array, hint="c"):
        nm = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), nm))
        return nm

    def op(self, op_type, inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x, w, b):
        # torch Linear stores [out, in]; x @ W^T + b.
        return self.op("Add", [self.op("MatMul", [x, self.const(w.T.copy(), "w")]), self.const(b, "b")])

    def layer_norm(self, x, g, b, eps):
        return self.op(
            "LayerNormalization", [x, self.const(g, "ln_g"), self.const(b, "ln_b")], axis=-1, epsilon=eps
        )


def build(model_dir):
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    w = read_safetensors(Path(model_dir) / "model.safetensors")
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    head_dim, eps = hidden // heads, cfg.get("layer_norm_eps", 1e-12)
    if cfg.get("hidden_act", "gelu") != "gelu":
        sys.exit(f"unsupported hidden_act {cfg.get('hidden_act')!r} (only gelu)")
    g = Graph()
    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"

    # Embeddings: word + position (0..S-1) + token type, then LayerNorm.
    seq = g.op("Gather", [g.op("Shape", [ids]), g.const(np.array(1, np.int64))], "seq_len")
    pos = g.op("Range", [g.const(np.array(0, np.int64)), seq, g.const(np.array(1, np.int64))], "pos")
    x = g.op("Gather", [g.const(w["embeddings.word_embeddings.weight"], "word"), ids])
    x = g.op("Add", [x, g.op("Gather", [g.const(w["embeddings.position_embeddings.weight"], "position"), pos])])
    x = g.op("Add", [x, g.op("Gather", [g.const(w["embeddings.token_type_embeddings.weight"], "type"), types])])
    x = g.layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

    # Additive attention mask [B, 1, 1, S]: 0 where attended, a large negative elsewhere.
    m = g.op("Cast", [mask], to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const(np.array(1.0, np.float32)), m]), g.const(np.array(-1e9, np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const(np.array([1, 2], np.int64))], "mask_bias")

    split = g.const(np.array([0, 0, heads, head_dim], np.int64), "split_heads")
    merge = g.const(np.array([0, 0, hidden], np.int64), "merge_heads")
    scale = g.const(np.array(1.0 / np.sqrt(head_dim), np.float32), "scale")
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def heads_of(t, perm):
            return g.op("Transpose", [g.op("Reshape", [t, split])], perm=perm)

        q = heads_of(g.linear(x, w[p + "attention.self.query.weight"], w[p + "attention.self.query.bias"]), [0, 2, 1, 3])
        k = heads_of(g.linear(x, w[p + "attention.self.key.weight"], w[p + "attention.self.key.bias"]), [0, 2, 3, 1])
        v = heads_of(g.linear(x, w[p + "attention.self.value.weight"], w[p + "attention.self.value.bias"]), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        attn = g.linear(ctx, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"])
        x = g.layer_norm(
            g.op("Add", [attn, x]), w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps
        )
        h = g.linear(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"])
        # Exact GELU: 0.5 · h · (1 + erf(h / √2)).
        erf = g.op("Erf", [g.op("Div", [h, g.const(np.array(np.sqrt(2.0), np.float32))])])
        h = g.op("Mul", [g.op("Mul", [h, g.const(np.array(0.5, np.float32))]), g.op("Add", [erf, g.const(np.array(1.0, np.float32))])])
        out = g.linear(h, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
        x = g.layer_norm(g.op("Add", [out, x]), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    dyn = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "bert",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dyn) for n in (ids, mask, types)],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, dyn + [hidden])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lprag export-onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def check(model_path, reference):
    import onnxruntime as ort

    ref = json.loads(Path(reference).read_text())
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for item in ref["items"]:
        ids = np.array([item["input_ids"]], np.int64)
        (h,) = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
        e = h[0].mean(axis=0)
        e /= np.linalg.norm(e)
        worst = max(worst, float(np.abs(e - np.array(item["embedding"], np.float32)).max()))
    print(f"max |onnx - sentence-transformers| over {len(ref['items'])} reference texts: {worst:.2e}")
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--out", help="output file (default MODEL_DIR/model.onnx)")
    ap.add_argument("--check", metavar="REFERENCE_JSON", help="compare with reference embeddings")
    a = ap.parse_args()
    out = Path(a.out) if a.out else Path(a.model_dir) / "model.onnx"
    onnx.save(build(a.model_dir), str(out))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    if a.check and check(out, a.check) > 1e-4:
        sys.exit("the exported model does not match the reference embeddings")


if __name__ == "__main__":
    main()
