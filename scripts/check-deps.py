#!/usr/bin/env python3
"""Licences and duplicate versions of every crate the workspace builds, over `cargo metadata`
(what `cargo deny check licenses bans` checks, without installing cargo-deny).

- Licences: each package's SPDX expression (`MIT OR Apache-2.0`, legacy `MIT/Apache-2.0`) must be
  satisfiable with the licences in `ALLOWED_LICENCES`; a package without a licence fails.
- Duplicates: a crate built in two semver-incompatible versions (1.x and 2.x, 0.3 and 0.4) is
  compiled twice. Those present when this check came are listed in
  scripts/duplicate-versions.txt and reported in one line; a new one fails, naming who pulls in
  each version (`cargo tree -i <crate>@<version>` shows the paths). A listed crate that is no
  longer duplicated is reported, so the list only shrinks.

Runs in `make lint`; exits 1 naming every package that breaks a rule.
"""
import json
import os
import re
import subprocess
import sys

# The licences in use (December 2026), all permissive; MPL, GPL and other copyleft are not here.
ALLOWED_LICENCES = {
    "MIT",
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",  # ar_archive_writer (rustc's own licence)
    "BSD-2-Clause",
    "BSD-3-Clause",  # subtle, matchit, encoding_rs
    "ISC",  # ring, rustls-webpki
    "Unicode-3.0",  # the icu crates (url's IDNA)
    "Zlib",
    "CC0-1.0",  # notify
    "Unlicense",
    "BSL-1.0",
}
DUPLICATES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "duplicate-versions.txt")


def satisfiable(expr):
    """Whether an SPDX expression can be met with ALLOWED_LICENCES (AND binds tighter than OR)."""
    tokens = re.findall(r"\(|\)|[A-Za-z0-9.+-]+(?:\s+WITH\s+[A-Za-z0-9.+-]+)?", expr.replace("/", " OR "))
    pos = [0]

    def primary():
        tok = tokens[pos[0]]
        pos[0] += 1
        if tok == "(":
            value = disjunction()
            pos[0] += 1  # ")"
            return value
        licence = re.sub(r"\s+", " ", tok)
        return licence in ALLOWED_LICENCES

    def conjunction():
        value = primary()
        while pos[0] < len(tokens) and tokens[pos[0]] == "AND":
            pos[0] += 1
            value = primary() and value
        return value

    def disjunction():
        value = conjunction()
        while pos[0] < len(tokens) and tokens[pos[0]] == "OR":
            pos[0] += 1
            value = conjunction() or value
        return value

    return disjunction()


def compat(version):
    """The semver-compatible series cargo unifies within: 2.x -> "2", 0.4.x -> "0.4", 0.0.3 -> "0.0.3"."""
    major, minor, patch = (re.match(r"(\d+)\.(\d+)\.(\d+)", version).groups())
    if major != "0":
        return major
    return f"0.{minor}" if minor != "0" else f"0.0.{patch}"


def main():
    host = re.search(r"^host: (\S+)", subprocess.check_output(["rustc", "-vV"], text=True), re.M).group(1)
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", host]))
    built = {n["id"] for n in meta["resolve"]["nodes"]}
    packages = [p for p in meta["packages"] if p["id"] in built]
    errors = []
    for p in packages:
        licence = p.get("license")
        if not licence:
            errors.append(f"{p['name']} {p['version']} declares no SPDX licence (license_file: {p.get('license_file')})")
        elif not satisfiable(licence):
            errors.append(f"{p['name']} {p['version']}: licence {licence!r} is not in the allowed list "
                          f"(scripts/check-deps.py ALLOWED_LICENCES)")
    series = {}
    for p in packages:
        series.setdefault(p["name"], {}).setdefault(compat(p["version"]), []).append(p["version"])
    duplicated = {name: s for name, s in series.items() if len(s) > 1}
    known = set()
    if os.path.exists(DUPLICATES_FILE):
        for line in open(DUPLICATES_FILE):
            line = line.split("#")[0].strip()
            if line:
                known.add(line)
    parents = {}
    for node in meta["resolve"]["nodes"]:
        for d in node["deps"]:
            parents.setdefault(d["pkg"], []).append(node["id"].split("#")[-1])
    for name in sorted(set(duplicated) - known):
        versions = []
        for p in packages:
            if p["name"] == name:
                versions.append(f"{p['version']} (from {', '.join(sorted(set(parents.get(p['id'], []))))})")
        errors.append(f"{name} is built in {len(duplicated[name])} incompatible versions: {'; '.join(versions)}; "
                      f"align them, or list {name} in scripts/duplicate-versions.txt saying why")
    gone = sorted(known - set(duplicated))
    for e in errors:
        print(f"deps: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"deps: {len(packages)} crates, every licence allowed; {len(duplicated)} built in two incompatible "
          f"versions, all known (scripts/duplicate-versions.txt)"
          + (f"; no longer duplicated, remove from the list: {', '.join(gone)}" if gone else ""))


if __name__ == "__main__":
    main()
