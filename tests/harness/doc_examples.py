"""The ```python blocks of README.md and docs/*.md, and what running one against the suite's
brokers takes: the addresses, files and secrets the prose names replaced by the test's own, and
the names the prose defines around a block ("givens") supplied by the test.

Every block is one of two kinds: ``spark`` (it needs a SparkSession: tests/spark runs it) or
``plain`` (tests/test_doc_examples.py). ``secure`` blocks also need the secured cluster.
"""
from __future__ import annotations

import ast
import asyncio
import glob
import inspect
import itertools
import os
import re
import sys
import types
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the placeholder addresses the docs use for a user's brokers
ADDRESS = re.compile(r'"(?:127\.0\.0\.1:9092|localhost:9092|host:9092|host1:9092,host2:9092|'
                     r'broker:9092|broker1:9093)"')


_modules = itertools.count()


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository
    line: int  # of the opening fence
    code: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        return "spark" if re.search(r"\bdf\b|\bspark\b|stream_df", self.code) else "plain"

    @property
    def secure(self) -> bool:
        return "security_protocol" in self.code or "kafka.security.protocol" in self.code


def doc_files() -> list:
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                             "*.md")))


def blocks(kind: str | None = None) -> list:
    """Every ```python block (of ``kind`` if given), in file order."""
    out = []
    for path in doc_files():
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        start = None
        for i, line in enumerate(lines, 1):
            if start is None and line.strip() == "```python":
                start, body = i, []
            elif start is not None and line.strip() == "```":
                block = Block(os.path.relpath(path, ROOT), start, "\n".join(body) + "\n")
                if kind is None or block.kind == kind:
                    out.append(block)
                start = None
            elif start is not None:
                body.append(line)
    return out


def secure_listener(code: str) -> str:
    """The secured cluster's listener a block's settings describe."""
    if "SASL_SSL" in code:
        return "SASL_SSL"
    return "MTLS" if "certfile" in code or "ssl_keyfile" in code else "SSL"


def prepare(block: Block, bootstrap: str, certs=None, tmp_dir: str | None = None) -> str:
    """The block's code with the docs' placeholders replaced by the test's brokers and files."""
    code = ADDRESS.sub(repr(bootstrap).replace("'", '"'), block.code)
    if certs is not None:
        files = {"/etc/kafka/ca.pem": certs.ca_file, "ca.pem": certs.ca_file,
                 "client.pem": certs.client_cert, "client.key": certs.client_key_encrypted,
                 "/etc/kafka/truststore.p12": certs.truststore_p12}
        for name, path in files.items():
            code = code.replace(f'"{name}"', repr(path))
        code = code.replace('.option("kafka.ssl.truststore.password", "...")',
                            f'.option("kafka.ssl.truststore.password", '
                            f'{certs.truststore_password!r})')
    if tmp_dir is not None:
        code = re.sub(r'"(/chk/[^"]+)"', lambda m: repr(tmp_dir + m.group(1)), code)
    return code


def namespace(givens: dict) -> dict:
    """A fresh module's namespace holding ``givens``, importable by name (sys.modules), so
    what a block defines pickles by reference (a multiprocessing Pool's function)."""
    module = types.ModuleType(f"doc_example_{next(_modules)}")
    module.__dict__.update(givens)
    sys.modules[module.__name__] = module
    return module.__dict__


def run(code: str, name: str, namespace: dict) -> None:
    """Run a block in ``namespace`` (see namespace()); one with a top-level ``await`` (the
    asyncio docs) runs in asyncio.run."""
    compiled = compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)


def close_producers(namespace: dict) -> None:
    """Close what a block left open (its producers), so nothing outlives the test."""
    from pyprod import KafkaProducer
    for value in list(namespace.values()):
        if isinstance(value, KafkaProducer):
            value.close(timeout=10)
