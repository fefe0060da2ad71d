"""pyprod-perf: producer throughput and latency, in the manner of Kafka's
kafka-producer-perf-test (org.apache.kafka.tools.ProducerPerformance).

    pyprod-perf --embedded --topic perf --num-records 1000000 --record-size 100 \\
        --throughput -1 --acks 1
    pyprod-perf --bootstrap-servers 127.0.0.1:9092 --topic t --num-records 200000 \\
        --payload-file lines.txt --throughput 50000 --producer-config linger.ms=5 batch.size=65536

One Python thread calls send() in a loop, paced to --throughput records/s or unlimited (-1).
The clock runs from the first send() until flush() returns (every record acknowledged).

Latency is the time from the send() call to the record's callback (run on the Sender thread
when its batch is acknowledged). Only one record in every --latency-sample records gets a
callback (add_both), so the other records cost nothing extra. The default samples every
record of a paced run at up to 100,000 records/s, and otherwise 1 in max(64, num-records/50000):
a callback on every record of an unlimited run slowed it down several times over (callbacks
run on the Sender thread and contend for the GIL with the send loop), 1 in 64 did not
measurably. Percentiles are nearest-rank over those samples. MB are 2**20 bytes of values,
as in ProducerPerformance.
"""
from __future__ import annotations

import argparse
import array
import random
import sys
import time

from kcore import compression_type
from pyprod import KafkaProducer, errors
from pyprod import config as configuration

__all__ = ["main", "Pacer", "LatencyRecorder", "percentiles", "latency_summary",
           "format_summary", "producer_config", "default_sample_stride"]

MB = 1024 * 1024
PERCENTILES = (0.5, 0.99, 0.999)
_TARGET_SAMPLES = 50_000


# ---------------------------------------------------------------------------------------------
# pieces the benchmarks in bench/ reuse

