#!/usr/bin/env python3
"""The layering rule (ARCHITECTURE.md, "Crates"), checked over `cargo metadata`, `cargo tree` and
the sources. Exits 1 naming every dependency or import that breaks it.

1. Crates. Dependencies point one way only:
       messages <- pod <- {runtime, kube, host} <- actors <- agent;  http <- agent;  streaming <- http
       runtime <- probe <- actors  (the probe and hook handlers, an adapter beside runtime)
       metrics <- {runtime, actors, http, agent}  (metrics, beside messages, depends on no workspace crate)
       cni <- actors <- agent  (the CNI client, beside host: no workspace crate, no actors)
   `http` sees messages and the runtime traits, never the actors. Checked on the transitive
   normal-dependency graph (`cargo metadata`'s `resolve`; dev-dependencies apart, see below).
2. External crates a layer must not compile: directly (`BANNED`), and, for the crates below the
   actor layer, anywhere in what they pull in (`BANNED_TRANSITIVE`: e.g. `pod`, `host`, `runtime`
   and `kube` compile without actix, and `messages`, `pod`, `host` and `kube` without
   prometheus-client). The transitive check asks `cargo tree -p <crate> -e normal`,
   which resolves features for that crate alone: `cargo metadata`'s resolve unifies the whole
   workspace's features, so `messages` always has actix there (the actor layer turns on its
   `actix` feature).
3. Files. No source file of any workspace crate imports another in a circle, submodules
   included. An import is a `crate::`, `super::` or `self::` path (in a `use` or inline) or a
   path through a child module the file declares; it names the deepest module file the path
   reaches. A file using its own ancestors (`use super::Item` into the parent's `mod.rs`) is the
   module tree, not an import; test code (`#[cfg(test)]` items, `tests.rs` modules) may use
   anything.
"""
import json
import os
import re
import subprocess
import sys

