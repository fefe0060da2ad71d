"""The exactly-once streaming sink's checkpoint store: one JSON file per micro-batch under
``<checkpointLocation>/pyprod/`` (the commit decisions of pyprod.spark.transactions), read and
written from the driver's Python: a local (or NFS) path, a file: URI, or a URI pyarrow.fs opens
(s3://, gs://, hdfs://, abfs://). The directory keeps the newest KEEP_ENTRIES entries."""
from __future__ import annotations

import json
import os
import uuid
from urllib.parse import unquote, urlparse

ENTRY_DIR = "pyprod"        # under the checkpoint
KEEP_ENTRIES = 20


class ExactlyOnceError(RuntimeError):
    """An exactly-once write could not be finished as it should (the message says what is
    visible and what to do). pyprod.spark.transactions re-exports it."""


class _Files:
    """Small files under a directory: a local path or file: URI (os), or a URI pyarrow.fs
    opens (s3a:// and s3n:// read as s3://)."""

    def __init__(self, location):
        parsed = urlparse(location)
        scheme = parsed.scheme.lower()
        self.location = location
        if scheme in ("", "file") or len(scheme) == 1:  # a path (C: is a drive, not a scheme)
            path = unquote(parsed.path) if scheme == "file" else location
            self.fs, self.root = None, os.path.abspath(path)
            return
        try:
            import pyarrow.fs as pafs
        except ImportError:
            raise ExactlyOnceError(
                "pyprod.spark: exactly-once needs pyarrow to reach the checkpoint %r from the "
                "driver" % (location,)) from None
        uri = "s3" + location[len(scheme):] if scheme in ("s3a", "s3n") else location
        self._pafs = pafs
        self.fs, self.root = pafs.FileSystem.from_uri(uri)

    def _path(self, *names):
        if self.fs is None:
            return os.path.join(self.root, *names)
        return "/".join((self.root.rstrip("/"),) + names)

    def read(self, *names):
        path = self._path(*names)
        try:
            if self.fs is None:
                with open(path, "rb") as f:
                    return f.read()
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, data, *names):
        """Write a file in one step: a reader sees the old content or the new, whole."""
        path = self._path(*names)
        tmp = self._path(*names[:-1], ".%s.%s.tmp" % (names[-1], uuid.uuid4().hex[:8]))
        if self.fs is None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            if os.name == "posix":  # the rename made durable; Windows opens no directory
                fd = os.open(os.path.dirname(path), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            return
        self.fs.create_dir(self._path(*names[:-1]), recursive=True)
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        self.fs.move(tmp, path)

    def list(self, *names):
        path = self._path(*names)
        if self.fs is None:
            try:
                return os.listdir(path)
            except FileNotFoundError:
                return []
        infos = self.fs.get_file_info(self._pafs.FileSelector(path, allow_not_found=True))
        return [i.base_name for i in infos]

    def delete(self, *names):
        path = self._path(*names)
        try:
            if self.fs is None:
                os.remove(path)
            else:
                self.fs.delete_file(path)
        except FileNotFoundError:
            pass


class SinkLog:
    """The sink's commit decisions, one JSON file per micro-batch under the checkpoint."""

    def __init__(self, checkpoint):
        self.checkpoint = checkpoint
        self.files = _Files(checkpoint)

    def query_id(self):
        """The query id in Spark's ``<checkpoint>/metadata`` (written when the query starts)."""
        data = self.files.read("metadata")
        if data is None:
            raise ExactlyOnceError(
                "pyprod.spark: exactly-once cannot see Spark's checkpoint at %r from the "
                "driver (no 'metadata' file at %s): give checkpointLocation as a path or URI "
                "the driver's Python can open (a local or NFS path, file:, s3://, hdfs://...; "
                "a bare path on another default file system such as HDFS is not)"
                % (self.checkpoint, self.files._path("metadata")))
        try:
            return json.loads(data.decode("utf-8").splitlines()[0])["id"]
        except (ValueError, KeyError, IndexError) as e:
            raise ExactlyOnceError("pyprod.spark: cannot read the query id in %s: %r"
                                   % (self.files._path("metadata"), e)) from None

    def batch_ids(self):
        out = []
        for name in self.files.list(ENTRY_DIR):
            stem, dot, ext = name.partition(".")
            if dot and ext == "json" and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def get(self, batch_id):
        data = self.files.read(ENTRY_DIR, "%d.json" % batch_id)
        return None if data is None else json.loads(data.decode("utf-8"))

    def entry_path(self, batch_id):
        return self.files._path(ENTRY_DIR, "%d.json" % batch_id)

    def put(self, entry):
        data = json.dumps(entry, sort_keys=True).encode("utf-8")
        self.files.write(data, ENTRY_DIR, "%d.json" % entry["batch_id"])

    def prune(self, keep=KEEP_ENTRIES):
        for batch_id in self.batch_ids()[:-keep]:
            self.files.delete(ENTRY_DIR, "%d.json" % batch_id)

    def latest(self):
        ids = self.batch_ids()
        return self.get(ids[-1]) if ids else None
