"""pyprod.aio's exceptions, and the rule that keeps aiokafka's ``except`` clauses working.

The rule (docs/asyncio.md): pyprod.aio raises pyprod's classes (``pyprod.errors``, kafka-python's
names, plus aiokafka's ``ProducerClosed``, ``ProducerFenced`` and ``IllegalOperation``). When
aiokafka is importable, every exception that leaves pyprod.aio is an instance of a subclass of
both the pyprod class and aiokafka's class of the same meaning: same name, else same broker
error code, else the nearest ancestor's (``KafkaError``), with the renames below. So
``except aiokafka.errors.ProducerFenced`` and ``except pyprod.errors.ProducerFenced`` both catch
it. Without aiokafka, the pyprod classes alone: pyprod.aio never needs aiokafka.
``IllegalOperation`` is not a KafkaError in either. A fenced producer's broker errors
(``ProducerFencedError``, ``InvalidProducerEpochError``) surface as ``ProducerFenced``, as
aiokafka raises them.
"""
from pyprod import errors

try:
    import aiokafka.errors as _aiokafka
except ImportError:  # pyprod.aio works without aiokafka
    _aiokafka = None

__all__ = ["ProducerClosed", "ProducerFenced", "IllegalOperation", "aiokafka_flavour",
           "translate"]

# pyprod (kafka-python) name -> aiokafka's name, where they differ and the code does not tell
_RENAMED = {"NoBrokersAvailable": "KafkaConnectionError", "ProducerFencedError": "ProducerFenced"}
_FENCED = (errors.ProducerFencedError, errors.InvalidProducerEpochError)
_flavours = {}


def _counterpart(cls):
    """aiokafka's class for pyprod's ``cls`` (or its nearest ancestor's), or None."""
    by_code = getattr(_aiokafka, "kafka_errors", {})
    for klass in cls.__mro__:
        name = _RENAMED.get(klass.__name__, klass.__name__)
        theirs = getattr(_aiokafka, name, None)
        if theirs is None and getattr(klass, "errno", None) is not None:
            theirs = by_code.get(klass.errno)
        if isinstance(theirs, type) and issubclass(theirs, BaseException):
            return theirs
    return None


def _pyprod_str(self):
    """pyprod's text (its __str__ chain, without aiokafka's, which would add its own)."""
    plain = type(self).__bases__[0]
    twin = plain.__new__(plain, *self.args)
    twin.__dict__.update(self.__dict__)
    return plain.__str__(twin)


def aiokafka_flavour(cls):
    """``cls``, or (aiokafka importable) its subclass that is also aiokafka's class."""
    if _aiokafka is None or not (isinstance(cls, type) and issubclass(cls, Exception)):
        return cls
    flavour = _flavours.get(cls)
    if flavour is None:
        theirs = _counterpart(cls)
        if theirs is None or issubclass(cls, theirs):
            flavour = cls
        else:
            flavour = type(cls.__name__, (cls, theirs), {
                "__module__": __name__, "__doc__": cls.__doc__, "__str__": _pyprod_str})
        _flavours[cls] = flavour
    return flavour


def translate(exc):
    """The exception pyprod.aio raises for ``exc`` (one of pyprod's): see the module doc."""
    if isinstance(exc, _FENCED) and not isinstance(exc, errors.ProducerFenced):
        fenced = ProducerFenced()
        fenced.__cause__ = exc
        return fenced
    flavour = aiokafka_flavour(type(exc))
    if flavour is type(exc):
        return exc
    new = flavour.__new__(flavour, *exc.args)
    new.__dict__.update(exc.__dict__)
    new.args = exc.args
    new.__cause__, new.__context__ = exc.__cause__, exc.__context__
    return new.with_traceback(exc.__traceback__)


ProducerClosed = aiokafka_flavour(errors.ProducerClosed)
ProducerFenced = aiokafka_flavour(errors.ProducerFenced)
IllegalOperation = aiokafka_flavour(errors.IllegalOperation)
