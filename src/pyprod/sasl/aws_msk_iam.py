"""SASL/AWS_MSK_IAM (Amazon MSK's IAM sign-in), as kafka-python sends it.

One message: a JSON object carrying an AWS SigV4 presigned ``kafka-cluster:Connect`` request for
the broker's host (aws-msk-iam-auth's format, version 2020_10_22), then the broker's verdict.
Credentials come from botocore's default chain (environment, shared config/profile, instance
role...), the region from botocore's config (AWS_DEFAULT_REGION, the profile) or else from an MSK
bootstrap host name (``b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com``), all resolved once
by the producer's constructor (:class:`AwsMskIamCredentials`, :func:`for_producer`); the Sender
thread signs from memory. botocore is optional: ``pip install pyprod[aws]``. The secret key and
session token never appear in a repr or a log.
"""
import datetime
import hashlib
import hmac
import json
import logging
import os
import threading
import time
import urllib.parse

from pyprod.errors import KafkaConfigurationError
from pyprod.sasl import refresher

log = logging.getLogger(__name__)

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "kafka-cluster"
ACTION = SERVICE + ":Connect"
VERSION = "2020_10_22"
EXPIRES = "900"
CREDENTIALS_KEY = "_aws_msk_iam_credentials"  # the producer's AwsMskIamCredentials, in its config
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


class AwsMskIamCredentials:
    """botocore's session, credentials and region, resolved ONCE per producer (its constructor:
    missing credentials or region -> KafkaConfigurationError at once). The Sender's
    authentications only read :meth:`frozen` from memory. Refreshable credentials (botocore's
    RefreshableCredentials: instance roles, SSO, assumed roles) are refreshed every
    ``REFRESH_PERIOD_S`` on a daemon thread (botocore fetches anew within 15 min of expiry);
    a failed refresh keeps the current ones and logs its type. ``close()`` stops the thread."""

    REFRESH_PERIOD_S = 60.0
    clock = staticmethod(time.time)  # the signing clock (tests skew it)

    def __init__(self, hosts=()):
        check_available()
        import botocore.session
        try:
            session = botocore.session.Session()
            source = session.get_credentials()
            region = session.get_config_variable("region")
        except Exception as e:  # a broken profile, an unreachable SSO... (no secret in the type)
            raise KafkaConfigurationError("AWS_MSK_IAM: botocore could not resolve AWS "
                                          "credentials: %s" % type(e).__name__) from None
        if source is None:
            raise KafkaConfigurationError(
                "AWS_MSK_IAM: botocore found no AWS credentials (set AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY, a profile or an instance role)")
        self.region = region or next(filter(None, map(region_from_host, hosts)), None)
        if not self.region:
            raise KafkaConfigurationError(
                "Unable to determine region for AWS MSK cluster. Is AWS_DEFAULT_REGION set?")
        self._source = source
        self._frozen = source.get_frozen_credentials()
        self._stop = threading.Event()
        self._thread, self._pid = None, os.getpid()
        if hasattr(source, "refresh_needed"):  # RefreshableCredentials
            self._thread = refresher.start_thread(self, self._stop, self.REFRESH_PERIOD_S,
                                                  "pyprod-aws-msk-iam-refresh")

    def _refresh_once(self):
        try:
            self._frozen = self._source.get_frozen_credentials()
        except Exception as e:
            log.warning("AWS_MSK_IAM credentials refresh failed (%s); signing with the current "
                        "ones", type(e).__name__)
        return self.REFRESH_PERIOD_S

    def frozen(self):
        """The current (access_key, secret_key, token) as botocore's ReadOnlyCredentials."""
        if self._thread is not None and self._pid != os.getpid() and not self._stop.is_set():
            self._pid = os.getpid()  # a forked child: its own refresh thread
            self._thread = refresher.start_thread(self, self._stop, 0.0,
                                                  "pyprod-aws-msk-iam-refresh")
        return self._frozen

    def close(self):
        """Stop the refresh thread (idempotent)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread() and self._pid == os.getpid():
            t.join(5.0)

    def __repr__(self):
        return "<AwsMskIamCredentials region=%s>" % (self.region,)


def for_producer(config):
    """The AwsMskIamCredentials a producer with sasl_mechanism AWS_MSK_IAM makes (put in its
    config under CREDENTIALS_KEY, closed by its close()), else None."""
    if config.get("sasl_mechanism") != "AWS_MSK_IAM":
        return None
    creds = config[CREDENTIALS_KEY] = AwsMskIamCredentials([h for h, _ in config["bootstrap"]])
    return creds


class AwsMskIamSaslClient:
    name = "AWS_MSK_IAM"

    def __init__(self, host, credentials, clock=None):
        self._host = host
        self._credentials = credentials  # the producer's AwsMskIamCredentials
        self._clock = clock

    def first(self):
        creds = self._credentials
        frozen = creds.frozen()
        when = (self._clock or creds.clock)()
        return payload(self._host, frozen.access_key, frozen.secret_key, creds.region,
                       frozen.token, when)

    def evaluate(self, challenge):
        return None  # the broker's JSON answer came without an error: authenticated

    def __repr__(self):
        return "<AwsMskIamSaslClient host=%r>" % (self._host,)
