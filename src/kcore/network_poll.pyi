"""The contract of kcore.network_poll and its twin kcore.pure.network_poll (both run
kcore/shared/network_poll.py): the NetworkClient's data path, NetworkPoll and each connection's
Link. All times are monotonic milliseconds.

NetworkHooks, NetworkMetadata and NetworkUpdater are Protocols for type checkers only (neither
module defines them, nor lists them in ``__all__``): what NetworkPoll calls on the objects it is
given (the NetworkClient, its Metadata and its MetadataUpdater), each called positionally."""
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

from typing_extensions import Buffer

from kcore.channel import Channel
from kcore.client_errors import KafkaConnectionError
from kcore.selector import Selector, Waker

__all__ = ["DISCONNECTED", "CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS",
           "AUTHENTICATING", "READY", "SETTING_UP", "MAX_DELAY_MS", "InFlightRequest",
           "ClientResponse", "Link", "NetworkPoll", "ssl_failure", "drop_tracebacks"]

# Link.state
DISCONNECTED: Final = "DISCONNECTED"
CONNECTING: Final = "CONNECTING"
HANDSHAKING: Final = "HANDSHAKING"
CHECKING_API_VERSIONS: Final = "CHECKING_API_VERSIONS"
AUTHENTICATING: Final = "AUTHENTICATING"
READY: Final = "READY"
SETTING_UP: Final = ("CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS", "AUTHENTICATING")
MAX_DELAY_MS: Final[int]  # sys.maxsize

# a request's callback (None: nothing to run when it completes)
_Callback = Callable[[ClientResponse], object]

def drop_tracebacks(error: BaseException | None) -> None: ...
def ssl_failure(e: BaseException, node_id: int, host: str, port: int,
                when: str) -> KafkaConnectionError: ...

class NetworkHooks(Protocol):
    """What NetworkPoll asks its ``hooks`` (the NetworkClient) to decide, only when it is due."""
    def set_up(self, conn: Link, now: int, /) -> bool: ...
    def reauthenticate(self, conn: Link, now: int, /) -> None: ...
    def connection_closed(self, conn: Link, state: str, error: BaseException | None,
                          failed: list[InFlightRequest], now: int, request_update: bool, /
                          ) -> BaseException | None: ...
    def handle_internal(self, conn: Link, req: InFlightRequest, body: memoryview, now: int, /
                        ) -> None: ...
    def response_header_end(self, frame: bytes | bytearray, /) -> int: ...
    def request_head(self, api_key: int, version: int, /) -> tuple[bytes, bytes, int]: ...
    def api_version(self, node_id: int, api_key: int, /) -> int: ...

class NetworkMetadata(Protocol):
    """What NetworkPoll reads on its ``metadata``."""
    @property
    def update_due_ms(self) -> int: ...

class NetworkUpdater(Protocol):
    """What NetworkPoll reads and calls on its ``updater``."""
    @property
    def fetch(self) -> object: ...  # None unless a metadata request is in flight
    def maybe_update(self, now: int, /) -> float: ...  # ms until the next metadata action

class InFlightRequest:
    correlation_id: int
    api_key: int
    api_version: int
    response_header_version: int
    expects_response: bool
    callback: _Callback | None
    send_ms: int
    timeout_ms: int
    internal: Any  # None, or a tag for requests the client handles itself
    def __init__(self, correlation_id: int, api_key: int, api_version: int,
                 response_header_version: int, expects_response: bool,
                 callback: _Callback | None, send_ms: int, timeout_ms: int,
                 internal: Any = None) -> None: ...

class ClientResponse:
    node_id: int
    api_key: int
    api_version: int
    correlation_id: int
    body: memoryview | None
    error: BaseException | None
    latency_ms: int
    def __init__(self, node_id: int, api_key: int, api_version: int, correlation_id: int,
                 body: memoryview | None, error: BaseException | None,
                 latency_ms: int) -> None: ...

