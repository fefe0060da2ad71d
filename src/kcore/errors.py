"""Every exception pyprod raises, with kafka-python's names, errno values and hierarchy: the
client-side ones (kcore.client_errors) and the broker's error codes (kcore.broker_errors, with
for_code). They live at the bottom layer, which raises them; users import them from
pyprod.errors, which re-exports these same classes under its own name."""
from typing import TYPE_CHECKING

from kcore.broker_errors import *  # noqa: F401,F403
from kcore.client_errors import *  # noqa: F401,F403

if not TYPE_CHECKING:  # computed: type checkers take every public name instead
    from kcore.broker_errors import __all__ as _broker_names
    from kcore.client_errors import __all__ as _client_names
    __all__ = sorted(set(_client_names) | set(_broker_names))
