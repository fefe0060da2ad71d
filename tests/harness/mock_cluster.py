"""librdkafka's mock Kafka cluster, driven through ctypes in a child process.

The mock brokers speak the real protocol on 127.0.0.1 and can inject errors, latency,
leader moves and broker outages, which a real broker can't do on demand. The cluster lives
in a child process (``_mock_cluster_child.py``) so a crash in C can't take the tests down
and librdkafka's threads stay out of the test process. Methods map 1:1 to
``rd_kafka_mock_*`` functions (see librdkafka's rdkafka_mock.h); failures raise
:class:`MockClusterError` carrying librdkafka's error name.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading

from pyprod.local_broker.processes import live, spawn, terminate

__all__ = ["MockCluster", "MockClusterError", "ApiKey", "Err"]

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mock_cluster_child.py")


class MockClusterError(RuntimeError):
    """An rd_kafka_mock_* call failed, or the mock child process died."""


class ApiKey:
    """Kafka protocol request keys most used with the mock."""
    Produce = 0
    Fetch = 1
    ListOffsets = 2
    Metadata = 3
    FindCoordinator = 10
    InitProducerId = 22
    AddPartitionsToTxn = 24
    EndTxn = 26
    ApiVersions = 18


class Err:
    """Kafka error codes most used for injection (plus librdkafka's transport error)."""
    TRANSPORT = -195  # RD_KAFKA_RESP_ERR__TRANSPORT: the mock broker disconnects
    NONE = 0
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PART = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_FOR_PARTITION = 6
    REQUEST_TIMED_OUT = 7
    MSG_SIZE_TOO_LARGE = 10
    NETWORK_EXCEPTION = 13
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    UNKNOWN_PRODUCER_ID = 59
    KAFKA_STORAGE_ERROR = 56
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    THROTTLING_QUOTA_EXCEEDED = 89


def _int(name, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
    return v


def _i16(name, v):
    return _int(name, v, -(1 << 15), (1 << 15) - 1)


def _i32(name, v):
    return _int(name, v, -(1 << 31), (1 << 31) - 1)


def _str(name, v):
    if not isinstance(v, str) or not v:
        raise TypeError(f"{name} must be a non-empty str")
    return v


class MockCluster:
    """``brokers`` mock brokers (ids 1..brokers) on 127.0.0.1 in a child process."""

    def __init__(self, brokers: int = 3, *, log_path: str | None = None):
        self.brokers = _int("brokers", brokers, 1, 64)
        self.log_path = log_path or os.path.join(tempfile.gettempdir(),
                                                 f"pyprod-mock-{os.getpid()}-{id(self)}.log")
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.bootstrap_servers: str | None = None
        self.pid: int | None = None

    # -- process ---------------------------------------------------------------------------------
    def start(self, timeout: float = 20.0) -> "MockCluster":
        self._proc = spawn([sys.executable, "-u", _CHILD, str(self.brokers)],
                           log_path=self.log_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        live.add(self)
        first = self._read(timeout)
        if not first.get("ok"):
            self.stop()
            raise MockClusterError(f"mock cluster failed to start: {first.get('error')}")
        self.bootstrap_servers = first["result"]["bootstraps"]
        self.pid = first["result"]["pid"]
        return self

    def _read(self, timeout: float) -> dict:
        # the child answers promptly; the timer only guards against a wedged child
        timer = threading.Timer(timeout, lambda: self._proc and self._proc.kill())
        timer.start()
        try:
            line = self._proc.stdout.readline()
        finally:
            timer.cancel()
        if not line:
            raise MockClusterError(f"mock cluster child exited ({self._proc.poll()})\n"
                                   + self.log_tail())
        return json.loads(line)

    def _call(self, op: str, *args, timeout: float = 20.0):
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                raise MockClusterError("mock cluster is not running")
            self._proc.stdin.write((json.dumps({"op": op, "args": list(args)}) + "\n").encode())
            self._proc.stdin.flush()
            ans = self._read(timeout)
        if not ans.get("ok"):
            raise MockClusterError(f"rd_kafka_mock_{op}{args!r}: {ans.get('error')}")
        return ans.get("result")

    def stop(self, timeout: float = 10.0) -> None:
        """Destroy the mock cluster and end the child."""
        proc, self._proc = self._proc, None
        live.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.write(b'{"op": "stop"}\n')
                proc.stdin.flush()
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()  # EOF also makes the child clean up
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                terminate(proc, 1.0, kill=True)
        with contextlib.suppress(OSError, ValueError):
            proc.stdout.close()
        if not os.environ.get("PYPROD_KEEP_KAFKA_LOGS"):
            with contextlib.suppress(OSError):
                os.unlink(self.log_path)

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> "MockCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, n: int = 50) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()[-n:]
        except OSError:
            return ""
        if not lines:
            return ""
        return "\n".join([f"----- mock cluster stderr (last {len(lines)} lines) -----", *lines])

    def listen_addresses(self) -> list[tuple[str, int]]:
        """(ip, port) of every listening TCP socket owned by the child (Linux /proc)."""
        inodes = set()
        fd_dir = f"/proc/{self.pid}/fd"
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        out = []
        for table, width in (("tcp", 8), ("tcp6", 32)):
            with contextlib.suppress(OSError), open(f"/proc/{self.pid}/net/{table}") as f:
                next(f)
                for row in f:
                    cols = row.split()
                    if cols[3] != "0A" or cols[9] not in inodes:  # 0A = LISTEN
                        continue
                    hexip, hexport = cols[1].split(":")
                    raw = bytes.fromhex(hexip)
                    if width == 8:
                        ip = ".".join(str(b) for b in raw[::-1])
                    else:  # four little-endian 32-bit words
                        words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
                        ip = ":".join(b"".join(words)[i:i + 2].hex() for i in range(0, 16, 2))
                    out.append((ip, int(hexport, 16)))
        return out

    # -- rd_kafka_mock_* -------------------------------------------------------------------------
    def cluster_bootstraps(self) -> str:
        return self._call("cluster_bootstraps")

    def topic_create(self, topic: str, partitions: int = 1, replication_factor: int = 1) -> None:
        self._call("topic_create", _str("topic", topic), _int("partitions", partitions, 1, 100000),
                   _int("replication_factor", replication_factor, 1, self.brokers))

    def topic_set_error(self, topic: str, err: int) -> None:
        self._call("topic_set_error", _str("topic", topic), _i32("err", err))

    def push_request_errors(self, api_key: int, errors) -> None:
        """Fail the next ``len(errors)`` requests of ``api_key`` cluster-wide, in order
        (rd_kafka_mock_push_request_errors_array)."""
        errs = [_i32("error", e) for e in errors]
        self._call("push_request_errors_array", _i16("api_key", api_key), errs)

    push_request_errors_array = push_request_errors

    def clear_request_errors(self, api_key: int) -> None:
        self._call("clear_request_errors", _i16("api_key", api_key))

    def broker_push_request_error_rtts(self, broker_id: int, api_key: int, pairs) -> None:
        """Per-broker (error, rtt_ms) for the next ``len(pairs)`` requests of ``api_key``."""
        flat = [[_i32("error", e), _int("rtt_ms", r, 0, 1 << 30)] for e, r in pairs]
        self._call("broker_push_request_error_rtts", _i32("broker_id", broker_id),
                   _i16("api_key", api_key), flat)

    def broker_set_down(self, broker_id: int) -> None:
        """Disconnect the broker and refuse connections (-1: all brokers). No leader change."""
        self._call("broker_set_down", _i32("broker_id", broker_id))

    def broker_set_up(self, broker_id: int) -> None:
        self._call("broker_set_up", _i32("broker_id", broker_id))

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        self._call("broker_set_rtt", _i32("broker_id", broker_id),
                   _int("rtt_ms", rtt_ms, 0, 1 << 30))

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader (-1: leaderless). Creates the topic if needed."""
        self._call("partition_set_leader", _str("topic", topic), _i32("partition", partition),
                   _i32("broker_id", broker_id))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Advertised version range of ``api_key`` (-1, -1 disables the API)."""
        self._call("set_apiversion", _i16("api_key", api_key), _i16("min_version", min_version),
                   _i16("max_version", max_version))

    def start_request_tracking(self) -> None:
        self._call("start_request_tracking")

    def stop_request_tracking(self) -> None:
        self._call("stop_request_tracking")

    def clear_requests(self) -> None:
        self._call("clear_requests")

    def get_requests(self) -> list[tuple[int, int, int]]:
        """Tracked requests as (broker_id, api_key, timestamp_us)."""
        return [tuple(r) for r in self._call("get_requests")]

    def __repr__(self) -> str:
        return f"<MockCluster brokers={self.brokers} {self.bootstrap_servers or 'not started'}>"
