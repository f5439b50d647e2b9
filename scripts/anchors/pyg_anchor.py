#!/usr/bin/env python3
"""PyTorch Geometric's training epoch on the graph shape of lprag's `bench_train`.

The anchor of the link-predictor training rows in docs/benchmarks.md: a one-layer GCN
(PyG's GCNConv, 384 -> 256) with a Hadamard MLP decoder (256 -> 256 -> 1), binary
cross-entropy with one uniformly drawn negative per positive edge, Adam, full batch (one
optimisation step per epoch over every edge), on a random graph of the shape
`cargo run -p lprag-model --release --example bench_train -- EPOCHS NODES EDGES` builds: a
third of the nodes are chunks, the rest queries; a third of the edges join two chunks, the
rest a query and a chunk; features uniform in [-0.5, 0.5).

    pip install torch torch_geometric        # PyPI only
    python3 scripts/anchors/pyg_anchor.py --nodes 150000 --edges 450000 --epochs 3 --threads 2

Prints the seconds of each epoch and the median after the first (warm-up) one, and with
`--json FILE` writes them. Pass the median to `bench_train --pyg SECONDS` so lprag's rows
print their ratio to it from the same session.
"""

import argparse
import json
import statistics
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=150000)
    ap.add_argument("--edges", type=int, default=450000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3, help="epochs, the first a warm-up")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import torch_geometric
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import to_undirected

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    chunks = args.nodes // 3
    queries = args.nodes - chunks
    chunk_edges = args.edges // 3
    query_edges = args.edges - chunk_edges
    x = torch.rand(args.nodes, args.dim) - 0.5
    a = torch.randint(0, chunks, (chunk_edges,))
    b = torch.randint(0, chunks, (chunk_edges,))
    keep = a != b
    cc = torch.stack([a[keep], b[keep]])
    qc = torch.stack(
        [
            chunks + torch.arange(query_edges) % queries,
            torch.randint(0, chunks, (query_edges,)),
        ]
    )
    pos = torch.cat([cc, qc], dim=1)
    message_index = to_undirected(pos, num_nodes=args.nodes)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GCNConv(args.dim, args.hidden, cached=False)
            self.dec1 = torch.nn.Linear(args.hidden, args.hidden)
            self.dec2 = torch.nn.Linear(args.hidden, 1)

        def forward(self, x, edge_index, pairs):
            h = self.conv(x, edge_index)
            z = h[pairs[0]] * h[pairs[1]]
            return self.dec2(F.relu(self.dec1(z))).squeeze(-1)

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for epoch in range(args.epochs):
        t = time.perf_counter()
        model.train()
        opt.zero_grad()
        neg = torch.stack(
            [
                torch.randint(0, args.nodes, (pos.shape[1],)),
                torch.randint(0, chunks, (pos.shape[1],)),
            ]
        )
        pairs = torch.cat([pos, neg], dim=1)
        labels = torch.cat([torch.ones(pos.shape[1]), torch.zeros(neg.shape[1])])
        logits = model(x, message_index, pairs)
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
        print(f"epoch {epoch + 1}: {times[-1]:.3f} s, loss {loss.item():.4f}", flush=True)
    timed = times[1:] or times
    median = statistics.median(timed)
    print(
        f"PyG {torch_geometric.__version__} / torch {torch.__version__}, "
        f"{args.threads} threads: GCN + Hadamard full batch, "
        f"{args.nodes} nodes, {pos.shape[1]} edges: {median:.3f} s/epoch "
        f"(median of {len(timed)})"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "nodes": args.nodes,
                    "edges": int(pos.shape[1]),
                    "threads": args.threads,
                    "torch": torch.__version__,
                    "torch_geometric": torch_geometric.__version__,
                    "epoch_seconds": times,
                    "median_seconds": median,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
