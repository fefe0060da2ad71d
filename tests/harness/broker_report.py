"""docs/results/brokers.md from scripts/brokers.sh's runs: one pytest JUnit XML file per broker
version (``<dir>/<version>.xml``, with ``<version>.meta``: the commit and date of that run), a
table check x version (passed / FAILED / not run) and, under it, each failure's first line.

``python -m tests.harness.broker_report <dir> <out.md>``"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET

from .broker_matrix import BY_VERSION, VERSIONS, supports

# check -> the feature it refuses on brokers without it (where passing means a typed refusal)
REFUSALS = {"test_codec[zstd]": "zstd", "test_scram_sha_256": "sasl",
            "test_sasl_ssl_scram_sha_256": "sasl"}
# check -> (feature, label where the broker has it, label where not): what a pass ran
VARIANTS = {"test_transactions_commit_and_abort": ("transactions_v2", "v2", "v1"),
            "test_idempotent_default_without_idempotent_write": (
                "idempotent_write_by_topic", "topic WRITE enough",
                "typed refusal: IDEMPOTENT_WRITE needed")}
# check -> which versions it runs on (elsewhere its cell is "n/a")
ONLY_WITH = {"test_transactions_v1_on_4x_without_tv2": lambda v: supports(v, "kraft4"),
             "test_idempotent_default_without_idempotent_write":
                 lambda v: BY_VERSION[v].zookeeper and supports(v, "sasl")}
REFUSED_ONLY = "test_too_old_broker"  # checks of the versions below what pyprod supports


def _cells(xml_path: str, version: str) -> dict:
    """{check: ("passed" | "failed" | "skipped", first line of the failure)} of one run."""
    out = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        m = re.match(r"(\w+)\[(.*)\]$", case.get("name", ""))
        if not m:
            continue
        params = [p for p in m.group(2).split("-") if p != version]
        check = m.group(1) + (f"[{'-'.join(params)}]" if params else "")
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            line = (bad.get("message") or bad.text or "").strip().splitlines()
            out[check] = ("failed", line[0][:160] if line else "")
        elif case.find("skipped") is not None:
            out[check] = ("skipped", "")
        else:
            out[check] = ("passed", "")
    return out


def _meta(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


# compatibility table row -> the checks (name prefixes) it sums up
FEATURES = [
    ("produce: send, send_batch, acks 0/1/all", ("test_send", "test_acks")),
    ("idempotence (the default)", ("test_idempotence_by_default",)),
    ("gzip, snappy, lz4", ("test_codec[gzip]", "test_codec[snappy]", "test_codec[lz4]")),
    ("zstd", ("test_codec[zstd]",)),
    ("headers", ("test_headers",)),
    ("transactions", ("test_transactions",)),
    ("TLS (SSL)", ("test_ssl",)),
    ("SASL SCRAM-SHA-256 (SASL_PLAINTEXT, SASL_SSL)", ("test_scram", "test_sasl_ssl")),
    ("idempotence without the IDEMPOTENT_WRITE ACL", ("test_idempotent_default",)),
    ("kafka-python api_version < (0, 11): no idempotence, writes", ("test_api_version",)),
    ("below 0.11: refused at once", ("test_too_old_broker",)),
]


def _state(check: str, ver: str, state: str) -> str:
    """A cell of the check table (see the legend)."""
    if state == "passed" and check in REFUSALS and not supports(ver, REFUSALS[check]):
        return "passed (refused)"
    if state == "passed" and check in VARIANTS:
        feature, yes, no = VARIANTS[check]
        return f"passed ({yes if supports(ver, feature) else no})"
    if state == "not run" and BY_VERSION[ver].refused:
        return "refused"  # below what pyprod supports: the refusal checks only
    if state == "not run" and (check.startswith(REFUSED_ONLY) or (
            check in ONLY_WITH and not ONLY_WITH[check](ver))):
        return "n/a"
    return "FAILED" if state == "failed" else state


def _feature_cell(cells: list[str]) -> str:
    """One feature x version cell from its checks' cells."""
    for bad in ("FAILED", "not run", "skipped"):
        if bad in cells:
            return bad
    cells = [c for c in cells if c != "n/a"]
    if not cells:
        return "n/a"
    if "refused" in cells:
        return "refused"
    if "passed (refused)" in cells:
        return "no (typed refusal)"
    labels = sorted({c[len("passed ("):-1] for c in cells if c.startswith("passed (")})
    refused = [x for x in labels if x.startswith("typed refusal")]
    if refused:  # a variant that is a refusal: ClusterAuthorizationFailedError, say
        return f"no ({refused[0]})"
    return "yes" + (f" ({', '.join(labels)})" if labels else "")


def render(folder: str) -> str:
    runs = {}
    for v in VERSIONS:
        xml = os.path.join(folder, f"{v.version}.xml")
        if os.path.exists(xml):
            meta = _meta(os.path.join(folder, f"{v.version}.meta"))
            runs[v.version] = (_cells(xml, v.version), meta)
    checks = []
    for cells, _ in runs.values():
        checks += [c for c in cells if c not in checks]
    versions = list(runs)
    lines = [
        "# The broker matrix (scripts/brokers.sh)", "",
        "Written by `scripts/brokers.sh`: `pytest tests/brokers` on one broker of each version "
        "(docs/brokers.md). \"passed\": pyprod wrote and confluent-kafka and kafka-python read "
        "the records back; \"passed (refused)\": the broker lacks the feature and pyprod refused "
        "it with a typed error naming the version it needs; \"passed (v1)\"/\"(v2)\": the "
        "transaction protocol pyprod negotiated (KIP-890 v2 where the broker finalized "
        "transaction.version 2); \"refused\": a broker below what pyprod supports (0.11.0), "
        "where every producer fails at once with IncompatibleBrokerVersion; \"n/a\": the check "
        "does not apply to that version; \"FAILED\": see the notes below.", "",
        "| Check | " + " | ".join(versions) + " |",
        "|---|" + "---|" * len(versions),
    ]
    failures = []
    states = {}
    for check in checks:
        for ver in versions:
            state, why = runs[ver][0].get(check, ("not run", ""))
            states[check, ver] = _state(check, ver, state)
            if state == "failed":
                failures.append(f"- {ver} `{check}`: {why}")
        lines.append(f"| `{check}` | " + " | ".join(states[check, v] for v in versions) + " |")
    lines += ["", "## Compatibility (feature x broker version, from the checks above)", "",
              "\"yes\": every check of the feature passed; \"no (typed refusal)\": the broker "
              "lacks it and pyprod refuses it with a typed error naming the version it needs.", "",
              "| Feature | " + " | ".join(versions) + " |", "|---|" + "---|" * len(versions)]
    for feature, prefixes in FEATURES:
        own = [c for c in checks if c.startswith(prefixes)]
        lines.append(f"| {feature} | " + " | ".join(
            _feature_cell([states[c, v] for c in own]) for v in versions) + " |")
    lines += ["", "| Version | Mode | Last run (commit, date, time) |", "|---|---|---|"]
    for v in VERSIONS:
        if v.version in runs:
            mode = "ZooKeeper" if v.zookeeper else "KRaft"
            lines.append(f"| {v.version} | {mode} | {runs[v.version][1] or '?'} |")
    lines += ["", "Failures:" if failures else "Failures: none.", *failures, ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    folder, out = (argv or sys.argv[1:])[:2]
    text = render(folder)
    with open(out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
