"""Child process owning a librdkafka mock cluster (see mock_cluster.py).

Run as a script (stdlib only, so it works without pyprod on sys.path). Protocol: one JSON
object per line. The first line written is ``{"ok": true, "result": {"bootstraps": ...}}``;
then each request ``{"op": NAME, "args": [...]}`` on stdin gets one reply
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}`` on stdout.
EOF on stdin (the parent went away) destroys the cluster and exits.
"""

import ctypes
import glob
import json
import os
import sys

c_void_p, c_char_p, c_int, c_int16, c_int32, c_int64, c_size_t = (
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int16, ctypes.c_int32,
    ctypes.c_int64, ctypes.c_size_t)


def find_librdkafka():
    """The librdkafka shipped in confluent-kafka's wheel (or $PYPROD_LIBRDKAFKA)."""
    if os.environ.get("PYPROD_LIBRDKAFKA"):
        return os.environ["PYPROD_LIBRDKAFKA"]
    import importlib.util

    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("confluent-kafka is not installed")
    pkg = list(spec.submodule_search_locations)[0]
    site = os.path.dirname(pkg)
    patterns = [os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),  # auditwheel
                os.path.join(pkg, ".dylibs", "librdkafka*.dylib"),             # delocate
                os.path.join(site, "confluent_kafka.libs", "librdkafka*.dll"),  # delvewheel
                os.path.join(pkg, "librdkafka*.dll")]
    for pat in patterns:
        hits = sorted(glob.glob(pat))
        if hits:
            return hits[0]
    # a confluent-kafka built against a system librdkafka: ask the loader after importing it
    import confluent_kafka  # noqa: F401

    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "librdkafka" in os.path.basename(path):
                    return path
    except OSError:
        pass
    import ctypes.util

    found = ctypes.util.find_library("rdkafka")
    if not found:
        raise RuntimeError("librdkafka shared library not found")
    return found


