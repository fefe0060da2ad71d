"""Every exception pyprod raises, with kafka-python's names, errno values and hierarchy.

Class names, ``errno``, ``retriable`` and ``invalid_metadata`` match kafka-python 3.x (plus the
kafka-python 2.x names that 3.x dropped), so ``except Errors.X`` code ports by changing the
import. Broker error codes map to classes through :func:`for_code`. The classes are defined at
the bottom layer (kcore.errors), which raises them too; this is where users import them from,
and the module name their tracebacks and pickles give.
"""
from typing import TYPE_CHECKING

from kcore import errors as _defined
from kcore.errors import *  # noqa: F401,F403

if not TYPE_CHECKING:  # computed in kcore.errors: type checkers take every public name
    from kcore.errors import __all__  # noqa: F401


# -- pyprod.aio's (aiokafka's names). With aiokafka importable, pyprod.aio raises subclasses that
# are also aiokafka's own classes (docs/asyncio.md): catching either works.
class ProducerClosed(KafkaError):  # noqa: F405
    """The producer was stopped: send() and send_batch() refuse (aiokafka's)."""


class ProducerFenced(ProducerFencedError):  # noqa: F405
    """Another producer with the same transactional_id took over, or the transaction timed out
    (aiokafka's; a ProducerFencedError)."""

    def __init__(self, msg="There is a newer producer using the same transactional_id or"
                           "transaction timeout occurred (check that processing time is "
                           "below transaction_timeout_ms)", *args):
        super().__init__(msg, *args)


class IllegalOperation(Exception):
    """An operation this producer's configuration or state does not allow (aiokafka's; not a
    KafkaError, as in aiokafka)."""


if not TYPE_CHECKING:
    __all__ = sorted(__all__ + ["ProducerClosed", "ProducerFenced", "IllegalOperation"])

for _cls in vars(_defined).values():
    if isinstance(_cls, type) and issubclass(_cls, BaseException) and \
            _cls.__module__.startswith("kcore."):
        _cls.__module__ = __name__
del _cls