class Pacer:
    """Offered load: ``wait(sent)`` sleeps until record number ``sent`` is due at ``rate``/s.

    Call it every :attr:`step` records (about once per millisecond of records)."""

    def __init__(self, rate: float, sleep=time.sleep, clock=time.perf_counter):
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise ValueError(f"rate must be a positive number, got {rate!r}")
        self.rate = float(rate)
        self.step = max(1, int(rate // 1000))
        self._sleep, self._clock = sleep, clock
        self.start = clock()

    def begin(self) -> None:
        self.start = self._clock()

    def delay(self, sent: int) -> float:
        """Seconds until record number ``sent`` is due (<= 0: it is already due)."""
        return self.start + sent / self.rate - self._clock()

    def wait(self, sent: int) -> None:
        delay = self.delay(sent)
        while delay > 0:  # a sleep that returns early (a poll serving events) waits again
            self._sleep(delay)
            delay = self.delay(sent)


class LatencyRecorder:
    """Collects send()->callback latencies in seconds; ``done(t0, value_or_exception)`` is the
    callback (pyprod/kafka-python futures: ``future.add_both(rec.done, t0)``)."""

    def __init__(self, clock=time.perf_counter):
        self.samples = array.array("d")
        self.errors = 0
        self.first_error = None
        self._clock = clock

    def done(self, t0: float, result) -> None:
        if isinstance(result, BaseException):
            self.errors += 1
            if self.first_error is None:
                self.first_error = result
        else:
            self.samples.append(self._clock() - t0)

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)


def percentiles(samples, ps=PERCENTILES) -> list:
    """Nearest-rank percentiles (index int(p * n) of the sorted samples, as Java's tool)."""
    s = sorted(samples)
    if not s:
        return [float("nan")] * len(ps)
    return [s[min(len(s) - 1, int(p * len(s)))] for p in ps]


def latency_summary(samples) -> dict:
    """avg/p50/p99/p99.9/max in milliseconds of latencies given in seconds."""
    n = len(samples)
    if not n:
        nan = float("nan")
        return {"samples": 0, "avg_ms": nan, "p50_ms": nan, "p99_ms": nan, "p999_ms": nan,
                "max_ms": nan}
    p50, p99, p999 = percentiles(samples)
    return {"samples": n, "avg_ms": sum(samples) / n * 1e3, "p50_ms": p50 * 1e3,
            "p99_ms": p99 * 1e3, "p999_ms": p999 * 1e3, "max_ms": max(samples) * 1e3}


def default_sample_stride(num_records: int, throughput: float) -> int:
    """1 in N records gets a latency callback: every record of a paced run up to 100k/s,
    else 1 in 64 or fewer (at most ~50,000 samples)."""
    if 0 < throughput <= 100_000:
        return 1
    return max(64, num_records // _TARGET_SAMPLES)


def format_summary(s: dict) -> str:
    """The final line (one line, parseable)."""
    return (f"{s['records']} records sent, {s['records_per_s']:.1f} records/sec "
            f"({s['mb_per_s']:.2f} MB/sec), {s['avg_ms']:.2f} ms avg latency, "
            f"{s['p50_ms']:.2f} ms p50, {s['p99_ms']:.2f} ms p99, {s['p999_ms']:.2f} ms p99.9, "
            f"{s['max_ms']:.2f} ms max latency "
            f"({s['samples']} latency samples, 1 in {s['stride']} records).")


# ---------------------------------------------------------------------------------------------
# producer configuration from the command line

def _coerce(key: str, text: str, default):
    """A command-line string as the type of ``key``'s default."""
    low = text.strip().lower()
    if isinstance(default, bool):
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError(f"{key} must be true or false, got {text!r}")
    if isinstance(default, (list, set, tuple, dict)) or key.endswith(
            ("_serializer", "partitioner", "ssl_context", "selector", "_provider", "kafka_client")):
        raise ValueError(f"{key} cannot be set from the command line")
    if low in ("none", "null") and not isinstance(default, (int, float)):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text  # a string option, or a value the producer's own checks will judge (acks=all)


def producer_config(items) -> dict:
    """``["linger.ms=5", "batch_size=65536"]`` -> pyprod keyword arguments. ValueError names
    the bad item; unknown names raise KafkaConfigurationError (from ``from_java_names``)."""
    raw = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        raw[key.strip()] = value
    out = {}
    for key, value in configuration.from_java_names(raw).items():
        default = configuration.DEFAULTS.get(key, configuration.LEGACY.get(key))
        out[key] = _coerce(key, value, default)
    return out


# ---------------------------------------------------------------------------------------------
# progress on stderr

class Progress:
    """A bar with the live rate (a tty or --progress), else a line every ``interval`` s."""

    def __init__(self, total, value_bytes, bar, interval, stream=None):
        self.total, self.value_bytes, self.bar = total, value_bytes, bar
        self.interval = 0.25 if bar else interval
        self.stream = stream or sys.stderr
        self.start = self.last_t = time.perf_counter()
        self.last_n = self.last_samples = 0
        self.next_t = self.start + self.interval if self.interval > 0 else float("inf")

    def maybe(self, sent: int, rec: LatencyRecorder) -> None:
        now = time.perf_counter()
        if now >= self.next_t:
            self.show(sent, rec, now)
            self.next_t = now + self.interval

    def show(self, sent, rec, now, note=""):
        window = now - self.last_t
        rate = (sent - self.last_n) / window if window > 0 else 0.0
        if self.bar:
            frac = sent / self.total if self.total else 1.0
            filled = int(frac * 30)
            total_rate = sent / (now - self.start) if now > self.start else 0.0
            eta = (self.total - sent) / total_rate if total_rate > 0 else 0.0
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {frac:6.1%} "
                              f"{sent:,}/{self.total:,}  {rate:,.0f} records/s "
                              f"({rate * self.value_bytes / MB:.1f} MB/s)  ETA {eta:4.0f}s"
                              f"{note}\x1b[K")
        else:
            lat = latency_summary(rec.samples[self.last_samples:])
            self.stream.write(f"{sent - self.last_n} records sent, {rate:.1f} records/sec "
                              f"({rate * self.value_bytes / MB:.2f} MB/sec), "
                              f"{lat['avg_ms']:.1f} ms avg latency, "
                              f"{lat['max_ms']:.1f} ms max latency.{note}\n")
        self.stream.flush()
        self.last_t, self.last_n, self.last_samples = now, sent, len(rec.samples)

    def finish(self, sent, rec, now) -> None:
        if self.bar:
            self.last_t, self.last_n = self.start, 0  # the bar ends on the whole run's rate
            self.show(sent, rec, now)
            self.stream.write("\n")
            self.stream.flush()


# ---------------------------------------------------------------------------------------------
# the run

def _groups(seq, stride):
    """[(sampled value, [the stride-1 unsampled values after it]), ...]"""
    return [(seq[g], seq[g + 1:g + stride]) for g in range(0, len(seq), stride)]


def run(producer, topic, payloads, num_records, throughput=-1.0, stride=1, progress=None):
    """Send ``num_records`` values picked at random from ``payloads``; flush. Returns the
    summary dict (see :func:`format_summary`) plus ``errors``."""
    rng = random.Random(1)
    pacer = Pacer(throughput) if throughput > 0 else None
    block = stride * max(1, round((pacer.step if pacer else 4096) / stride))
    seq = [payloads[0]] * block if len(payloads) == 1 else \
        [rng.choice(payloads) for _ in range(block)]
    groups = _groups(seq, stride)
    send, now = producer.send, time.perf_counter
    rec = LatencyRecorder()
    done = rec.done
    value_bytes = sum(map(len, seq)) / len(seq)
    sent = 0
    t_start = now()
    if pacer:
        pacer.begin()
    while sent < num_records:
        left = num_records - sent
        if left < block:
            groups = _groups(seq[:left], stride)
        for head, rest in groups:
            t0 = now()
            send(topic, head).add_both(done, t0)
            for v in rest:
                send(topic, v)
        sent += min(block, left)
        if pacer:
            pacer.wait(sent)
        if progress:
            progress.maybe(sent, rec)
    if progress and progress.bar:
        progress.show(sent, rec, now(), "  flushing ...")
    producer.flush()
    elapsed = now() - t_start
    if progress:
        progress.finish(sent, rec, now())
    errors = producer.metrics().get("producer-metrics", {}).get("record-error-total", 0)
    out = {"records": num_records, "elapsed_s": elapsed,
           "records_per_s": num_records / elapsed if elapsed > 0 else float("inf"),
           "stride": stride, "errors": max(errors, rec.errors),
           "first_error": None if rec.first_error is None else repr(rec.first_error)}
    out["mb_per_s"] = out["records_per_s"] * value_bytes / MB
    out.update(latency_summary(rec.samples))
    return out


def _read_payloads(path: str, delimiter: str) -> list:
    with open(path, "rb") as f:
        data = f.read()
    items = [p for p in data.split(delimiter.encode()) if p]
    if not items:
        raise ValueError(f"--payload-file {path!r} has no payloads")
    return items


def _random_payload(size: int) -> bytes:
    """Random upper-case letters, like ProducerPerformance's payload."""
    rng = random.Random(7)
    return bytes(rng.randrange(65, 91) for _ in range(size))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="pyprod-perf",
        description="pyprod producer throughput and latency test (like kafka-producer-perf-test).",
        epilog="Latency is send() to callback, sampled on 1 in --latency-sample records.")
    ap.add_argument("--topic", required=True, help="produce to this topic")
    ap.add_argument("--num-records", type=int, required=True, help="records to send")
    size = ap.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, help="value size in bytes")
    size.add_argument("--payload-file", help="values, one per delimiter (picked at random)")
    ap.add_argument("--payload-delimiter", default="\n", help="default: newline")
    ap.add_argument("--throughput", type=float, required=True,
                    help="offered records/s; -1 = unlimited")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-servers", "--bootstrap-server", dest="bootstrap_servers",
                       help="host:port[,host:port...]")
    where.add_argument("--embedded", action="store_true",
                       help="start a local Apache Kafka broker for the run (Java + Maven)")
    ap.add_argument("--partitions", type=int, default=None,
                    help="with --embedded: partitions of the topic it creates (default 6)")
    ap.add_argument("--acks", choices=("0", "1", "-1", "all"), help="default: the producer's")
    ap.add_argument("--compression-type", choices=compression_type.NAMES)
    ap.add_argument("--producer-config", "--producer-props", "--command-property",
                    dest="producer_config", nargs="+", default=[], metavar="NAME=VALUE",
                    help="producer settings, Java (linger.ms=5) or pyprod (linger_ms=5) names")
    ap.add_argument("--latency-sample", type=int, default=None, metavar="N",
                    help="latency callback on 1 in N records (default: every record when "
                         "paced <= 100k/s, else max(64, num-records/50000))")
    prog = ap.add_mutually_exclusive_group()
    prog.add_argument("--progress", action="store_true", default=None,
                      help="progress bar on stderr (default: only when stderr is a tty)")
    prog.add_argument("--no-progress", dest="progress", action="store_false")
    ap.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                    help="without the bar: a progress line every MS ms (0 = none)")
    ap.add_argument("--json", action="store_true", help="also print the summary as JSON")
    return ap