# For each workspace crate: the workspace crates it may depend on (normal and build deps).
ALLOWED = {
    "dockerlet-messages": set(),
    "dockerlet-metrics": set(),
    "dockerlet-pod": {"dockerlet-messages"},
    "dockerlet-runtime": {"dockerlet-messages", "dockerlet-metrics", "dockerlet-pod"},
    "dockerlet-probe": {"dockerlet-messages", "dockerlet-pod", "dockerlet-runtime"},
    "dockerlet-kube": {"dockerlet-messages", "dockerlet-pod"},
    "dockerlet-host": {"dockerlet-messages", "dockerlet-pod"},
    "dockerlet-cni": set(),
    "dockerlet-actors": {"dockerlet-messages", "dockerlet-metrics", "dockerlet-pod", "dockerlet-runtime",
                         "dockerlet-probe", "dockerlet-kube", "dockerlet-host", "dockerlet-cni"},
    "dockerlet-http": {"dockerlet-messages", "dockerlet-metrics", "dockerlet-runtime", "dockerlet-streaming"},
    "dockerlet-streaming": set(),
    "dockerlet": {"dockerlet-messages", "dockerlet-metrics", "dockerlet-pod", "dockerlet-runtime", "dockerlet-probe",
                  "dockerlet-kube", "dockerlet-host", "dockerlet-cni", "dockerlet-actors", "dockerlet-http", "dockerlet-streaming"},
}
# Fixtures any crate's tests may use: the in-memory API server (kube's API client is tested
# against it, as kube-rs tests against a mock API server).
TEST_FIXTURES = {"dockerlet-fake-apiserver"}
# External crates a layer must not depend on directly, and why. A name ending in `*` is a prefix.
BANNED = {
    "dockerlet-messages": {"bollard": "data only", "kube": "data only", "tokio": "data only",
                           "prometheus-client": "data only: the metrics are dockerlet-metrics'"},
    "dockerlet-metrics": {"actix*": "metric handles only: no actors", "tokio": "metric handles only: no I/O",
                          "bollard": "no Docker", "kube": "no API"},
    "dockerlet-pod": {"actix*": "pure: no actors", "tokio": "pure: no I/O", "bollard": "pure: no I/O",
                      "kube": "pure: no I/O", "reqwest": "pure: no I/O", "notify": "pure: no I/O"},
    "dockerlet-host": {"actix*": "no actors below the actor layer", "bollard": "Docker is the runtime crate's",
                       "kube": "the API is the kube crate's"},
    "dockerlet-runtime": {"actix*": "no actors below the actor layer", "kube": "the API is the kube crate's"},
    "dockerlet-cni": {"actix*": "no actors below the actor layer", "bollard": "the network is not Docker's",
                      "kube": "the API is the kube crate's"},
    "dockerlet-kube": {"actix*": "no actors below the actor layer", "bollard": "Docker is the runtime crate's"},
    "dockerlet-probe": {"actix*": "no actors below the actor layer", "bollard": "exec through dockerlet-runtime",
                        "kube": "the API is the kube crate's"},
    "dockerlet-actors": {"bollard": "Docker through dockerlet-runtime", "kube": "the API through dockerlet-kube",
                         "tonic*": "gRPC probes through dockerlet-probe", "httparse": "HTTP probes through dockerlet-probe",
                         "reqwest": "HTTP through dockerlet-probe and dockerlet-host"},
    "dockerlet-http": {"bollard": "Docker through dockerlet-runtime", "kube": "the API through dockerlet-kube"},
    "dockerlet-streaming": {"actix*": "protocol framing only: no actors", "actix-web": "no server: the http crate drives it",
                            "tokio": "sans-I/O: only the tokio-util codec traits", "bollard": "no Docker", "kube": "no API"},
}
# External crates a layer must not compile at all, through any normal dependency (features
# resolved for the crate alone: `messages` without its `actix` feature).
NO_METRICS = "no metrics below the runtime adapter: they are dockerlet-metrics', used from runtime up"
BANNED_TRANSITIVE = {
    "dockerlet-messages": {"actix*": "data only: the actix impls are behind the `actix` feature",
                           "tokio": "data only", "bollard": "data only", "kube": "data only",
                           "prometheus-client": NO_METRICS},
    "dockerlet-metrics": {"actix*": "metric handles only: no actors", "tokio": "metric handles only: no I/O",
                          "bollard": "no Docker", "kube": "no API"},
    "dockerlet-pod": {"actix*": "pure: no actors", "tokio": "pure: no I/O", "bollard": "pure: no I/O",
                      "kube": "pure: no I/O", "prometheus-client": NO_METRICS},
    "dockerlet-host": {"actix*": "no actors below the actor layer", "bollard": "Docker is the runtime crate's",
                       "kube": "the API is the kube crate's", "prometheus-client": NO_METRICS},
    "dockerlet-cni": {"actix*": "no actors below the actor layer", "bollard": "the network is not Docker's",
                      "kube": "the API is the kube crate's", "prometheus-client": NO_METRICS},
    # The runtime adapter times its Docker calls (`runtime::measured`): it compiles the metrics.
    "dockerlet-runtime": {"actix*": "no actors below the actor layer", "kube": "the API is the kube crate's"},
    "dockerlet-kube": {"actix*": "no actors below the actor layer", "bollard": "Docker is the runtime crate's",
                       "prometheus-client": NO_METRICS},
    "dockerlet-probe": {"actix*": "no actors below the actor layer", "kube": "the API is the kube crate's"},
    "dockerlet-streaming": {"actix*": "protocol framing only: no actors", "bollard": "no Docker", "kube": "no API"},
}
# File circles that are known and being ended elsewhere; each names who ends it. Exactly these
# edges are dropped before the search, so any other circle through these files still fails.
ALLOWED_CIRCLES: set = set()
# Test-support crates (anything not in ALLOWED) may depend on anything; their files are still
# checked for circles.


def banned(name, table):
    for pattern, why in table.items():
        if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return why
    return None


def closure(name):
    """The workspace crates `name` may reach: what it may use, and what those may use."""
    seen, todo = set(), list(ALLOWED[name])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(ALLOWED.get(d, ()))
    return seen