def bind(lib):
    sigs = {
        "rd_kafka_conf_new": (c_void_p, []),
        "rd_kafka_conf_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]),
        "rd_kafka_new": (c_void_p, [c_int, c_void_p, c_char_p, c_size_t]),
        "rd_kafka_destroy": (None, [c_void_p]),
        "rd_kafka_err2name": (c_char_p, [c_int]),
        "rd_kafka_mock_cluster_new": (c_void_p, [c_void_p, c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [c_void_p]),
        "rd_kafka_mock_cluster_bootstraps": (c_char_p, [c_void_p]),
        "rd_kafka_mock_topic_create": (c_int, [c_void_p, c_char_p, c_int, c_int]),
        "rd_kafka_mock_topic_set_error": (None, [c_void_p, c_char_p, c_int]),
        "rd_kafka_mock_push_request_errors_array":
            (None, [c_void_p, c_int16, c_size_t, ctypes.POINTER(c_int)]),
        "rd_kafka_mock_clear_request_errors": (None, [c_void_p, c_int16]),
        "rd_kafka_mock_broker_set_down": (c_int, [c_void_p, c_int32]),
        "rd_kafka_mock_broker_set_up": (c_int, [c_void_p, c_int32]),
        "rd_kafka_mock_broker_set_rtt": (c_int, [c_void_p, c_int32, c_int]),
        "rd_kafka_mock_partition_set_leader": (c_int, [c_void_p, c_char_p, c_int32, c_int32]),
        "rd_kafka_mock_set_apiversion": (c_int, [c_void_p, c_int16, c_int16, c_int16]),
        "rd_kafka_mock_start_request_tracking": (None, [c_void_p]),
        "rd_kafka_mock_stop_request_tracking": (None, [c_void_p]),
        "rd_kafka_mock_clear_requests": (None, [c_void_p]),
        "rd_kafka_mock_get_requests": (ctypes.POINTER(c_void_p), [c_void_p, ctypes.POINTER(c_size_t)]),
        "rd_kafka_mock_request_id": (c_int32, [c_void_p]),
        "rd_kafka_mock_request_api_key": (c_int16, [c_void_p]),
        "rd_kafka_mock_request_timestamp": (c_int64, [c_void_p]),
        "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(c_void_p), c_size_t]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    # variadic (err, rtt_ms) pairs: declared without argtypes, called with explicit c_ints
    lib.rd_kafka_mock_broker_push_request_error_rtts.restype = c_int
    return lib


class Child:
    def __init__(self, brokers):
        self.lib = bind(ctypes.CDLL(find_librdkafka()))
        lib = self.lib
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for k, v in (("client.id", "pyprod-mock-owner"), ("log_level", "4")):
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), err, 512) != 0:
                raise RuntimeError(err.value.decode())
        self.rk = lib.rd_kafka_new(0, conf, err, 512)  # RD_KAFKA_PRODUCER; owns conf
        if not self.rk:
            raise RuntimeError("rd_kafka_new: " + err.value.decode())
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.mc:
            raise RuntimeError("rd_kafka_mock_cluster_new failed")

    def close(self):
        if self.mc:
            self.lib.rd_kafka_mock_cluster_destroy(self.mc)
            self.mc = None
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None

    def _err(self, code):
        if code:
            raise RuntimeError(f"{self.lib.rd_kafka_err2name(code).decode()} ({code})")

    # ops: names mirror rd_kafka_mock_<name>
    def cluster_bootstraps(self):
        return self.lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def topic_create(self, topic, partitions, replication_factor):
        self._err(self.lib.rd_kafka_mock_topic_create(self.mc, topic.encode(), partitions,
                                                      replication_factor))

    def topic_set_error(self, topic, err):
        self.lib.rd_kafka_mock_topic_set_error(self.mc, topic.encode(), err)

    def push_request_errors_array(self, api_key, errors):
        arr = (c_int * len(errors))(*errors)
        self.lib.rd_kafka_mock_push_request_errors_array(self.mc, api_key, len(errors), arr)

    def clear_request_errors(self, api_key):
        self.lib.rd_kafka_mock_clear_request_errors(self.mc, api_key)

    def broker_push_request_error_rtts(self, broker_id, api_key, pairs):
        flat = [c_int(int(x)) for pair in pairs for x in pair]
        self._err(self.lib.rd_kafka_mock_broker_push_request_error_rtts(
            c_void_p(self.mc), c_int32(broker_id), c_int16(api_key), c_size_t(len(pairs)), *flat))

    def broker_set_down(self, broker_id):
        self._err(self.lib.rd_kafka_mock_broker_set_down(self.mc, broker_id))

    def broker_set_up(self, broker_id):
        self._err(self.lib.rd_kafka_mock_broker_set_up(self.mc, broker_id))

    def broker_set_rtt(self, broker_id, rtt_ms):
        self._err(self.lib.rd_kafka_mock_broker_set_rtt(self.mc, broker_id, rtt_ms))

    def partition_set_leader(self, topic, partition, broker_id):
        self._err(self.lib.rd_kafka_mock_partition_set_leader(self.mc, topic.encode(),
                                                              partition, broker_id))

    def set_apiversion(self, api_key, min_version, max_version):
        self._err(self.lib.rd_kafka_mock_set_apiversion(self.mc, api_key, min_version,
                                                        max_version))

    def start_request_tracking(self):
        self.lib.rd_kafka_mock_start_request_tracking(self.mc)

    def stop_request_tracking(self):
        self.lib.rd_kafka_mock_stop_request_tracking(self.mc)

    def clear_requests(self):
        self.lib.rd_kafka_mock_clear_requests(self.mc)

    def get_requests(self):
        n = c_size_t(0)
        reqs = self.lib.rd_kafka_mock_get_requests(self.mc, ctypes.byref(n))
        if not reqs:
            return []
        lib = self.lib
        out = [[lib.rd_kafka_mock_request_id(reqs[i]), lib.rd_kafka_mock_request_api_key(reqs[i]),
                lib.rd_kafka_mock_request_timestamp(reqs[i])] for i in range(n.value)]
        lib.rd_kafka_mock_request_destroy_array(reqs, n.value)
        return out


OPS = {"cluster_bootstraps", "topic_create", "topic_set_error", "push_request_errors_array",
       "clear_request_errors", "broker_push_request_error_rtts", "broker_set_down",
       "broker_set_up", "broker_set_rtt", "partition_set_leader", "set_apiversion",
       "start_request_tracking", "stop_request_tracking", "clear_requests", "get_requests"}


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    brokers = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    try:
        child = Child(brokers)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    reply({"ok": True, "result": {"bootstraps": child.cluster_bootstraps(), "pid": os.getpid()}})
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                op = req["op"]
                if op == "stop":
                    reply({"ok": True, "result": None})
                    break
                if op not in OPS:
                    raise ValueError(f"unknown op {op!r}")
                reply({"ok": True, "result": getattr(child, op)(*req.get("args", []))})
            except Exception as e:  # noqa: BLE001 - reported to the parent
                reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
    finally:
        child.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
