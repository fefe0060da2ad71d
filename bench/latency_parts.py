"""Where a record's send()->callback latency goes, on compare.py's paced workloads (by default
100B-keyed: 100-byte values with keys cycled over 10,000; or 100B, 1KiB), 6 partitions, acks=1,
linger_ms=5, offered at 50,000 records/s (--rate) in bursts of a millisecond's records
(pyprod.perf.Pacer), librdkafka's mock cluster.

Records whose callbacks ran together (gaps under 0.2 ms) came back in one response; per
response, medians over the run (after its first fifth):
- ``records``: how many it carried; ``send span``: first to last send() among them;
- ``oldest``: first send() to the first callback (the oldest record's latency);
- ``newest``: last send() to the first callback;
- ``callbacks``: first to last callback of the response;
- pyprod only, from its Sender (its NetworkPoll's send_request and poll, wrapped): ``drain->cb``,
  the request's send to its response's first callback, and ``linger``, the response's first
  send() to its request; then per request: ``wake late`` (how much longer than asked the
  Sender's last poll before it slept), ``wake->send`` (that poll's end to send_request: the
  loop's Python and the choice of batches), ``write`` (send_request: the request queued and
  written to the socket), ``response`` (send_request's end to its response's handler) and
  ``handler`` (the response decoded and its callbacks run).

    python bench/latency_parts.py --seconds 5 --rounds 3 [--workload 1KiB] [--rate 500]

Each client runs in its own process; the rounds alternate them. Prints a table, writes nothing.
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import sys
import time

import _mock_broker
import compare
from _runs import run_child

RATE = 50_000
GAP_S = 0.0002
WORKLOADS = {"100B-keyed": (100, True), "100B": (100, False), "1KiB": (1024, False)}


class _TimedNet:
    """The Sender's NetworkPoll with each send_request's time kept (the rest passed on)."""

    def __init__(self, net):
        object.__setattr__(self, "_net", net)
        object.__setattr__(self, "sends", [])
        object.__setattr__(self, "polls", [])     # (timeout s, start, end)
        object.__setattr__(self, "requests", [])  # [send, written, handler, handled]

    def __getattr__(self, name):
        return getattr(self._net, name)

    def poll(self, timeout_ms):
        start = time.perf_counter()
        try:
            return self._net.poll(timeout_ms)
        finally:
            self.polls.append((None if timeout_ms is None else timeout_ms / 1000, start,
                               time.perf_counter()))

    def send_request(self, node, api_key, version, body, expects_response, callback, timeout):
        times = [time.perf_counter()]
        self.sends.append(times[0])

        def timed(response):
            times.append(time.perf_counter())
            try:
                return callback(response)
            finally:
                times.append(time.perf_counter())
        try:
            return self._net.send_request(node, api_key, version, body, expects_response,
                                          timed, timeout)
        finally:
            times.insert(1, time.perf_counter())
            self.requests.append(times)


def sender_parts(polls, requests) -> dict:
    """Medians (ms) over requests (after the first fifth) of the Sender's steps around each:
    see the module's doc (wake late, wake->send, write, response, handler)."""
    ends = [end for _, _, end in polls]
    late, woke, parts = [], [], {"write": [], "response": [], "handler": []}
    for times in requests[len(requests) // 5:]:
        i = bisect.bisect(ends, times[0]) - 1
        if i >= 0:
            timeout, start, end = polls[i]
            woke.append(times[0] - end)
            if timeout:
                late.append(max(0.0, end - start - timeout))
        if len(times) == 4:
            for k, name in enumerate(("write", "response", "handler")):
                parts[name].append(times[k + 1] - times[k])
    out = {"wake late": late, "wake->send": woke, **parts}
    return {name: statistics.median(xs) * 1e3 for name, xs in out.items() if xs}


def _groups(done):
    """(send time, callback time) pairs grouped by callbacks that ran together."""
    done.sort(key=lambda x: x[1])
    groups, cur = [], [done[0]]
    for x in done[1:]:
        if x[1] - cur[-1][1] > GAP_S:
            groups.append(cur)
            cur = []
        cur.append(x)
    return groups + [cur]


def parts(done, sends=None) -> dict:
    gs = _groups(done)
    gs = gs[len(gs) // 5:]
    ms = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    out = {"responses": len(gs), "records": statistics.median(len(g) for g in gs),
           "send span": ms([max(s for s, _ in g) - min(s for s, _ in g) for g in gs]),
           "oldest": ms([g[0][1] - min(s for s, _ in g) for g in gs]),
           "newest": ms([g[0][1] - max(s for s, _ in g) for g in gs]),
           "callbacks": ms([g[-1][1] - g[0][1] for g in gs])}
    lats = sorted(cb - s for s, cb in done[len(done) // 5:])
    out["p50"], out["p99"] = (lats[int(len(lats) * q)] * 1e3 for q in (0.5, 0.99))
    if sends:
        pairs = [(g, bisect.bisect(sends, g[0][1]) - 1) for g in gs]
        pairs = [(g, sends[i]) for g, i in pairs if i >= 0]
        out["drain->cb"] = ms([g[0][1] - d for g, d in pairs])
        out["linger"] = ms([d - min(s for s, _ in g) for g, d in pairs])
    return out


def child(bootstrap: str, topic: str, client: str, seconds: float,
          workload: str = "100B-keyed", rate: int = RATE) -> dict:
    from pyprod.perf import Pacer
    size, keyed = WORKLOADS[workload]
    keys = [b"key-%06d" % i for i in range(10_000)] if keyed else [None] * 10_000
    value, n, now = compare._value(size), int(rate * seconds), time.perf_counter
    done, net = [], None
    if client == "pyprod":
        from pyprod import KafkaProducer
        p = KafkaProducer(bootstrap_servers=bootstrap, api_version=_mock_broker.API_VERSION,
                          acks=1, linger_ms=compare.LINGER_MS)
        for f in [p.send(topic, b"warm", partition=i) for i in range(compare.PARTITIONS)]:
            f.get(30)
        loop = p._sender.produce_loop
        net = loop.net = _TimedNet(loop.net)
        send, sleep = p.send, time.sleep

        def cb(t, _result):
            done.append((t, now()))

        def one(i):
            t = now()
            send(topic, value, keys[i % 10_000]).add_both(cb, t)
    else:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "acks": 1,
                      "linger.ms": compare.LINGER_MS})
        for i in range(compare.PARTITIONS):
            p.produce(topic, b"warm", partition=i)
        p.flush(30)
        produce, sleep = p.produce, p.poll

        def one(i):
            t = now()
            produce(topic, value, keys[i % 10_000],
                    on_delivery=lambda err, msg: done.append((t, now())))
    pacer = Pacer(rate, sleep=sleep)
    pacer.begin()
    for i in range(0, n, pacer.step):
        for k in range(i, min(n, i + pacer.step)):
            one(k)
        pacer.wait(min(n, i + pacer.step))
    p.flush()
    if len(done) != n:
        raise RuntimeError(f"{client}: {len(done)} of {n} callbacks")
    out = parts(done, net.sends if net is not None else None)
    if net is not None:
        out.update(sender_parts(net.polls, net.requests))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default="pyprod,confluent-kafka")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="100B-keyed")
    ap.add_argument("--rate", type=int, default=RATE, help="records/s offered (default 50,000)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(**json.loads(args.child))), flush=True)
        return 0
    clients = [c for c in args.clients.split(",") if c]
    if min(args.rounds, args.seconds, args.rate) <= 0 or \
            set(clients) - {"pyprod", "confluent-kafka"}:
        ap.error("--rounds, --seconds and --rate must be positive; --clients: pyprod, "
                 "confluent-kafka")
    runs = {c: [] for c in clients}
    with _mock_broker.MockBroker() as broker:
        for rnd in range(args.rounds):
            for client in compare._rotate(clients, rnd):
                topic = f"latency-parts-{client}-{rnd}-{os.getpid()}"
                broker.create(topic, compare.PARTITIONS)
                runs[client].append(run_child(
                    os.path.abspath(__file__),
                    dict(bootstrap=broker.bootstrap, topic=topic, client=client,
                         seconds=args.seconds, workload=args.workload, rate=args.rate),
                    client, int(args.rate * args.seconds)))
    names = list(dict.fromkeys(k for rs in runs.values() for r in rs for k in r))
    print("| part (ms; medians over rounds) | " + " | ".join(clients) + " |")
    print("|---|" + "---:|" * len(clients))
    for name in names:
        cells = [f"{statistics.median(r[name] for r in runs[c]):.2f}"
                 if all(name in r for r in runs[c]) else "—" for c in clients]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