def check_crates(meta):
    errors = []
    by_id = {p["id"]: p for p in meta["packages"]}
    members = set(meta["workspace_members"])
    for pkg in meta["packages"]:
        name = pkg["name"]
        if pkg["id"] not in members or name not in ALLOWED:
            continue
        for dep in pkg["dependencies"]:
            d = dep["name"]
            if dep["kind"] == "dev":
                # Dev-dependencies may add test fakes of lower layers (feature "fake") and the test
                # API server (a fixture that depends on no adapter, so it makes no circle).
                if d.startswith("dockerlet-") and d not in ALLOWED[name] | {name} | TEST_FIXTURES:
                    errors.append(f"{name} dev-depends on {d}, which the layering forbids")
                continue
            why = banned(d, BANNED.get(name, {}))
            if why:
                errors.append(f"{name} depends on {d}: {why}")
    # Transitive workspace crates over the normal and build edges of the resolve graph.
    graph = {}
    for node in meta["resolve"]["nodes"]:
        graph[node["id"]] = [d["pkg"] for d in node["deps"]
                             if any(k["kind"] in (None, "build") for k in d["dep_kinds"])]
    for pid in members:
        name = by_id[pid]["name"]
        if name not in ALLOWED:
            continue
        seen, todo, via = set(), [pid], {pid: None}
        while todo:
            cur = todo.pop()
            for nxt in graph.get(cur, []):
                if nxt not in seen:
                    seen.add(nxt)
                    via[nxt] = cur
                    todo.append(nxt)
        reachable = closure(name)
        for dep_id in seen:
            d = by_id[dep_id]["name"]
            if dep_id in members and d != name and d not in reachable:
                path, cur = [], dep_id
                while cur is not None:
                    path.append(by_id[cur]["name"])
                    cur = via[cur]
                errors.append(f"{name} reaches {d} ({' -> '.join(reversed(path))}): allowed are "
                              f"{sorted(reachable) or 'none'}")
    return errors


def check_transitive_bans():
    errors = []
    for name, table in BANNED_TRANSITIVE.items():
        out = subprocess.check_output(["cargo", "tree", "-q", "-p", name, "-e", "normal", "--prefix", "none",
                                       "--format", "{p}"], text=True)
        found = sorted({line.split()[0] for line in out.splitlines() if line.strip()})
        for d in found:
            why = banned(d, table)
            if why:
                errors.append(f"{name} compiles {d} (`cargo tree -p {name} -e normal -i {d}` shows the path): {why}")
    return errors