class Link:
    node_id: int
    host: str
    port: int
    state: str
    sock: socket.socket | None
    channel: Channel
    in_flight: deque[InFlightRequest]
    unanswered: deque[int]
    api_versions: dict[int, tuple[int, int]] | None
    produce_version: tuple[dict[int, tuple[int, int]] | None, int] | None
    last_activity_ms: int
    connect_deadline_ms: int
    reauth_at_ms: int | None
    sel_mask: int
    tls: Any
    tls_rbuf: memoryview | None
    ssl_retry: tuple[int, Buffer] | None
    hs_wants_write: bool
    def __init__(self, node_id: int, host: str, port: int, channel: Channel) -> None: ...
    @property
    def wants_write(self) -> bool: ...
    def complete_next(self, correlation_id: int) -> InFlightRequest | None: ...
    def enqueue(self, request: InFlightRequest, buffers: Iterable[Buffer]) -> None: ...
    def written(self, tags: Iterable[InFlightRequest], now: int) -> list[InFlightRequest]: ...
    def collect(self, now: int
                ) -> tuple[list[InFlightRequest], list[bytes | bytearray],
                           BaseException | None]: ...
    def write(self, now: int) -> list[InFlightRequest]: ...
    def read(self, now: int, max_reads: int = 32
             ) -> tuple[list[bytes | bytearray], BaseException | None]: ...
    def close(self, error: BaseException | None, now: int) -> list[InFlightRequest]: ...
    def send_failed(self, e: OSError) -> KafkaConnectionError: ...
    def write_failed(self, e: OSError) -> KafkaConnectionError: ...
    def receive_failed(self, error: BaseException | None) -> BaseException: ...
    def expired_request(self, now: int) -> InFlightRequest | None: ...
    def next_deadline(self) -> int: ...

class NetworkPoll:
    hooks: NetworkHooks
    metadata: NetworkMetadata
    updater: NetworkUpdater
    sel: Selector
    waker: Waker
    max_in_flight: int
    request_timeout_ms: int
    idle_ms: int
    conns: dict[int, Link]
    correlation: int
    heads: dict[tuple[int, int], tuple[bytes, bytes, int]]
    completed: list[tuple[_Callback, ClientResponse]]
    next_idle_check: int
    closed: bool
    def __init__(self, hooks: NetworkHooks, metadata: NetworkMetadata, updater: NetworkUpdater,
                 selector: Selector, waker: Waker, *, max_in_flight: int,
                 request_timeout_ms: int, idle_ms: int) -> None: ...
    @staticmethod
    def now_ms() -> int: ...
    def wakeup(self) -> None: ...
    def register(self, conn: Link) -> None: ...
    def can_send(self, conn: Link | None) -> bool: ...
    def update_due(self, now: int) -> bool: ...
    def is_ready(self, node_id: int, now: int) -> bool: ...
    def sendable_nodes(self, now: int) -> list[int]: ...
    def ready_delay(self, node_id: int) -> int | None: ...
    def busy_nodes(self) -> set[int]: ...
    def in_flight_count(self, node_id: int | None = None) -> int: ...
    def produce_version(self, node_id: int) -> int: ...
    def send_request(self, node_id: int, api_key: int, version: int,
                     body: bytes | bytearray | memoryview | Iterable[Buffer],
                     expects_response: bool, callback: _Callback | None,
                     timeout_ms: int) -> int: ...
    def enqueue(self, conn: Link, api_key: int, version: int,
                body: bytes | bytearray | memoryview | Iterable[Buffer], expects_response: bool,
                callback: _Callback | None, timeout_ms: int, now: int, internal: Any) -> int: ...
    def write(self, conn: Link, now: int) -> None: ...
    def after_write(self, conn: Link, done: Iterable[InFlightRequest], now: int) -> None: ...
    def complete(self, conn: Link, req: InFlightRequest, body: memoryview | None,
                 error: BaseException | None, now: int) -> None: ...
    def close(self, conn: Link, error: BaseException | None, now: int,
              request_update: bool = True) -> None: ...
    def shutdown(self, after_fork: bool = False) -> None: ...
    def poll(self, timeout_ms: float | None) -> None: ...
    def handle_io(self, conn: Link, mask: int, now: int) -> None: ...
    def handle_frame(self, conn: Link, frame: bytes | bytearray, now: int) -> None: ...
    def next_deadline(self) -> int: ...
    def handle_timeouts(self, now: int) -> None: ...
    def close_idle(self, now: int) -> None: ...
    def run_callbacks(self) -> None: ...
