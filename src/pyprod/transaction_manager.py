"""The idempotent producer's sequence state, a kcore kernel (kcore/pure/transaction_manager.py)."""
from kcore import SEQUENCE_MODULO, TransactionManager
__all__ = ["TransactionManager", "SEQUENCE_MODULO"]
