"""The test harness (not shipped in the wheel): brokers with secured listeners (``security``)
and an MIT Kerberos KDC (``kdc``), tansu, librdkafka's mock cluster, independent read-back
(``readback``), and for faults ``hostile_broker``, ``kafka_proxy``, ``fault_injector``/
``fault_run`` and ``fuzz``/``fuzz_targets``; ``forked`` runs a test's code in a forked child;
``windows_like`` hides POSIX from our code (the wheel test step's portability check);
``fixtures`` holds the pytest fixtures; ``kafka_cluster`` runs Apache Kafka on more nodes and
inflicts node faults (on the package's one-node :mod:`pyprod.local_broker`).

Importable as ``tests.harness`` with the repository root on ``sys.path`` (pytest's
``pythonpath``; bench/ and scripts/ add it themselves).
"""