# --- file-level import circles ------------------------------------------------------------

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    """The code without comments, string and char literals (so braces and paths in them don't count)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\\\'\n])\'', re.S)
    return pattern.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0).startswith("/") else '""', text)


def is_test_cfg(attr):
    inner = attr.replace(" ", "")
    return ("cfg(test)" in inner or "cfg(any(test," in inner or "cfg(all(test," in inner) and "not(test" not in inner


def strip_test_items(code):
    """Removes every item under a test-only `#[cfg(...)]` attribute; returns the code and the names
    of the `mod x;` declarations it removed (test modules in files of their own)."""
    out, test_mods, i = [], set(), 0
    attr = re.compile(r"#\[cfg\(")
    while True:
        m = attr.search(code, i)
        if not m:
            out.append(code[i:])
            break
        end = code.index("]", m.start())
        depth, j = 0, m.start() + 1
        while j < len(code):  # the attribute's closing bracket, nesting included
            if code[j] == "[":
                depth += 1
            elif code[j] == "]":
                depth -= 1
                if depth == 0:
                    end = j
                    break
            j += 1
        if not is_test_cfg(code[m.start():end + 1]):
            out.append(code[i:end + 1])
            i = end + 1
            continue
        out.append(code[i:m.start()])
        # The item: up to its `;` or through its matching brace, whichever comes first.
        j, depth = end + 1, 0
        while j < len(code):
            c = code[j]
            if c == ";" and depth == 0:
                break
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        item = code[end + 1:j + 1]
        decl = re.match(rf"\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", item)
        if decl:
            test_mods.add(decl.group(1))
        i = j + 1
    return "".join(out), test_mods


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"::\*$", "", tree)]
    prefix, body = tree[:brace], tree[brace + 1:tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for c in body:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (c == "{") - (c == "}")
        cur += c
    parts.append(cur)
    paths = []
    for p in parts:
        if not p:
            continue
        if p == "self":
            paths.append(prefix.rstrip(":"))
        else:
            paths.extend(prefix + x for x in expand_use_tree(p))
    return paths


class Crate:
    """The module tree of one crate target, one node per source file."""

    def __init__(self, root_file):
        self.files = {}  # module path (tuple) -> file
        self.children = {}  # module path -> set of child module names declared in that file
        self.code = {}  # module path -> code without comments, strings and test items
        self.walk(root_file, ())

    def walk(self, path, mod):
        code, test_mods = strip_test_items(strip_comments_and_strings(open(path).read()))
        self.files[mod], self.code[mod], self.children[mod] = path, code, set()
        base = os.path.dirname(path)
        stem = os.path.basename(path)[:-3]
        if stem not in ("lib", "main", "mod"):
            base = os.path.join(base, stem)
        for m in re.finditer(rf"(?:^|[;}}\]\s])(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", code):
            child = m.group(1)
            if child in test_mods:
                continue
            for candidate in (os.path.join(base, child + ".rs"), os.path.join(base, child, "mod.rs")):
                if os.path.exists(candidate):
                    self.children[mod].add(child)
                    self.walk(candidate, mod + (child,))
                    break

    def resolve(self, mod, path):
        """The deepest module file a path written in module `mod` reaches, or None."""
        segs = path.split("::")
        if segs[0] == "crate":
            base, segs = (), segs[1:]
        elif segs[0] == "self":
            base, segs = mod, segs[1:]
        elif segs[0] == "super":
            base = mod
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
        elif segs[0] in self.children.get(mod, ()):
            base = mod
        else:
            return None
        for s in segs:
            if base + (s,) in self.files:
                base = base + (s,)
            else:
                break
        return base

    def edges(self):
        edges = {m: set() for m in self.files}
        for mod, code in self.code.items():
            refs = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                refs.extend(expand_use_tree(m.group(1)))
            rest = re.sub(r"\buse\s+[^;]+;", "", code)
            heads = {"crate", "super", "self"} | self.children[mod]
            for m in re.finditer(rf"(?<![\w:])({IDENT}(?:::{IDENT})+)", rest):
                if m.group(1).split("::")[0] in heads:
                    refs.append(m.group(1))
            for ref in refs:
                target = self.resolve(mod, ref)
                # Its own ancestors (the module tree) and itself are not imports.
                if target is None or target == mod[:len(target)]:
                    continue
                edges[mod].add(target)
        return edges


def cycles_of(edges):
    """One circle per strongly connected component of more than one file (Tarjan)."""
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return comps


def name(mod):
    return "::".join(mod) or "crate"


used_allowances = set()


def check_files(meta):
    errors, files = [], 0
    members = set(meta["workspace_members"])
    for pkg in meta["packages"]:
        if pkg["id"] not in members:
            continue
        roots = {t["src_path"] for t in pkg["targets"] if set(t["kind"]) & {"lib", "bin", "proc-macro"}}
        for root in sorted(roots):
            crate = Crate(root)
            files += len(crate.files)
            edges = crate.edges()
            for (pkg_name, a, b) in ALLOWED_CIRCLES:
                if pkg_name == pkg["name"]:
                    ta, tb = tuple(a.split("::")), tuple(b.split("::"))
                    if tb in edges.get(ta, set()):
                        edges[ta].discard(tb)
                        used_allowances.add((pkg_name, a, b))
            for comp in cycles_of(edges):
                ties = [f"{name(a)} -> {name(b)}" for a in comp for b in sorted(edges[a]) if b in comp]
                where = os.path.relpath(root, os.path.dirname(pkg["manifest_path"]))
                errors.append(f"{pkg['name']} ({where}): files import each other in a circle: "
                              f"{', '.join(crate.files[m].split('/src/', 1)[-1] for m in comp)} ({'; '.join(ties)})")
    return errors, files


def main():
    meta = json.loads(subprocess.check_output(["cargo", "metadata", "--format-version", "1", "--locked"]))
    errors = check_crates(meta)
    errors += check_transitive_bans()
    file_errors, files = check_files(meta)
    errors += file_errors
    for stale in sorted(set(ALLOWED_CIRCLES) - used_allowances):
        errors.append(f"ALLOWED_CIRCLES allows {stale[1]} -> {stale[2]} in {stale[0]}, which no longer imports it: "
                      "remove the entry")
    for e in errors:
        print(f"layering: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"layering: {len(ALLOWED)} crates follow the dependency rule (transitively); "
          f"{files} source files, none importing another in a circle "
          f"({len(ALLOWED_CIRCLES)} allowed, see ALLOWED_CIRCLES)")


if __name__ == "__main__":
    main()
