"""RecordFuture: what AIOKafkaProducer.send() returns, an asyncio future over a kcore future.

aiokafka's send() returns an asyncio.Future; this is one by duck type (``asyncio.isfuture`` is
true: await, asyncio.wait / gather / wait_for, add_done_callback, result(), cancel() all work).
It is kcore's AioRecordFuture (compiled in kcore/future.pyx, its pure twin under
PYPROD_NO_EXTENSIONS=1): it registers with the record's batch only when somebody waits on it
(await or add_done_callback), its loop is woken through kcore's batched loop calls (one wakeup
per Sender pass) whose loop callback runs the records' callbacks itself, and callbacks added to
done futures run soon in one loop callback: gathering a window of acknowledged records makes no
Handle per record. A record nobody waits for costs this object and nothing else.

done() reads the batch's state, which the Sender thread sets: it turns true as soon as the
record is acknowledged; callbacks run on the loop. Cancelling it does not stop the record
(aiokafka's rule: cancel the send() call instead).
"""
from __future__ import annotations

import asyncio
import collections

from kcore import AioFutures, AioRecordFuture
from pyprod.aio.errors import translate

__all__ = ["RecordFuture", "RecordMetadata", "record_futures"]

# aiokafka's RecordMetadata (aiokafka.structs): timestamp_type 0 CreateTime, 1 LogAppendTime;
# log_start_offset is None (pyprod does not keep it).
RecordMetadata = collections.namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "timestamp_type",
    "log_start_offset"], module=__name__)

RecordFuture = AioRecordFuture  # made by record_futures(loop).wrap(kcore future)


def record_futures(loop: asyncio.AbstractEventLoop, no_ack: bool = False,
                   impl: type = AioFutures) -> AioFutures:
    """The maker of one loop's RecordFutures: ``wrap(future, first=None)``. no_ack: acks=0,
    whose result is None (aiokafka's); impl: the other twin's AioFutures (tests)."""
    return impl(loop, RecordMetadata, translate, no_ack)
