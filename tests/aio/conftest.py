"""tests/aio's fixtures: pyprod.aio's RecordFuture maker on either kcore twin."""
import pytest


@pytest.fixture
def futures_of(k):
    """futures_of(loop, no_ack=False): pyprod.aio's record_futures on k's implementation (its
    wrap() takes k's FutureRecordMetadata)."""
    if k.pure:
        from kcore.pure.future import AioFutures
    else:
        from kcore.future import AioFutures
    from pyprod.aio.record_future import record_futures
    return lambda loop, no_ack=False: record_futures(loop, no_ack, impl=AioFutures)
