"""The hook Protocols of kcore/network_poll.pyi (NetworkHooks, NetworkMetadata, NetworkUpdater:
what NetworkPoll calls on the objects it is given) against pyprod's objects that implement them:
each member present, each method with the stub's parameters. The stub's classes against both
twins are tests/kernels/test_contracts.py; this is the other side of the same stub."""
import ast
import gc
import inspect
import types
import typing

import pytest

import kcore
from pyprod import config as pconfig
from pyprod.network_client import NetworkClient
from pyprod.producer import metadata_for, network_client_for
from tests.kernels.test_contracts import (_from_signature, _is_protocol, _stub_params,
                                          _stub_tree, compare)


def _protocols():
    """{Protocol name: {member: stub parameters (a method) or None (an attribute)}}."""
    found = {}
    for node in _stub_tree("network_poll").body:
        if not _is_protocol(node):
            continue
        members = found[node.name] = {}
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                prop = "property" in {ast.unparse(d) for d in item.decorator_list}
                members[item.name] = None if prop else _stub_params(item.args, True)
            elif isinstance(item, ast.AnnAssign):
                members[item.target.id] = None
    return found


def _runtime_protocol(name, members):
    """The stub's Protocol as a runtime_checkable one (isinstance checks its members)."""
    ns = {m: (lambda self, *a: None) for m, params in members.items() if params is not None}
    ns["__annotations__"] = {m: object for m, params in members.items() if params is None}
    return typing.runtime_checkable(type(name, (typing.Protocol,), ns))


@pytest.fixture(scope="module")
def implementers():
    """NetworkPoll's hooks, metadata and updater as the producer builds them, with the poll and
    its client (no broker: nothing connects until a node is asked for)."""
    cfg = pconfig.build(bootstrap_servers="127.0.0.1:9")
    md = metadata_for(cfg)
    nc = network_client_for(cfg, md)
    poll = nc.network_poll
    yield {"NetworkHooks": poll.hooks, "NetworkMetadata": poll.metadata,
           "NetworkUpdater": poll.updater, "poll": poll, "client": nc}
    nc.network_poll.shutdown()
    md.close()


def test_the_stub_declares_the_three_protocols():
    assert set(_protocols()) == {"NetworkHooks", "NetworkMetadata", "NetworkUpdater"}


@pytest.mark.parametrize("name", ["NetworkHooks", "NetworkMetadata", "NetworkUpdater"])
def test_pyprod_implements_the_protocol(name, implementers):
    members = _protocols()[name]
    obj = implementers[name]
    assert isinstance(obj, _runtime_protocol(name, members)), (
        "%s lacks %s" % (type(obj).__name__, sorted(m for m in members if not hasattr(obj, m))))
    problems = []
    for member, params in members.items():
        if params is not None:
            actual = _from_signature(inspect.signature(getattr(obj, member)))
            compare("%s.%s" % (type(obj).__name__, member), params, actual, problems)
    assert not problems, "\n".join(problems)


def test_a_connection_is_kcores_with_pyprods_setup_policy():
    """One owner per connection: the NetworkClient's connections are kcore's class itself (no
    pyprod subclass), each holding a ConnectionSetup that holds no connection back."""
    from pyprod.connection import ConnectionSetup
    cfg = pconfig.build(bootstrap_servers="127.0.0.1:9")
    md = metadata_for(cfg)
    nc = network_client_for(cfg, md)
    try:
        nc.ready(-1, kcore.now_ms())  # makes the bootstrap connection (nothing listens on :9)
        connections = list(nc.network_poll.connections.values())
        assert connections and all(type(c) is kcore.BrokerConnection for c in connections)
        for connection in connections:
            assert type(connection.setup) is ConnectionSetup
            assert not [name for name, value in vars(connection.setup).items()
                        if isinstance(value, kcore.BrokerConnection)]
    finally:
        nc.network_poll.shutdown()
        md.close()


def _reaches(start, target, stop):
    """True if a gc.get_referents walk from start reaches target; it does not walk into the
    objects in ``stop`` (the ones shared by design: the Metadata), modules, classes or a
    function's globals (no reference held by the object)."""
    seen, todo = {id(s) for s in stop}, [start]
    while todo:
        obj = todo.pop()
        if obj is target:
            return True
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):  # what it holds, not its module's globals
            todo.extend([*(obj.__closure__ or ()), *(obj.__defaults__ or ())])
        else:
            todo.extend(gc.get_referents(obj))
    return False


def test_references_go_one_way(implementers):
    """Issue 42: NetworkClient -> NetworkPoll -> (policy, updater) and updater -> policy; the
    policy and the updater reach neither the NetworkPoll nor the NetworkClient, and the policy
    holds no updater (NetworkPoll passes itself, and the policy finds ``poll.updater``)."""
    hooks, updater = implementers["NetworkHooks"], implementers["NetworkUpdater"]
    poll = implementers["poll"]
    assert type(poll) is kcore.NetworkPoll
    assert poll.hooks is hooks and poll.updater is updater and updater.lifecycle is hooks
    stop = [implementers["NetworkMetadata"]]
    for start in (hooks, updater):
        assert not _reaches(start, poll, stop), type(start).__name__
        assert not _reaches(start, implementers["client"], stop), type(start).__name__
    assert not _reaches(hooks, updater, stop)
    assert isinstance(implementers["client"], NetworkClient)
    assert implementers["client"].lifecycle is hooks
