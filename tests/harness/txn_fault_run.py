"""pyprod's transactions while a :class:`FaultInjector` rotates faults over a cluster (issue 43,
part 3): each paced range of records (fault_run's :func:`record`) is one transaction; a commit
that fails abortably is aborted, a fatal one (fenced) ends that producer and a new one takes
over the transactional id, as a Java application does. The topic is read back read_committed
by kafka-python and audited with fault_run's :func:`audit`: committed records once each, in
key order, at the offsets their futures gave; no aborted record visible.

    result = run_transactions_under_faults(cluster, topic, 20_000, faults=8, seed=3)
    result.audit.problems(), result.audit.failed_but_written   # [] and 0
"""
from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field

from pyprod import KafkaProducer, errors

from .fault_injector import FaultInjector
from .fault_run import PRODUCER_CONFIG, Audit, audit, record
from .readback import read_all_kafka_python

__all__ = ["TxnRunResult", "run_transactions_under_faults"]

_FATAL = (errors.ProducerFencedError, errors.InvalidTxnStateError,
          errors.TransactionalIdAuthorizationFailedError)
COMMIT_ATTEMPTS = 3  # a commit that timed out is asked again (the same EndTxn's answer)


@dataclass
class TxnRunResult:
    audit: Audit
    faults: dict
    committed: int = 0  # transactions
    aborted: int = 0
    producers: int = 1  # producers that held the transactional id, in turn
    errors: dict = field(default_factory=dict)  # error type -> transactions it ended
    injector_error: str | None = None


def _commit(producer):
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            return producer.commit_transaction()
        except errors.KafkaTimeoutError:
            if attempt == COMMIT_ATTEMPTS - 1:
                raise


def run_transactions_under_faults(cluster, topic: str, n: int, *, chunk: int = 100,
                                  bootstrap: str | None = None, config: dict | None = None,
                                  read_timeout: float = 180.0,
                                  **injector_kwargs) -> TxnRunResult:
    """``n`` records in transactions of ``chunk`` to ``topic`` (which must exist) through
    ``bootstrap`` (default: the cluster's PLAINTEXT listener) with ``config`` over fault_run's
    pyprod settings; the read-back goes through the PLAINTEXT listener."""
    cfg = {**PRODUCER_CONFIG["pyprod"], "transactional_id": "faults-" + uuid.uuid4().hex,
           **(config or {})}

    def new_producer():
        p = KafkaProducer(bootstrap_servers=bootstrap or cluster.bootstrap_servers, **cfg)
        p.init_transactions()
        return p

    outcomes: list = [None] * n
    injector = FaultInjector(cluster, topic, **injector_kwargs)
    result = TxnRunResult(audit=Audit(records=n), faults={})
    producer = new_producer()
    try:
        injector.start()
        for lo, hi in injector.paced(n, chunk):
            futures = []
            try:
                producer.begin_transaction()
                for i in range(lo, hi):
                    key, value = record(i)
                    futures.append(producer.send(topic, value, key=key))
                _commit(producer)
                for i, f in zip(range(lo, hi), futures):
                    outcomes[i] = (f.value.partition, f.value.offset)
                result.committed += 1
            except errors.KafkaError as e:
                name = type(e).__name__
                result.errors[name] = result.errors.get(name, 0) + 1
                result.aborted += 1
                outcomes[lo:hi] = ["aborted: " + name] * (hi - lo)
                try:
                    if isinstance(e, _FATAL):
                        raise
                    producer.abort_transaction()
                except errors.KafkaError:  # fatal: a new producer takes the id over
                    with contextlib.suppress(Exception):
                        producer.close(timeout=5)
                    producer = new_producer()
                    result.producers += 1
        injector.join()
        injector.heal()
    finally:
        with contextlib.suppress(Exception):
            producer.close(timeout=30)
        if injector.is_alive():
            injector.stop()
    result.faults = injector.summary()
    result.injector_error = None if injector.error is None else repr(injector.error)
    expected = sum(isinstance(o, tuple) for o in outcomes)
    read = read_all_kafka_python(cluster.bootstrap_servers, topic, expected_count=expected,
                                 timeout=read_timeout, isolation_level="read_committed")
    result.audit = audit(n, outcomes, read)
    return result
