#!/usr/bin/env python
"""Issue 27's stress rounds, many of them: a soak for kcore's GIL-free paths.

    python scripts/soak.py                      # 20 rounds per implementation, own broker
    python scripts/soak.py --minutes 30 --impl compiled --keep-going
    python scripts/soak.py --bootstrap HOST:PORT --rounds 5 --seed 1234

Each round is tests/integration/stress_round.py in its own process on a new 2-partition topic,
read back and checked by tests/integration/stress_check.py (see test_concurrency_stress.py).
Prints one line per round, the report of each failing one, and at the end the rounds, records
and interleavings covered. Exit status 1 if any round failed. The topics (and manifests) of
failing rounds are kept; the others are deleted.
"""
import argparse
import itertools
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(1, os.path.dirname(HERE))  # the repository root: tests.harness (read-back)

from stress_check import run_round, sanitized, totals  # noqa: E402


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(admin, name):
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:  # until both partitions have a leader
        t = admin.list_topics(name, timeout=5).topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == 2 and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return name
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} not ready")
        time.sleep(0.1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", help="an Apache Kafka broker (default: start one)")
    ap.add_argument("--rounds", type=int, help="per implementation (default 20, or no limit "
                    "with --minutes)")
    ap.add_argument("--minutes", type=float, help="stop starting rounds after this long")
    ap.add_argument("--impl", choices=("compiled", "pure", "both"), default="both")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 1_000_000)
    ap.add_argument("--small", action="store_true", default=sanitized(),
                    help="fewer records per round (the default under the sanitizer)")
    ap.add_argument("--keep-going", action="store_true", help="go on after a failed round")
    ap.add_argument("--without", default="", help="passed to stress_round.py: leave out some "
                    "of mutate,fork,gc,flush,metrics (to tell findings apart)")
    ap.add_argument("--grow", default="8,16", help="passed to stress_round.py")
    args = ap.parse_args(argv)
    impls = ["compiled", "pure"] if args.impl == "both" else [args.impl]
    cluster = None
    if args.bootstrap is None:
        from pyprod.local_broker import LocalBroker

        cluster = LocalBroker().start()
        args.bootstrap = cluster.bootstrap_servers
    admin = _admin(args.bootstrap)
    workdir = tempfile.mkdtemp(prefix="pyprod-soak-")
    print(f"soak: broker {args.bootstrap}, seeds from {args.seed}, impl {args.impl}, "
          f"manifests in {workdir}", flush=True)
    results, end = [], None if args.minutes is None else time.monotonic() + args.minutes * 60
    rounds = args.rounds or (None if end else 20)
    plan = ((i, impl) for i in (itertools.count() if rounds is None else range(rounds))
            for impl in impls)
    try:
        for i, impl in plan:
            if end is not None and time.monotonic() > end:
                break
            seed = args.seed + i
            name = _create(admin, f"soak-{seed}-{impl}-{os.getpid()}")
            r = run_round(args.bootstrap, name, seed, impl, workdir, small=args.small,
                          guard=600.0 if args.small else 240.0,
                          extra_args=("--without", args.without, "--grow", args.grow))
            results.append(r)
            print(r.report() if not r.ok else r.report().splitlines()[0], flush=True)
            if r.ok:
                admin.delete_topics([name])
                os.remove(os.path.join(workdir, f"manifest-{impl}-{seed}.json"))
            elif not args.keep_going:
                break
    except KeyboardInterrupt:
        pass
    finally:
        print(f"soak: {totals(results)}", flush=True)
        if not os.listdir(workdir):  # nothing failed: no manifest kept
            os.rmdir(workdir)
        if cluster is not None:
            cluster.stop()
    return 1 if any(not r.ok for r in results) or not results else 0


if __name__ == "__main__":
    sys.exit(main())
