#!/usr/bin/env python3
"""CSCC and Cronus against CEGB on a skewed ranking set (Xu et al. 2014, section 6.3's LTR-Skewed, built from the
bundled MSLR-WEB subset): precision@5 against the mean feature cost per document.

    .venv/bin/python -m scripts.cascade_mslr [--relevant 3] [--splits 5] [--out docs/results] [--quick]

Data: lightgbm_cegb.datasets.mslr_subset with its cost vector; a document is relevant when its label is >=
--relevant (3, the issue's choice: 1.6% of the training documents, 2.6% of the test ones; 2: about 10%). The one
protocol of scripts/protocol.py (``repeated_frontiers``) on ``--splits`` query-wise random splits (``query_split``:
the subset's queries dealt out again as its parts hold them: 29 train, 14 valid, 43 test). Methods through
lightgbm_cegb.selection on the ranking task (metric p@5): plain LightGBM (binary objective: the phi of the CSTC
family), CEGB (its relative trade-off grid), CSCC and Cronus (5 stages, their relative trade-off grid, on the
plain model's trees, pruned on validation), CSTC (depth 3, same), and CEGB trained to each budget. Writes
DIR/cascade_mslr_<relevant>.csv (every point of every split), .md (per method and budget, 0.1, 0.25, 0.5 x plain
LightGBM's validation cost and any cost: the mean test precision@5 with its 95% interval) and .png (split 0).
"""

from __future__ import annotations

import numpy as np

from scripts.protocol import QUICK, mslr_parts, protocol_parser, query_split, repeated_frontiers

RUNS = (("LightGBM", "lightgbm", {"objective": "binary"}), ("CEGB", "cegb", {"objective": "binary"}),
        ("CSCC", "cscc", {"objective": "binary"}), ("Cronus", "cronus", {"objective": "binary"}),
        ("CSTC", "cstc", {"objective": "binary"}))
CASCADE_QUICK = {**QUICK, "cegb": [{"relative_tradeoff": 0.05}]}  # one point per method


def main() -> None:
    parser = protocol_parser(__doc__, choices=("mslr",))
    parser.add_argument("--relevant", type=int, default=3, help="the lowest label that is relevant")
    args = parser.parse_args()
    parts, costs = mslr_parts()
    parts = {k: (X, (y >= args.relevant).astype(np.float64), group) for k, (X, y, group) in parts.items()}
    print("relevant share: " + ", ".join(f"{k} {np.mean(v[1]):.3f}" for k, v in parts.items()), flush=True)
    relevant = int(sum(v[1].sum() for v in parts.values()))
    repeated_frontiers(lambda seed: query_split(parts, seed), costs, "ranking", RUNS, args,
                       name=f"cascade_mslr_{args.relevant}", metric="p@5", quick_grids=CASCADE_QUICK,
                       trained=("CEGB trained to the budget", {"objective": "binary"}),
                       title=f"MSLR, label >= {args.relevant} ({relevant} relevant documents in all)",
                       command=f"python -m scripts.cascade_mslr --relevant {args.relevant} --rounds {args.rounds}")


if __name__ == "__main__":
    main()
