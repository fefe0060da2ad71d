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

for _cls in vars(_defined).values():
    if isinstance(_cls, type) and issubclass(_cls, BaseException) and \
            _cls.__module__.startswith("kcore."):
        _cls.__module__ = __name__
del _cls
