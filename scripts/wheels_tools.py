"""Helpers of scripts/wheels.sh (run by the tools venv's Python).

  contents WHEEL           no .c, every module stripped and without RUNPATH; prints the sizes
  cibw IDENTIFIER          test-requires (one a line), then test-command, from pyproject.toml's
                           [tool.cibuildwheel] with the overrides that select IDENTIFIER
  cibw-env IDENTIFIER       its environment, K=V a line (the test step runs with it)
  record TSV ABI ARCH K=V  sets fields of one row of the results file (a row per ABI x arch)
  table TSV MARKDOWN       the results as a Markdown table (printed, and written to MARKDOWN)
"""
import csv
import fnmatch
import io
import os
import sys
import tomllib
import zipfile

FIELDS = ["abi", "arch", "built", "size", "tested", "counts", "interpreter", "notes", "commit", "date"]
ABIS = ["cp310", "cp311", "cp312", "cp313", "cp313t", "cp314", "cp314t"]
ARCHES = ["x86_64", "aarch64"]


def contents(path):
    from elftools.elf.elffile import ELFFile

    whl = zipfile.ZipFile(path)
    names = whl.namelist()
    bad = [n for n in names if n.endswith(".c")]
    sos = [n for n in names if n.endswith(".so")]
    for n in sos:
        elf = ELFFile(io.BytesIO(whl.read(n)))
        secs = [s.name for s in elf.iter_sections()]
        if ".symtab" in secs or any(s.startswith(".debug") for s in secs):
            bad.append(n + " (not stripped)")
        dyn = elf.get_section_by_name(".dynamic")
        if any(t.entry.d_tag in ("DT_RPATH", "DT_RUNPATH") for t in dyn.iter_tags()):
            bad.append(n + " (RUNPATH)")
    if bad:
        sys.exit("wheels: bad files: " + ", ".join(bad))
    unpacked = sum(i.file_size for i in whl.infolist())
    so = sum(whl.getinfo(n).file_size for n in sos)
    print("wheels: %s: %d files (%d modules), %.2f MB packed, %.2f MB unpacked (modules %.2f MB); "
          "no .c, stripped, no RUNPATH" % (os.path.basename(path), len(names), len(sos),
                                           os.path.getsize(path) / 1e6, unpacked / 1e6, so / 1e6))


def options(ident):
    with open("pyproject.toml", "rb") as f:
        c = tomllib.load(f)["tool"]["cibuildwheel"]
    for o in c.get("overrides", []):  # cibuildwheel's overrides that select this build
        if any(fnmatch.fnmatch(ident, p) for p in o["select"].split()):
            c.update({k: v for k, v in o.items() if k != "select"})
    return c


def cibw(ident):
    c = options(ident)
    print("\n".join(c["test-requires"]))
    print(c["test-command"])


def cibw_env(ident):
    for k, v in options(ident).get("environment", {}).items():
        print(f"{k}={v}")


def load(tsv):
    if not os.path.exists(tsv):
        return {}
    with open(tsv, newline="") as f:
        return {(r["abi"], r["arch"]): r for r in csv.DictReader(f, delimiter="\t")}


def record(tsv, abi, arch, *pairs):
    rows = load(tsv)
    row = rows.setdefault((abi, arch), dict.fromkeys(FIELDS, ""))
    row.update(abi=abi, arch=arch)
    for p in pairs:
        k, _, v = p.partition("=")
        if k not in FIELDS:
            sys.exit("wheels_tools: unknown field " + k)
        row[k] = v.replace("\t", " ").replace("\n", " ")
    with open(tsv, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS, delimiter="\t")
        w.writeheader()
        order = {(a, r): i for i, (a, r) in enumerate((a, r) for a in ABIS for r in ARCHES)}
        for key in sorted(rows, key=lambda k: order.get(k, 99)):
            w.writerow(rows[key])


def table(tsv, out):
    rows = load(tsv)
    lines = [
        "# Linux wheels: built and tested by scripts/wheels.sh",
        "",
        "Written by `scripts/wheels.sh` (a row is rewritten each time its ABI and architecture are",
        "built: `--abi`, `--arch` select them). Built: zig cc against glibc 2.17, `auditwheel repair`",
        "to manylinux_2_17 (= manylinux2014) and `auditwheel show` agreeing, modules stripped, no",
        "RUNPATH, no .c. Tested: pyproject.toml's cibuildwheel test step (its test-requires, then",
        "`pytest -x -q tests/kernels` on the installed wheel) in a fresh environment of that",
        "interpreter with no C compiler on PATH; aarch64 under qemu-aarch64 (user-mode emulation).",
        "Where each CPython comes from: scripts/lib/wheels_pythons.sh. Debian and org.bytedeco:cpython",
        "ship no free-threaded arm64 CPython: cp313t and cp314t aarch64 run on 3.13.15 and 3.14.7",
        "cross-built here with `--disable-gil` (scripts/lib/cpython_arm64.sh; `PYPROD_FT_ARM64_BUILD=1`",
        "builds them, and cp313t's cramjam 2.11.0 for arm64: Rust, maturin --zig). Without that",
        "install, a free-threaded ABI is compiled against the same version's headers with",
        "`Py_GIL_DISABLED` defined, the only ABI difference `--disable-gil` makes (3.14.7 built both",
        "ways here: the same header files; pyconfig.h differs in `Py_GIL_DISABLED` and",
        "`HAVE_BROKEN_NICE`): built and checked, not run.",
        "",
        "| ABI | arch | built (wheel size) | tested | tests | interpreter | notes | commit, date |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in ABIS:
        for r in ARCHES:
            row = rows.get((a, r))
            if row is None:
                lines.append(f"| {a} | {r} | not run yet | | | | | |")
                continue
            row = dict(row, size=f" ({int(row['size']) / 1e6:.2f} MB)" if row["size"] else "")
            lines.append("| {abi} | {arch} | {built}{size} | {tested} | {counts} | {interpreter} | "
                         "{notes} | {commit} {date} |".format(**row))
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"contents": contents, "cibw": cibw, "cibw-env": cibw_env, "record": record, "table": table}[cmd](*args)
