"""ApiVersions (key 18), v0..v4; v3+ flexible and sends the client software name/version.

A broker that doesn't support the requested version answers UNSUPPORTED_VERSION (35) in a v0
body listing what it does support; decode_response() recognises that, so the client can retry
with the highest version the broker names. An UNSUPPORTED_VERSION answer in neither layout
(librdkafka's mock cluster writes one) decodes as error 35 with no api_keys: retry with v0.
"""
import re

from pyprod.version import __version__
from pyprod.errors import IncompatibleBrokerVersion, KafkaProtocolError, UnsupportedVersionError

from .schema import Api, Field, Struct
from .wire import as_reader

ApiVersion = Struct("ApiVersion", [
    Field("api_key", "int16"),
    Field("min_version", "int16"),
    Field("max_version", "int16"),
])
SupportedFeature = Struct("SupportedFeatureKey", [
    Field("name", "string", "3+"),
    Field("min_version", "int16", "3+"),
    Field("max_version", "int16", "3+"),
])
FinalizedFeature = Struct("FinalizedFeatureKey", [
    Field("name", "string", "3+"),
    Field("max_version_level", "int16", "3+"),
    Field("min_version_level", "int16", "3+"),
])
REQUEST = Struct("ApiVersionsRequest", [
    Field("client_software_name", "string", "3+"),
    Field("client_software_version", "string", "3+"),
])
RESPONSE = Struct("ApiVersionsResponse", [
    Field("error_code", "int16"),
    Field("api_keys", "[]", fields=ApiVersion),
    Field("throttle_time_ms", "int32", "1+"),
    Field("supported_features", "[]", "3+", tag=0, fields=SupportedFeature),
    Field("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    Field("finalized_features", "[]", "3+", tag=2, fields=FinalizedFeature),
    Field("zk_migration_ready", "bool", "3+", tag=3),
])

API = Api(18, "ApiVersions", 0, 4, 3, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from

# what brokers accept as client software name and version (KIP-511)
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?\Z")


def encode_request(version, client_software_name="pyprod", client_software_version=__version__):
    for value in (client_software_name, client_software_version) if version >= 3 else ():
        if not (isinstance(value, str) and _SOFTWARE.match(value)):
            raise ValueError("client software name/version %r: letters, digits, '-' and '.'"
                             " only, starting and ending with a letter or digit" % (value,))
    return API.encode_request(version, {"client_software_name": client_software_name,
                                        "client_software_version": client_software_version})


def decode_response(version, data, strict=True):
    """ApiVersionsResponse namedtuple. An UNSUPPORTED_VERSION answer in a v0 body decodes as v0.

    strict=False ignores bytes after a complete message.
    """
    r = as_reader(data)
    probe = r.fork()
    if version == 0 or probe.remaining < 2 or probe.read_int16() != UnsupportedVersionError.errno:
        return API.decode_response(version, r, strict)
    for v in (0, version):
        try:
            return API.decode_response(v, r.fork())
        except KafkaProtocolError:
            pass
    return RESPONSE.type._make(
        [UnsupportedVersionError.errno] + [f.default for f in RESPONSE.fields[1:]])


def version_ranges(response):
    """{api_key: (min_version, max_version)} from a response."""
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def finalized_features(response):
    """{feature name: max_version_level} of the cluster's finalized features (v3+ tag 2, e.g.
    "transaction.version" >= 2 enables KIP-890's transactions v2); {} before v3 or when absent."""
    return {f.name: f.max_version_level for f in response.finalized_features or ()}


def pick_version(module, ranges):
    """Highest version of ``module``'s API both sides support, from version_ranges().

    Raises IncompatibleBrokerVersion when the broker lacks the API or no version is common.
    """
    api = module.API
    theirs = ranges.get(api.key)
    if theirs is None:
        raise IncompatibleBrokerVersion("broker does not support %s" % api.name)
    hi = min(theirs[1], api.max_version)
    if hi < max(theirs[0], api.min_version):
        raise IncompatibleBrokerVersion(
            "%s: broker supports v%d..v%d, pyprod v%d..v%d"
            % (api.name, theirs[0], theirs[1], api.min_version, api.max_version))
    return hi
