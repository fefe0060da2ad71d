#!/usr/bin/env python
"""The long fuzz run: random and mutated inputs through every decoder of network bytes.

    python scripts/fuzz.py --inputs 10000000 --jobs 1     # 10 M inputs in all, spread evenly
    python scripts/fuzz.py --inputs 100000 --per-target --targets scram,oauthbearer

The targets, the generator and the mutator are tests.harness.fuzz(_targets); tests/fuzz runs a
bounded number of the same inputs in CI. kcore's compiled Produce codec is checked against its
pure twin (same result or same exception type) when it is built. A finding is an exception
that is not a KafkaError, a twin disagreement, or an input slower than --slow-ms. The run
lowers its own priority (nice 10), prints one line per target and the findings, and exits 1
if there are any.
"""
import argparse
import collections
import logging
import os
import platform
import random
import sys
import time

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.harness


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=100_000,
                   help="inputs in all, spread evenly over the targets (default 100000)")
    p.add_argument("--per-target", action="store_true", help="--inputs counts per target")
    p.add_argument("--targets", default="",
                   help="comma-separated target names (default: all); --list shows them")
    p.add_argument("--list", action="store_true", help="list the targets and exit")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--slow-ms", type=float, default=1000.0,
                   help="an input taking longer is a finding (default 1000)")
    p.add_argument("--pure", action="store_true", help="kcore's pure twins only")
    p.add_argument("--chunk", type=int, default=20_000, help="inputs per work unit")
    p.add_argument("--progress-s", type=float, default=60.0,
                   help="seconds between progress lines (default 60)")
    args = p.parse_args(argv)
    if args.inputs < 0 or args.jobs < 1 or args.chunk < 1:
        p.error("--inputs >= 0, --jobs >= 1 and --chunk >= 1")
    return args


def _targets(pure):
    from tests.harness.fuzz_targets import targets
    return targets(pure=True if pure else None)


_WORKER = {}


def _work(unit):
    """Run one unit (target name, count, seed); returns (name, count, seconds, findings)."""
    from tests.harness import fuzz
    name, count, seed, pure, slow_s = unit
    if "targets" not in _WORKER:
        logging.disable(logging.CRITICAL)  # the harnesses log what they handle
        _WORKER["targets"] = _targets(pure)
    t0 = time.perf_counter()
    findings = fuzz.run(_WORKER["targets"][name], count, random.Random(seed), slow_s=slow_s)
    return name, count, time.perf_counter() - t0, findings


def _units(names, counts, seed, pure, slow_s, chunk):
    """Work units, round-robin over the targets so a stopped run stays balanced."""
    per_target = []
    for i, name in enumerate(names):
        left, units, k = counts[name], [], 0
        while left > 0:
            n = min(chunk, left)
            units.append((name, n, seed * 1_000_003 + i * 10_007 + k, pure, slow_s))
            left, k = left - n, k + 1
        per_target.append(units)
    out = []
    while any(per_target):
        for units in per_target:
            if units:
                out.append(units.pop(0))
    return out


def _split(total, names, per_target):
    if per_target:
        return {n: total for n in names}
    q, r = divmod(total, len(names))
    return {n: q + (1 if i < r else 0) for i, n in enumerate(names)}


def _print_findings(findings, out):
    groups = collections.OrderedDict()
    for f in findings:
        groups.setdefault((f.target, f.kind, f.error, f.where), []).append(f)
    for (target, kind, error, where), fs in groups.items():
        f = fs[0]
        print("FINDING %s: %s %s at %s, %d input(s); first: case %r, %s" % (
            target, kind, error, where, len(fs), f.case, f.detail), file=out)
        print("    input (%d bytes): %s%s" % (len(f.data), f.data[:256].hex(),
                                              "..." if len(f.data) > 256 else ""), file=out)


def main(argv=None):
    args = _parse_args(argv)
    out = sys.stdout
    if os.nice(0) < 10:
        os.nice(10 - os.nice(0))
    targets = _targets(args.pure)
    if args.list:
        for t in targets.values():
            print("%-18s %3d cases  %s" % (t.name, len(t.cases), t.doc))
        return 0
    names = [n for n in args.targets.split(",") if n] or list(targets)
    unknown = [n for n in names if n not in targets]
    if unknown:
        print("unknown target(s): %s (have: %s)" % (", ".join(unknown), ", ".join(targets)),
              file=sys.stderr)
        return 2
    counts = _split(args.inputs, names, args.per_target)
    import kcore
    print("fuzz: %d inputs (%s) over %d targets, seed %d, %d job(s), nice %d; python %s, kcore %s"
          % (sum(counts.values()), "per target %d" % args.inputs if args.per_target else "in all",
             len(names), args.seed, args.jobs, os.nice(0), platform.python_version(),
             "pure" if args.pure or not kcore.EXTENSIONS else "compiled (+ pure twin)"),
          file=out)
    for name in names:
        print("  %-18s %s" % (name, targets[name].doc), file=out)
    out.flush()
    units = _units(names, counts, args.seed, args.pure, args.slow_ms / 1000.0, args.chunk)
    done = collections.Counter()
    spent = collections.Counter()
    findings = []
    t0 = last = time.perf_counter()
    if args.jobs == 1:
        results = map(_work, units)
    else:
        import multiprocessing
        pool = multiprocessing.get_context("fork").Pool(args.jobs)
        results = pool.imap_unordered(_work, units)
    for name, count, seconds, found in results:
        done[name] += count
        spent[name] += seconds
        findings += found
        for f in found:
            print("finding: %s %s %s at %s" % (f.target, f.kind, f.error, f.where), file=out)
        now = time.perf_counter()
        if now - last >= args.progress_s:
            last = now
            n = sum(done.values())
            print("progress: %d inputs in %.0f s (%.0f/s), %d finding(s)" % (
                n, now - t0, n / (now - t0), len(findings)), file=out)
            out.flush()
    elapsed = time.perf_counter() - t0
    print("\n%-18s %12s %9s %9s %9s" % ("target", "inputs", "seconds", "inputs/s", "findings"),
          file=out)
    for name in names:
        n = sum(1 for f in findings if f.target.split(" ")[0] == name)
        print("%-18s %12d %9.1f %9.0f %9d" % (name, done[name], spent[name],
                                              done[name] / spent[name] if spent[name] else 0, n),
              file=out)
    total = sum(done.values())
    print("%-18s %12d %9.1f %9.0f %9d" % ("TOTAL", total, elapsed,
                                          total / elapsed if elapsed else 0, len(findings)),
          file=out)
    _print_findings(findings, out)
    print("fuzz: %d inputs, %d finding(s), %.0f s wall" % (total, len(findings), elapsed),
          file=out)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