def _check(ap, args):
    if args.num_records <= 0:
        ap.error(f"--num-records must be positive, got {args.num_records}")
    if args.record_size is not None and args.record_size <= 0:
        ap.error(f"--record-size must be positive, got {args.record_size}")
    if not (args.throughput == -1 or args.throughput > 0):
        ap.error(f"--throughput must be -1 (unlimited) or > 0, got {args.throughput:g}")
    if args.partitions is not None:
        if not args.embedded:
            ap.error("--partitions needs --embedded (an existing topic keeps its partitions)")
        if args.partitions <= 0:
            ap.error(f"--partitions must be positive, got {args.partitions}")
    if args.latency_sample is not None and args.latency_sample <= 0:
        ap.error(f"--latency-sample must be positive, got {args.latency_sample}")
    if args.reporting_interval < 0:
        ap.error("--reporting-interval must be >= 0")
    if not args.topic.strip():
        ap.error("--topic must not be empty")
    if not args.payload_delimiter:
        ap.error("--payload-delimiter must not be empty")


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    _check(ap, args)
    try:
        config = producer_config(args.producer_config)
    except (ValueError, errors.KafkaConfigurationError) as e:
        ap.error(f"--producer-config: {e}")
    if args.acks is not None:
        config["acks"] = "all" if args.acks == "all" else int(args.acks)
    if args.compression_type is not None:
        config["compression_type"] = None if args.compression_type == "none" \
            else args.compression_type
    try:
        payloads = _read_payloads(args.payload_file, args.payload_delimiter) \
            if args.payload_file else [_random_payload(args.record_size)]
    except (OSError, ValueError) as e:
        ap.error(str(e))
    stride = args.latency_sample or default_sample_stride(args.num_records, args.throughput)

    cluster = None
    producer = None
    try:
        if args.embedded:
            from pyprod.local_broker import KafkaLibsUnavailable, LocalBroker
            print("starting an embedded Kafka broker ...", file=sys.stderr, flush=True)
            try:
                cluster = LocalBroker().start()
            except KafkaLibsUnavailable as e:
                print(f"pyprod-perf: --embedded needs Java 17+ and Maven: {e}", file=sys.stderr)
                return 1
            cluster.create_topic(args.topic, args.partitions or 6)
            config["bootstrap_servers"] = cluster.bootstrap_servers
        else:
            config["bootstrap_servers"] = args.bootstrap_servers
        try:
            producer = KafkaProducer(**config)
        except errors.KafkaConfigurationError as e:
            ap.error(str(e))
        except errors.NoBrokersAvailable:
            print(f"pyprod-perf: no broker reachable at {config['bootstrap_servers']}",
                  file=sys.stderr)
            return 1
        bar = sys.stderr.isatty() if args.progress is None else args.progress
        show = bar or args.reporting_interval > 0
        progress = Progress(args.num_records, sum(map(len, payloads)) / len(payloads), bar,
                            args.reporting_interval / 1000) if show else None
        try:
            summary = run(producer, args.topic, payloads, args.num_records, args.throughput,
                          stride, progress)
        except errors.KafkaError as e:
            print(f"pyprod-perf: send failed: {e!r}", file=sys.stderr)
            return 1
        print(format_summary(summary), flush=True)
        if args.json:
            import json
            print(json.dumps(summary), flush=True)
        if summary["errors"]:
            print(f"pyprod-perf: {summary['errors']} records failed "
                  f"(first: {summary['first_error']})", file=sys.stderr)
            return 1
        return 0
    except KeyboardInterrupt:
        if producer is not None:
            producer.close(timeout=0)
            producer = None
        return 130
    finally:
        if producer is not None:
            producer.close()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
