"""Fixtures of every kernel test."""
from types import SimpleNamespace

import cramjam
import pytest


@pytest.fixture(autouse=True)
def kafka_decoders(monkeypatch):
    """kafka-python decodes snappy/lz4/zstd only with optional packages (lz4 and zstandard have
    no free-threaded wheels): stand in cramjam for the raw codecs that are missing
    (kafka-python still parses the xerial snappy framing)."""
    try:
        from kafka import codec as kafka_codec
        from kafka.record import default_records
    except ImportError:
        return
    if not kafka_codec.has_snappy():
        monkeypatch.setattr(kafka_codec, "snappy", SimpleNamespace(
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b)))))
    if not kafka_codec.has_lz4():
        monkeypatch.setattr(kafka_codec, "lz4", SimpleNamespace())
        monkeypatch.setattr(default_records, "lz4_decode",
                            lambda b: bytes(cramjam.lz4.decompress(bytes(b))))
    if not kafka_codec.has_zstd():
        monkeypatch.setattr(kafka_codec, "zstd", SimpleNamespace())
        monkeypatch.setattr(default_records, "zstd_decode",
                            lambda b: bytes(cramjam.zstd.decompress(bytes(b))))
