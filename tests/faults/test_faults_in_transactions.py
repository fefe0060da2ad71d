"""Faults inside transactions and over SASL_SSL (issue 43, part 3): the fault rotation of
test_faults_at_scale (leader SIGKILL, SIGSTOP, graceful restart, controller SIGKILL) while
pyprod commits transactions on the 3-node cluster, and over SASL_SSL (SCRAM-SHA-256) on a
one-node secured broker with idempotence and with transactions. Read back by kafka-python
(read_committed): every committed record once, in key order, at its acknowledged offset; no
aborted record visible; every future completed, typed. PYPROD_FAULT_SEED picks the rotation."""
import os

from tests.harness.fault_injector import KINDS
from tests.harness.fault_run import run_under_faults
from tests.harness.txn_fault_run import run_transactions_under_faults

SEED = int(os.environ.get("PYPROD_FAULT_SEED", "12"))


def _assert_transactions_exact(result):
    a, where = result.audit, "seed %d; %r" % (SEED, result)
    print("transactions under faults: %d committed, %d aborted %s, %d producers; faults %s"
          % (result.committed, result.aborted, result.errors, result.producers, result.faults))
    assert result.injector_error is None, where
    assert a.problems() == [], where
    assert a.failed_but_written == 0, "an aborted record is visible read_committed: " + where
    assert result.committed > 0 and a.acked == result.committed * 100, where


def test_transactions_through_faults(kafka3, topic):
    name = topic(6, cluster=kafka3, replication_factor=3, configs={"min.insync.replicas": "2"})
    result = run_transactions_under_faults(kafka3, name, 20_000, faults=8, seed=SEED)
    assert set(result.faults["by_kind"]) == set(KINDS), result
    _assert_transactions_exact(result)


def test_faults_over_sasl_ssl(kafka_secure_factory):
    """One node: each fault takes the whole cluster away; the producer reconnects through TLS
    and SCRAM each time, and delivers exactly once."""
    cluster = kafka_secure_factory(kerberos=False)
    config = cluster.client_config("SASL_SSL", mechanism="SCRAM-SHA-256")
    bootstrap = config.pop("bootstrap_servers")

    name = cluster.create_topic("idempotent-faults", 6)
    run = run_under_faults("pyprod", cluster, name, 20_000, faults=4, min_isr=1, seed=SEED,
                           bootstrap=bootstrap, config=config)
    a = run.audit
    assert run.injector_error is None and run.fault_summary["applied"] == 4, run.as_dict()
    assert a.problems() == [] and a.acked == 20_000, a.as_dict()

    name = cluster.create_topic("transaction-faults", 6)
    result = run_transactions_under_faults(cluster, name, 10_000, faults=4, min_isr=1,
                                           seed=SEED, bootstrap=bootstrap, config=config)
    _assert_transactions_exact(result)
