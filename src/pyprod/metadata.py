"""Metadata: the producer's view of the cluster, shared by caller threads and the Sender thread.

Java's (Producer)Metadata: ``cluster`` is an immutable Cluster swapped whole on each update;
``version`` bumps on every successful update, and caller threads in send() wait for a bump with
await_update(). The Sender thread's NetworkClient asks time_to_next_update() and sends the
MetadataRequest. Topics the producer uses expire after metadata_max_idle_ms without a send.
All times are monotonic milliseconds (now_ms()).
"""
import threading
import time

from kcore import now_ms
from pyprod import errors
from pyprod.cluster import Cluster

_NEVER = -(1 << 62)  # a "last refresh" long before any monotonic now


class Metadata:
    def __init__(self, bootstrap, *, retry_backoff_ms, metadata_max_age_ms, metadata_max_idle_ms):
        self.refresh_backoff_ms = int(retry_backoff_ms)
        self.max_age_ms = int(metadata_max_age_ms)
        self.max_idle_ms = int(metadata_max_idle_ms)
        self._cond = threading.Condition(threading.Lock())
        self.cluster = Cluster.bootstrap(bootstrap)
        self.version = 0
        self._topics = {}          # topic -> expiry (now_ms + max_idle_ms at last add_topic)
        self._new_topics = set()   # added and not yet seen in a response
        self._need_update = True
        self._request_version = 0  # bumps on each request_update / new topic
        self._last_refresh_ms = _NEVER
        self._last_success_ms = _NEVER
        self._closed = False
        self.fatal_error = None    # a refused authentication, until the next good update
        self.update_due_ms = _NEVER  # when an update is due (NetworkPoll reads it each poll)
        self._update_listeners = []  # fn(version), after each update, before waiters wake
        self._due()

    def add_update_listener(self, fn):
        """Call fn(version) after each update (under the lock, before send()'s waiters wake)."""
        with self._cond:
            self._update_listeners.append(fn)

    # -- caller threads --

    def add_topic(self, topic, now=None):
        """Mark topic as used now; a new topic asks for an update at once. Returns True if new."""
        topics = self._topics
        if topic in topics:  # hot path: refresh the expiry without the lock
            topics[topic] = (now_ms() if now is None else now) + self.max_idle_ms
            return False
        if not isinstance(topic, str) or not topic:
            raise TypeError("topic must be a non-empty str, got %r" % (topic,))
        with self._cond:
            now = now_ms() if now is None else now
            new = topic not in topics
            topics[topic] = now + self.max_idle_ms
            if new:
                self._new_topics.add(topic)
                self._need_update = True
                self._request_version += 1
                self._last_refresh_ms = _NEVER  # Java: new topics skip the refresh backoff
                self._due()
            return new

    def topics(self):
        return list(self._topics)

    def request_update(self):
        """Ask for a refresh as soon as the backoff allows; returns the current version."""
        with self._cond:
            self._need_update = True
            self._request_version += 1
            self._due()
            return self.version

    def update_requested(self):
        return self._need_update

    def await_update(self, last_version, timeout_ms):
        """Wait until version > last_version; False on timeout. Raises if closed, and raises
        the fatal error (a refused authentication) if one is set."""
        if timeout_ms < 0:
            raise ValueError("timeout_ms must be >= 0")
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            while self.version <= last_version:
                if self._closed:
                    raise errors.KafkaError("Requested metadata update after close")
                if self.fatal_error is not None:
                    raise self.fatal_error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self):
        return self._closed

    # -- the Sender thread (NetworkClient) --

    def time_to_next_update(self, now):
        """0 if an update is due now; else ms until expiry or the end of the refresh backoff."""
        return max(self.update_due_ms - now, 0)

    def _due(self):  # (with the lock) update_due_ms from the state it depends on
        due = self._last_refresh_ms + self.refresh_backoff_ms
        if not self._need_update:
            due = max(due, self._last_success_ms + self.max_age_ms)
        self.update_due_ms = due

    def metadata_request(self, now):
        """(topics, request_version) for the next MetadataRequest; drops expired topics."""
        with self._cond:
            for topic, expiry in list(self._topics.items()):
                if expiry <= now and topic not in self._new_topics:
                    del self._topics[topic]
            return list(self._topics), self._request_version

    def update(self, cluster, now, request_version=None):
        """Install a new Cluster from a metadata response; bumps version and wakes waiters.

        ``request_version`` (from metadata_request) keeps an update requested if request_update()
        was called after that request was built. Topic/partition errors that mean stale metadata
        (invalid_metadata, no leader) also keep an update requested, as Java does.
        """
        with self._cond:
            cluster = self._keep_newer_epochs(cluster)
            self.cluster = cluster
            self.version += 1
            self.fatal_error = None
            self._last_refresh_ms = self._last_success_ms = now
            self._new_topics.difference_update(cluster.topic_errors)
            self._new_topics.difference_update(cluster.topics(exclude_internal_topics=False))
            again = request_version is not None and request_version < self._request_version
            again = again or bool(self._new_topics) or _needs_retry(cluster)
            self._need_update = again
            self._due()
            for fn in self._update_listeners:
                fn(self.version)
            self._cond.notify_all()

    def set_fatal_error(self, error):
        """Java's Metadata.fatalError: waiters raise ``error`` until an update succeeds."""
        with self._cond:
            self.fatal_error = error
            self._cond.notify_all()

    def failed_update(self, now):
        with self._cond:
            self._last_refresh_ms = now
            self._due()

    def _keep_newer_epochs(self, new):
        """Java: a partition whose leader epoch went backwards keeps the cached (newer) info."""
        old = self.cluster
        if old.is_bootstrap:
            return new
        stale = {}
        for topic in new.topics(exclude_internal_topics=False):
            old_parts = old.partitions_info_for_topic(topic)
            if not old_parts:
                continue
            parts = new.partitions_info_for_topic(topic)
            for p, info in parts.items():
                prev = old_parts.get(p)
                if prev is not None and prev.leader_epoch is not None and \
                        info.leader_epoch is not None and \
                        0 <= info.leader_epoch < prev.leader_epoch:
                    stale.setdefault(topic, parts)[p] = prev
        if not stale:
            return new
        topics = {t: (stale.get(t) or new.partitions_info_for_topic(t))
                  for t in new.topics(exclude_internal_topics=False)}
        return Cluster({b.node_id: b for b in new.brokers()}, topics, new.cluster_id,
                       new.controller_id, new.unauthorized_topics, new.invalid_topics,
                       new.topic_errors, new.internal_topics)


def _needs_retry(cluster):
    for err in cluster.topic_errors.values():
        if getattr(err, "invalid_metadata", False):
            return True
    for topic in cluster.topics(exclude_internal_topics=False):
        parts = cluster.partitions_for_topic(topic)
        avail = cluster.available_partitions_for_topic(topic)
        if parts is not None and avail is not None and len(avail) < len(parts):
            return True
    return False
