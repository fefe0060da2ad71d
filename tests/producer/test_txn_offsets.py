"""send_offsets_to_transaction's offsets argument: an int, kafka-python 2.x's OffsetAndMetadata
(offset, metadata) and 3.x's (offset, metadata, leader_epoch) all reach TxnOffsetCommit."""
import pytest

from pyprod.transaction_manager import _offsets


def test_every_offset_shape():
    assert _offsets({("t", 0): 5, ("t", 1): (6, "m"), ("t", 2): (7, "m", 3), ("t", 3): (8,),
                     ("t", 4): (9, "m", None)}) == {
        ("t", 0): (5, "", -1), ("t", 1): (6, "m", -1), ("t", 2): (7, "m", 3),
        ("t", 3): (8, "", -1), ("t", 4): (9, "m", -1)}


@pytest.mark.parametrize("bad", [(), (-1,), ("5", "m"), None])
def test_bad_offsets_are_value_errors(bad):
    with pytest.raises((ValueError, TypeError)):
        _offsets({("t", 0): bad})
