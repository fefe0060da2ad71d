"""pyprod.aio without a broker: aiokafka's constructor checks (exact ValueError messages and
warnings), the error rule with and without aiokafka, RecordFuture as an asyncio future, and
BatchBuilder's limits."""
import asyncio
import subprocess
import sys
import textwrap
import threading

import pytest

import kcore
from pyprod import errors
from pyprod.aio import AIOKafkaProducer, IllegalOperation, ProducerClosed, ProducerFenced
from pyprod.aio.errors import translate

aiokafka_errors = pytest.importorskip("aiokafka.errors")


def in_loop(fn):
    async def main():
        return fn()
    return asyncio.run(main())


@pytest.mark.parametrize("kwargs, message", [
    (dict(acks=122), "Invalid ACKS parameter"),
    (dict(compression_type="my_custom"), "Invalid compression type!"),
    (dict(acks=1, enable_idempotence=True), "acks=1 not supported if enable_idempotence=True"),
    (dict(acks=0, transactional_id="t"), "acks=0 not supported if enable_idempotence=True"),
    (dict(security_protocol="SOME"), "`security_protocol` should be SSL or PLAINTEXT"),
    (dict(security_protocol="SSL"), "`ssl_context` is mandatory if security_protocol=='SSL'"),
    (dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="X"),
     "only `PLAIN`, `GSSAPI`, `SCRAM-SHA-256`, `SCRAM-SHA-512` and `OAUTHBEARER`sasl_mechanism "
     "are supported at the moment"),
    (dict(security_protocol="SASL_PLAINTEXT"),
     "sasl_plain_username and sasl_plain_password required for PLAIN sasl"),
])
def test_aiokafkas_value_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        in_loop(lambda: AIOKafkaProducer(**kwargs))
    assert str(info.value) == message


def test_warnings_and_loop_rules():
    with pytest.raises(RuntimeError, match="created within an async function"):
        AIOKafkaProducer()
    with pytest.deprecated_call(match="`api_version` parameter has been deprecated"):
        p = in_loop(lambda: AIOKafkaProducer(api_version="2.0"))
    p._closed = True
    loop = asyncio.new_event_loop()
    with pytest.deprecated_call(match="`loop` parameter has been deprecated"):
        p = AIOKafkaProducer(loop=loop)
    with pytest.warns(ResourceWarning, match="Unclosed AIOKafkaProducer"):
        loop.set_exception_handler(lambda loop, ctx: None)
        del p
        import gc
        gc.collect()
    loop.close()
    with pytest.raises(TypeError, match="unexpected keyword argument 'lingerms'"):
        in_loop(lambda: AIOKafkaProducer(lingerms=5))


async def _closed_producer():
    p = AIOKafkaProducer()
    await p.stop()
    return p


def test_closed_and_not_transactional():
    async def main():
        p = await _closed_producer()
        with pytest.raises(ProducerClosed):
            await p.send("t", b"v")
        with pytest.raises(IllegalOperation, match="configure transaction_id"):
            await p.begin_transaction()
        with pytest.raises(IllegalOperation):
            async with p.transaction():
                pass
    asyncio.run(main())


def test_error_rule_with_aiokafka():
    for ours, theirs in [(ProducerClosed(), aiokafka_errors.ProducerClosed),
                         (ProducerFenced(), aiokafka_errors.ProducerFenced),
                         (IllegalOperation("x"), aiokafka_errors.IllegalOperation)]:
        assert isinstance(ours, theirs)
        assert isinstance(ours, getattr(errors, type(ours).__name__))
    assert not isinstance(IllegalOperation("x"), (errors.KafkaError,
                                                  aiokafka_errors.KafkaError))
    for exc, theirs in [(errors.MessageSizeTooLargeError("big"),
                         aiokafka_errors.MessageSizeTooLargeError),
                        (errors.OutOfOrderSequenceNumberError(),
                         aiokafka_errors.OutOfOrderSequenceNumber),
                        (errors.NoBrokersAvailable(), aiokafka_errors.KafkaConnectionError),
                        (errors.KafkaTimeoutError(), aiokafka_errors.KafkaTimeoutError),
                        (errors.BatchDeliveryError([], 0), aiokafka_errors.KafkaError)]:
        out = translate(exc)
        assert isinstance(out, theirs) and isinstance(out, type(exc))
        assert str(out) == str(exc) and out.args == exc.args
    fenced = translate(errors.InvalidProducerEpochError("epoch"))
    assert isinstance(fenced, errors.ProducerFenced)
    assert isinstance(fenced, aiokafka_errors.ProducerFenced)


