"""The one place a producer's config is read: each of its parts (Metadata, NetworkClient,
Sender, RecordAccumulator, SendPath and BatchSendPath) gets named settings from it here. The
producer builds its parts with these, and so do the kernel tests."""
import functools

import kcore
from pyprod.connection import connection_settings, socket_options
from pyprod.metadata import Metadata
from pyprod.network_client import NetworkClient
from pyprod.sasl_authenticator import SaslClientAuthenticator
from pyprod.sender import Sender
from pyprod.ssl_factory import create_ssl_context


def _serializer(obj):
    """A (topic, headers, data) -> bytes callable from a kafka-python serializer or callable."""
    if obj is None:
        return None
    method = getattr(obj, "serialize", None)
    if method is None:
        return lambda topic, headers, data: obj(data)

    def serialize(topic, headers, data):
        try:
            return method(topic, headers, data)
        except TypeError:
            return method(topic, data)
    return serialize


def metadata_for(config):
    return Metadata(config["bootstrap"], retry_backoff_ms=config["retry_backoff_ms"],
                    metadata_max_age_ms=config["metadata_max_age_ms"],
                    metadata_max_idle_ms=config["metadata_max_idle_ms"])


def network_client_for(config, metadata):
    sasl = config["security_protocol"].startswith("SASL_")
    return NetworkClient(
        metadata, client_id=config["client_id"], request_timeout_ms=config["request_timeout_ms"],
        max_in_flight_requests_per_connection=config["max_in_flight_requests_per_connection"],
        connections_max_idle_ms=config["connections_max_idle_ms"],
        reconnect_backoff_ms=config["reconnect_backoff_ms"],
        reconnect_backoff_max_ms=config["reconnect_backoff_max_ms"],
        receive_message_max_bytes=config["receive_message_max_bytes"],
        socket_options=socket_options(config["socket_options"], config["send_buffer_bytes"],
                                      config["receive_buffer_bytes"]),
        ssl_context=create_ssl_context(config),
        sasl_authenticator=functools.partial(SaslClientAuthenticator, config) if sasl else None,
        allow_auto_create_topics=config["allow_auto_create_topics"],
        connection_options=connection_settings(config))


def sender_for(config, client, metadata, accumulator, txn_partitions, metrics,
               sender_loop=kcore.SenderLoop):
    return Sender(
        client, metadata, accumulator, client_id=config["client_id"], acks=config["acks"],
        retries=config["retries"], request_timeout_ms=config["request_timeout_ms"],
        max_request_size=config["max_request_size"],
        retry_backoff_ms=config["retry_backoff_ms"],
        delivery_timeout_ms=config["delivery_timeout_ms"],
        transaction_timeout_ms=config["transaction_timeout_ms"],
        max_in_flight_requests_per_connection=config["max_in_flight_requests_per_connection"],
        txn_partitions=txn_partitions, metrics=metrics, sender_loop=sender_loop,
        transactional_id=config["transactional_id"])


def accumulator_settings(config):
    """What the RecordAccumulator reads."""
    return dict(batch_size=config["batch_size"], batch_max_size=config["batch_max_size"],
                linger_ms=config["linger_ms"],
                buffer_memory=config["buffer_memory"], compression_type=config["compression_type"],
                delivery_timeout_ms=config["delivery_timeout_ms"],
                retry_backoff_ms=config["retry_backoff_ms"])


def send_settings(config, serialize=True):
    """What SendPath and BatchSendPath read; serialize=False: records come serialized."""
    return dict(
        key_serializer=_serializer(config["key_serializer"]) if serialize else None,
        value_serializer=_serializer(config["value_serializer"]) if serialize else None,
        max_block_ms=config["max_block_ms"], max_request_size=config["max_request_size"],
        buffer_memory=config["buffer_memory"])
