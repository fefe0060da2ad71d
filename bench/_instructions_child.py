"""The producer instructions.py counts (run under callgrind with the tree on PYTHONPATH)."""
import json
import sys

from pyprod import KafkaProducer


def main(spec):
    idempotent = spec["idempotent"]
    p = KafkaProducer(bootstrap_servers=spec["bootstrap"], api_version=spec["api_version"],
                      linger_ms=1000, batch_size=16384, acks="all" if idempotent else 1,
                      enable_idempotence=idempotent)
    value, topic = b"x" * 100, spec["topic"]
    for i in range(6):
        p.send(topic, value, partition=i).get(30)
    send = p.send
    for _ in range(spec["records"]):
        send(topic, value)
    p.flush()
    p.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
