"""AIOKafkaProducer's transactions (aiokafka's API on pyprod's TransactionManager).

begin_transaction, commit_transaction, abort_transaction, send_offsets_to_transaction and the
``transaction()`` context. Commit, abort and the offsets' requests are pyprod's
TransactionalRequestResults, awaited on the loop (the Sender thread wakes it): nothing blocks
the loop, and cancelling the awaiting task does not cancel the commit or abort (aiokafka's rule).
"""
from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from pyprod import errors
from pyprod.aio.errors import IllegalOperation, translate
from pyprod.transaction_manager import FATAL_ERROR, IN_TRANSACTION

__all__ = ["Transactions", "TransactionContext", "validate_offsets"]


def validate_offsets(offsets):
    """aiokafka's commit_structure_validate: {TopicPartition: offset | (offset, metadata) |
    OffsetAndMetadata} -> {TopicPartition: (offset, metadata, leader epoch -1)}, with its
    errors."""
    if not offsets or not isinstance(offsets, dict):
        raise ValueError(offsets)
    out = {}
    for tp, value in offsets.items():
        if not (isinstance(tp, tuple) and len(tp) == 2):
            raise TypeError("Key should be TopicPartition instance")
        if isinstance(value, int):
            offset, metadata = value, ""
        else:
            try:
                offset, metadata = value
            except Exception as exc:
                raise ValueError(offsets) from exc
            if not isinstance(metadata, str):
                raise TypeError("Metadata should be a string")
        out[tp] = (offset, metadata, -1)
    return out


class Transactions:
    """The transactional methods; AIOKafkaProducer's ``_transaction_manager()`` gives pyprod's
    TransactionManager (None when not transactional) and ``_wake_sender()`` its I/O thread."""

    def _ensure_transactional(self):
        transaction_manager = self._transaction_manager()  # (not started: IllegalStateError)
        if transaction_manager is None:
            raise IllegalOperation("You need to configure transaction_id to use transactions")
        return transaction_manager

    async def begin_transaction(self) -> None:
        transaction_manager = self._ensure_transactional()
        try:
            transaction_manager.begin_transaction()
        except errors.KafkaError as e:
            raise translate(e) from None

    async def commit_transaction(self) -> None:
        transaction_manager = self._ensure_transactional()
        await self._finish(transaction_manager.begin_commit)

    async def abort_transaction(self) -> None:
        transaction_manager = self._ensure_transactional()
        await self._finish(transaction_manager.begin_abort)

    async def _finish(self, begin):
        try:
            result = begin()
            self._wake_sender()
            await result
        except errors.KafkaError as e:
            raise translate(e) from None

    def transaction(self) -> TransactionContext:
        """``async with producer.transaction():`` begins, then commits (or aborts on an
        exception, but after a fatal error: then the exception just goes on)."""
        return TransactionContext(self)

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any],
                                          group_id: str) -> None:
        transaction_manager = self._ensure_transactional()
        if transaction_manager.state != IN_TRANSACTION:
            raise IllegalOperation("Not in the middle of a transaction")
        if not group_id or not isinstance(group_id, str):
            raise ValueError(group_id)
        offsets = validate_offsets(offsets)
        try:
            result = transaction_manager.send_offsets_to_transaction(offsets, group_id)
            self._wake_sender()
            await result
        except errors.KafkaError as e:
            raise translate(e) from None

    def _check_send_in_transaction(self):
        transaction_manager = self._transaction_manager()
        if transaction_manager is not None and transaction_manager.state != IN_TRANSACTION:
            raise IllegalOperation("Can't send messages while not in transaction")

    def _is_fatal(self):
        transaction_manager = self._transaction_manager()
        return transaction_manager is not None and transaction_manager.state == FATAL_ERROR


class TransactionContext:
    def __init__(self, producer: Any) -> None:
        self._producer = producer

    async def __aenter__(self) -> TransactionContext:
        await self._producer.begin_transaction()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_value: BaseException | None, traceback: TracebackType | None
                        ) -> None:
        if exc_type is None:
            await self._producer.commit_transaction()
        elif not self._producer._is_fatal():
            await self._producer.abort_transaction()
