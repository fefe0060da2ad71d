"""Producer throughput, one workload: pyprod vs confluent-kafka vs kafka-python (and Java).

The 100-byte keyless workload of bench/compare.py on its own (acks=1, linger_ms=5, 6
partitions, timed from the first send until flush() returns), without the paced latency
runs or the chart. Everything (the child runners, the broker, the tables) is compare.py's;
this script only keeps the older options and file names.

    python bench/producer_peers.py                # 1M records (kafka-python: 100k), 3 rounds
    python bench/producer_peers.py --quick        # 200k records, 3 rounds, no Java
    python bench/producer_peers.py --batch-size 1000000 \\
        --out bench/results/producer_peers_batch1m.json

Writes bench/results/producer_peers.json and .md (compare.py's format).
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402

CLIENTS = ("pyprod", "confluent", "kafka-python", "aiokafka")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--records", type=int, default=None,
                    help="records per run (default 1,000,000; --quick 200,000; kafka-python "
                         "gets a tenth)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="200k records, no Java")
    ap.add_argument("--clients", default="pyprod,confluent,kafka-python",
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--java", dest="java", action="store_true", default=None,
                    help="also run Java's ProducerPerformance (default: on unless --quick)")
    ap.add_argument("--no-java", dest="java", action="store_false")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="one batch size for every client (default: each client's own)")
    ap.add_argument("--broker-warmup", type=int, default=None,
                    help="untimed records first (default min(records, 300000); 0 = none)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "producer_peers.json"))
    args = ap.parse_args(argv)
    records = args.records or (200_000 if args.quick else 1_000_000)
    clients = args.clients + ("" if args.java is False or (args.java is None and args.quick)
                              else ",java")
    out = os.path.abspath(args.out)
    fwd = ["--workloads", "100B", "--no-latency", "--no-chart", "--spark", "",
           "--clients", clients, "--records", str(records), "--rounds", str(args.rounds),
           "--out-dir", os.path.dirname(out), "--name", os.path.splitext(os.path.basename(out))[0]]
    for opt in ("bootstrap_servers", "batch_size", "broker_warmup"):
        value = getattr(args, opt)
        if value is not None:
            fwd += ["--" + opt.replace("_", "-"), str(value)]
    return compare.main(fwd, command="python bench/producer_peers.py " + " ".join(
        sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
