"""``pyprod-broker``: a local Apache Kafka 4.x broker (KRaft, one node) for trying pyprod.

    pyprod-broker                                  # 127.0.0.1:9092, data in a temp dir
    pyprod-broker --port 19092 --topic events:6    # create topics (name:partitions)
    pyprod-broker --data-dir ~/kafka-data          # keep the data across runs

The first stdout line is the bootstrap address. It runs until Ctrl-C (SIGINT) or SIGTERM, then
stops the broker cleanly and exits 0. Needs Java 17+ and Maven (the jars are fetched once into
``~/.cache/pyprod``) and confluent-kafka (the ``broker`` or ``test`` extras).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import sys
import time

from .broker import LocalBroker
from .jars import DEFAULT_KAFKA_VERSION

_STOP_SIGNALS = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name)]


def _say(msg: str) -> None:
    print("pyprod-broker: " + msg, file=sys.stderr, flush=True)


def _topic(spec: str) -> tuple[str, int]:
    name, _, parts = spec.partition(":")
    try:
        n = int(parts or 1)
    except ValueError:
        n = 0
    if not name or n < 1:
        raise argparse.ArgumentTypeError(f"expected NAME or NAME:PARTITIONS, got {spec!r}")
    return name, n


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="pyprod-broker",
        description="Run a local Apache Kafka 4.x broker (KRaft, one node) on 127.0.0.1 until "
                    "Ctrl-C or SIGTERM. Prints the bootstrap address as the first line.")
    ap.add_argument("--port", type=int, default=9092,
                    help="client listener port (default 9092)")
    ap.add_argument("--topic", type=_topic, action="append", default=[], metavar="NAME[:N]",
                    help="create topic NAME with N partitions (default 1); repeatable; an "
                         "existing topic is kept as it is")
    ap.add_argument("--data-dir", default=None, metavar="DIR",
                    help="keep the broker's data and logs in DIR across runs (default: a temp "
                         "dir, deleted when the broker stops)")
    ap.add_argument("--kafka-version", default=None, metavar="V",
                    help="Apache Kafka version (default $PYPROD_KAFKA_VERSION or "
                         f"{DEFAULT_KAFKA_VERSION})")
    return ap


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM binds
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _formatted_cluster_id(cluster: LocalBroker) -> str | None:
    """The cluster id of an earlier run's data (a restart must keep it), or None."""
    try:
        with open(os.path.join(cluster.node_dir(0), "data", "meta.properties")) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key == "cluster.id":
                    return value
    except OSError:
        pass
    return None


def _create_topics(cluster: LocalBroker, topics) -> list[str]:
    existing = cluster.admin().list_topics(timeout=10).topics
    out = []
    for name, partitions in topics:
        if name in existing:
            out.append(f"{name} (exists, {len(existing[name].partitions)} partitions)")
        else:
            cluster.create_topic(name, partitions)
            out.append(f"{name} ({partitions} partitions)")
    return out


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if not 0 < args.port < 65536:
        _say(f"--port must be in 1..65535, got {args.port}")
        return 2
    if not _port_free(args.port):
        _say(f"port {args.port} on 127.0.0.1 is in use (another broker?); pick one with --port")
        return 1
    data_dir = os.path.abspath(os.path.expanduser(args.data_dir)) if args.data_dir else None
    if data_dir:
        os.makedirs(data_dir, exist_ok=True)
    if importlib.util.find_spec("confluent_kafka") is None:  # create_topic's admin client
        _say("needs confluent-kafka: pip install 'pyprod[broker]' (or the test extras)")
        return 1
    cluster = LocalBroker(args.port, log_dir=data_dir, version=args.kafka_version)
    if data_dir:
        cluster.cluster_id = _formatted_cluster_id(cluster) or cluster.cluster_id
    for sig in _STOP_SIGNALS:  # SIGTERM and SIGHUP stop it as Ctrl-C does
        signal.signal(sig, signal.default_int_handler)
    _say(f"starting Kafka {cluster.version} on 127.0.0.1:{args.port} (the first start on a "
         "machine fetches the jars through Maven, once)")
    try:
        cluster.start()
        topics = _create_topics(cluster, args.topic)
        print(cluster.bootstrap_servers, flush=True)
        _say(f"ready in {cluster.startup_seconds:.1f} s; "
             + (f"topics: {', '.join(topics)}; " if topics else "")
             + (f"data in {cluster.log_dir}" if data_dir else "data in a temp dir")
             + ". Ctrl-C stops it.")
        while cluster.is_running(0):
            time.sleep(0.5)
        _say("the broker exited on its own:\n" + cluster.log_tail(40))
        return 1
    except KeyboardInterrupt:
        _say("stopping the broker")
        return 0
    except Exception as e:  # noqa: BLE001 - e.g. KafkaLibsUnavailable, a bad topic name
        _say(f"could not start the broker: {e}")
        return 1
    finally:
        for sig in _STOP_SIGNALS:  # a second Ctrl-C must not leave the JVM half stopped
            signal.signal(sig, signal.SIG_IGN)
        cluster.stop()
        _say("stopped")


if __name__ == "__main__":
    sys.exit(main())
