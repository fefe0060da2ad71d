"""SASL/AWS_MSK_IAM (Amazon MSK's IAM sign-in), as kafka-python sends it.

One message: a JSON object carrying an AWS SigV4 presigned ``kafka-cluster:Connect`` request for
the broker's host (aws-msk-iam-auth's format, version 2020_10_22), then the broker's verdict.
Credentials come from botocore's default chain (environment, shared config/profile, instance
role...), the region from botocore's config (AWS_DEFAULT_REGION, the profile) or else from an MSK
broker host name (``b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com``). botocore is optional:
``pip install pyprod[aws]``. The secret key and session token never appear in a repr or a log.
"""
import datetime
import hashlib
import hmac
import json
import time
import urllib.parse

from pyprod.errors import KafkaConfigurationError

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "kafka-cluster"
ACTION = SERVICE + ":Connect"
VERSION = "2020_10_22"
EXPIRES = "900"
_UNRESERVED = "-._~"  # with letters and digits (urllib's quote keeps those)


def check_available():
    """KafkaConfigurationError at construction when botocore is missing."""
    try:
        import botocore.session  # noqa: F401
    except ImportError:
        raise KafkaConfigurationError(
            "sasl_mechanism AWS_MSK_IAM needs the 'botocore' package "
            "(pip install pyprod[aws])") from None


def region_from_host(host):
    """The region in an MSK broker host name (``...kafka.<region>.amazonaws.com``), or None."""
    parts = host.lower().split(".")
    for i, part in enumerate(parts[:-2]):
        if part in ("kafka", "kafka-serverless") and parts[i + 2] == "amazonaws":
            return parts[i + 1]
    return None


def _hmac(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def _quote(value):
    return urllib.parse.quote(value, safe=_UNRESERVED)


def signing_key(secret_key, datestamp, region):
    """SigV4's derived key for (date, region, kafka-cluster)."""
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), datestamp)
    for part in (region, SERVICE, "aws4_request"):
        key = _hmac(key, part)
    return key


def string_to_sign(host, access_key, region, timestamp, token=None):
    """SigV4's string to sign for the presigned GET / of kafka-cluster:Connect on ``host``."""
    scope = "%s/%s/%s/aws4_request" % (timestamp[:8], region, SERVICE)
    params = [("Action", ACTION), ("X-Amz-Algorithm", ALGORITHM),
              ("X-Amz-Credential", "%s/%s" % (access_key, scope)),
              ("X-Amz-Date", timestamp), ("X-Amz-Expires", EXPIRES)]
    if token:
        params.append(("X-Amz-Security-Token", token))
    params.append(("X-Amz-SignedHeaders", "host"))
    query = "&".join(_quote(k) + "=" + _quote(v) for k, v in params)
    canonical = "\n".join(("GET", "/", query, "host:%s\n" % host, "host",
                           hashlib.sha256(b"").hexdigest()))
    return "\n".join((ALGORITHM, timestamp, scope,
                      hashlib.sha256(canonical.encode("utf-8")).hexdigest()))


def payload(host, access_key, secret_key, region, token=None, now=None):
    """The JSON bytes kafka-python's AWS_MSK_IAM sends (same keys, order and separators)."""
    when = datetime.datetime.fromtimestamp(time.time() if now is None else now,
                                           datetime.timezone.utc)
    timestamp = when.strftime("%Y%m%dT%H%M%SZ")
    signature = hmac.new(signing_key(secret_key, timestamp[:8], region),
                         string_to_sign(host, access_key, region, timestamp, token)
                         .encode("utf-8"), hashlib.sha256).hexdigest()
    msg = {
        "version": VERSION, "host": host, "user-agent": "kafka-python", "action": ACTION,
        "x-amz-algorithm": ALGORITHM,
        "x-amz-credential": "%s/%s/%s/%s/aws4_request" % (access_key, timestamp[:8], region,
                                                          SERVICE),
        "x-amz-date": timestamp, "x-amz-signedheaders": "host", "x-amz-expires": EXPIRES,
        "x-amz-signature": signature,
    }
    if token:
        msg["x-amz-security-token"] = token
    return json.dumps(msg, separators=(",", ":")).encode("utf-8")


class AwsMskIamSaslClient:
    name = "AWS_MSK_IAM"

    def __init__(self, host, clock=time.time):
        self._host = host
        self._clock = clock

    def first(self):
        import botocore.session
        session = botocore.session.Session()
        creds = session.get_credentials()
        if creds is None:
            raise KafkaConfigurationError(
                "AWS_MSK_IAM: botocore found no AWS credentials (set AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY, a profile or an instance role)")
        creds = creds.get_frozen_credentials()
        region = session.get_config_variable("region") or region_from_host(self._host)
        if not region:
            raise KafkaConfigurationError(
                "Unable to determine region for AWS MSK cluster. Is AWS_DEFAULT_REGION set?")
        return payload(self._host, creds.access_key, creds.secret_key, region, creds.token,
                       self._clock())

    def evaluate(self, challenge):
        return None  # the broker's JSON answer came without an error: authenticated

    def __repr__(self):
        return "<AwsMskIamSaslClient host=%r>" % (self._host,)
