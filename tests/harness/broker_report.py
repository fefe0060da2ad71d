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
VARIANTS = {"test_transactions_commit_and_abort": ("transactions_v2", "v2", "v1")}
# check -> the feature without which it does not run (its cell: "n/a")
ONLY_WITH = {"test_transactions_v1_on_4x_without_tv2": "kraft4"}
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
    for check in checks:
        row = []
        for ver in versions:
            state, why = runs[ver][0].get(check, ("not run", ""))
            if state == "passed" and check in REFUSALS and not supports(ver, REFUSALS[check]):
                state = "passed (refused)"
            elif state == "passed" and check in VARIANTS:
                feature, yes, no = VARIANTS[check]
                state = f"passed ({yes if supports(ver, feature) else no})"
            elif state == "not run" and BY_VERSION[ver].refused:
                state = "refused"  # below what pyprod supports: the refusal checks only
            elif state == "not run" and (check.startswith(REFUSED_ONLY) or (
                    check in ONLY_WITH and not supports(ver, ONLY_WITH[check]))):
                state = "n/a"
            elif state == "failed":
                state = "FAILED"
                failures.append(f"- {ver} `{check}`: {why}")
            row.append(state)
        lines.append(f"| `{check}` | " + " | ".join(row) + " |")
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