def test_error_rule_without_aiokafka():
    code = textwrap.dedent("""\
        import sys
        sys.modules["aiokafka"] = None  # not installed
        from pyprod import errors
        from pyprod.aio import AIOKafkaProducer, ProducerClosed
        from pyprod.aio.errors import translate
        assert ProducerClosed is errors.ProducerClosed
        e = errors.MessageSizeTooLargeError("big")
        assert translate(e) is e
        assert type(translate(errors.ProducerFencedError())) is errors.ProducerFenced
        print("ok")
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_record_future_is_an_asyncio_future(k, futures_of):
    async def main():
        loop = asyncio.get_running_loop()
        result = k.ProduceRequestResult(k.TopicPartition("t", 1))
        kf = [k.FutureRecordMetadata(result, i, 1000, 1, 2, 0) for i in range(3)]
        futures = futures_of(loop)
        a, b, c = (futures.wrap(f) for f in kf)
        assert asyncio.isfuture(a) and not a.done()
        with pytest.raises(asyncio.InvalidStateError):
            a.result()
        called = []
        b.add_done_callback(called.append)
        c.cancel()
        threading.Timer(0.02, result.done, (40, 99)).start()
        done, _ = await asyncio.wait([a, b], timeout=5)
        assert done == {a, b} and called == [b]
        meta = await asyncio.wait_for(a, 1)
        assert meta.offset == 40 and meta.partition == 1 and meta.timestamp == 99
        assert meta.timestamp_type == 1 and meta.log_start_offset is None
        assert (await b).offset == 41
        assert c.cancelled()
        with pytest.raises(asyncio.CancelledError):
            await c
        failed = k.ProduceRequestResult(k.TopicPartition("t", 0))
        f = futures.wrap(k.FutureRecordMetadata(failed, 0, 0, 0, 0, 0))
        failed.done(-1, -1, errors.InvalidProducerEpochError())
        assert isinstance(f.exception(), ProducerFenced)
        no_ack = futures_of(loop, no_ack=True).wrap(kf[0])
        assert await no_ack is None
    asyncio.run(main())


def test_batch_builder_limits():
    async def main():
        p = AIOKafkaProducer(max_batch_size=1000, value_serializer=str.encode)
        batch = p.create_batch()
        assert batch.record_count() == 0
        first = batch.append(key=None, value="x" * 2000, timestamp=None)  # first: always fits
        assert first.offset == 0 and first.size > 2000
        assert batch.append(key=None, value="y", timestamp=5) is None and batch.closed()
        other = p.create_batch()
        n = 0
        while other.append(key=b"k", value="v" * 10, timestamp=7) is not None:
            n += 1
        assert 10 < n == other.record_count() and other.size() <= 1000
        with pytest.raises(TypeError):
            p.create_batch().append(key="str key", value="v", timestamp=None)
        await p.stop()
    asyncio.run(main())


def test_kcore_is_not_asked_for_asyncio_until_an_await():
    code = ("import sys, pyprod, kcore; assert 'asyncio' not in sys.modules, 'asyncio loaded';"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
    assert kcore.FutureRecordMetadata.__await__


def test_configuration_for_pyprod():
    from pyprod.aio import config as aio_config

    class Provider:  # aiokafka's AbstractTokenProvider: an async token()
        async def token(self):
            return "tok"

        def extensions(self):
            return {"x": "1"}

    async def main():
        c = dict(aio_config.DEFAULTS, transactional_id="t", max_batch_size=1234, linger_ms=7,
                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                 sasl_oauth_token_provider=Provider())
        acks = aio_config.check(c)
        out = aio_config.producer_config(c, acks, None, asyncio.get_running_loop())
        assert (out["acks"], out["enable_idempotence"], out["batch_size"]) == (-1, True, 1234)
        assert out["max_block_ms"] == 40000 and out["delivery_timeout_ms"] >= 40007
        assert out["transaction_timeout_ms"] == 60000 and out["partitioner"] is None
        provider = out["sasl_oauth_token_provider"]
        token = await asyncio.get_running_loop().run_in_executor(None, provider.token)
        assert (token, provider.extensions()) == ("tok", {"x": "1"})
        plain = dict(aio_config.DEFAULTS)
        assert aio_config.check(plain) == 1 and plain["transaction_timeout_ms"] == 2 ** 31 - 1
        plain_out = aio_config.producer_config(plain, 1, None, None)
        assert "sasl_mechanism" not in plain_out
        assert "max_in_flight_requests_per_connection" not in plain_out  # 5, one batch a partition
        assert "max_in_flight_requests_per_connection" not in out  # idempotent: 5 keep order
    asyncio.run(main())
