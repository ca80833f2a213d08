"""Entry point: `python -m openclaw_rl_learner --check --device D --world N [--shard S]` prints what is missing
(JSON) and exits 0 or 3; `python -m torch.distributed.run ... -m openclaw_rl_learner --device D`
runs the learner (see worker.py)."""

import argparse
import json
import sys

from .preflight import check


def main():
    ap = argparse.ArgumentParser(prog="openclaw_rl_learner")
    ap.add_argument("--device", choices=("cpu", "cuda", "mps"), default="cpu")
    ap.add_argument("--check", action="store_true", help="only check this PyTorch and print the result")
    ap.add_argument("--world", type=int, default=1, help="with --check: ranks per node")
    ap.add_argument("--shard", default="none", help="with --check: the sharding asked for")
    args = ap.parse_args()
    if args.check:
        report = check(args.device, args.world, args.shard)
        print(json.dumps(report))
        sys.exit(0 if report["ok"] else 3)
    from .worker import run
    sys.exit(run(args.device))


main()
