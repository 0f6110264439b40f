#!/usr/bin/env python3
"""The crate dependency rule (ARCHITECTURE.md, "Crates"), checked over `cargo metadata`.

Layers, dependencies pointing one way only:
    messages <- pod <- {runtime, kube, host} <- actors <- agent;  http <- agent;  streaming <- http
`http` sees messages and the runtime traits, never the actors. Pure crates (`messages`, `pod`)
and `host` must not pull in actix (pod: not tokio either), and only the adapters may use
bollard or kube. Exits 1 naming every dependency that breaks the rule.
"""
import json
import subprocess
import sys

# For each workspace crate: the workspace crates it may depend on (normal and build deps).
ALLOWED = {
    "dockerlet-messages": set(),
    "dockerlet-pod": {"dockerlet-messages"},
    "dockerlet-runtime": {"dockerlet-messages", "dockerlet-pod"},
    "dockerlet-kube": {"dockerlet-messages", "dockerlet-pod"},
    "dockerlet-host": {"dockerlet-messages", "dockerlet-pod"},
    "dockerlet-actors": {"dockerlet-messages", "dockerlet-pod", "dockerlet-runtime", "dockerlet-kube", "dockerlet-host"},
    "dockerlet-http": {"dockerlet-messages", "dockerlet-runtime", "dockerlet-streaming"},
    "dockerlet-streaming": set(),
    "dockerlet": {"dockerlet-messages", "dockerlet-pod", "dockerlet-runtime", "dockerlet-kube", "dockerlet-host",
                  "dockerlet-actors", "dockerlet-http", "dockerlet-streaming"},
}
# Fixtures any crate's tests may use: the in-memory API server (kube's API client is tested
# against it, as kube-rs tests against a mock API server).
TEST_FIXTURES = {"dockerlet-fake-apiserver"}
# External crates a layer must not use, and why.
BANNED = {
    "dockerlet-messages": {"bollard": "data only", "kube": "data only", "tokio": "data only"},
    "dockerlet-pod": {"actix": "pure: no actors", "tokio": "pure: no I/O", "bollard": "pure: no I/O",
                      "kube": "pure: no I/O", "reqwest": "pure: no I/O", "notify": "pure: no I/O"},
    "dockerlet-host": {"actix": "no actors below the actor layer", "bollard": "Docker is the runtime crate's",
                       "kube": "the API is the kube crate's"},
    "dockerlet-runtime": {"actix": "no actors below the actor layer", "kube": "the API is the kube crate's"},
    "dockerlet-kube": {"actix": "no actors below the actor layer", "bollard": "Docker is the runtime crate's"},
    "dockerlet-actors": {"bollard": "Docker through dockerlet-runtime", "kube": "the API through dockerlet-kube"},
    "dockerlet-http": {"bollard": "Docker through dockerlet-runtime", "kube": "the API through dockerlet-kube"},
    "dockerlet-streaming": {"actix": "protocol framing only: no actors", "actix-web": "no server: the http crate drives it",
                            "tokio": "sans-I/O: only the tokio-util codec traits", "bollard": "no Docker", "kube": "no API"},
}
# Test-support crates (anything not listed above) may depend on anything but the product's
# internals they exercise through the binary; they are not checked.

meta = json.loads(subprocess.check_output(["cargo", "metadata", "--format-version", "1", "--no-deps"]))
errors = []
for pkg in meta["packages"]:
    name = pkg["name"]
    if name not in ALLOWED:
        continue
    for dep in pkg["dependencies"]:
        if dep["kind"] == "dev":
            # Dev-dependencies may add test fakes of lower layers (feature "fake") and the test API
            # server (a fixture that depends on no adapter, so it makes no circle), nothing more.
            if dep["name"].startswith("dockerlet-") and dep["name"] not in ALLOWED[name] | {name} | TEST_FIXTURES:
                errors.append(f"{name} dev-depends on {dep['name']}, which the layering forbids")
            continue
        d = dep["name"]
        if d.startswith("dockerlet-") or d == "dockerlet":
            if d not in ALLOWED[name]:
                errors.append(f"{name} depends on {d}: allowed are {sorted(ALLOWED[name]) or 'none'}")
        elif d in BANNED.get(name, {}):
            errors.append(f"{name} depends on {d}: {BANNED[name][d]}")
for e in errors:
    print(f"layering: {e}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"layering: {len(ALLOWED)} crates follow the dependency rule")


def module_cycles(crate_dir):
    """Cycles among the top-level modules of one crate, from `crate::<module>` paths."""
    import os
    import re

    src = os.path.join(crate_dir, "src")
    modules = {}
    for entry in os.listdir(src):
        path = os.path.join(src, entry)
        name = entry[:-3] if entry.endswith(".rs") else entry
        if name in ("lib", "main", "bin"):
            continue
        files = [path] if entry.endswith(".rs") else [
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".rs")]
        modules.setdefault(name, []).extend(files)
    edges = {m: set() for m in modules}
    for m, files in modules.items():
        for f in files:
            text = open(f).read()
            # Test modules may use anything; only production code counts.
            text = text.split("#[cfg(test)]\nmod tests")[0]
            # Comments (doc links included) are not imports.
            text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
            for target in re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text):
                if target in modules and target != m:
                    edges[m].add(target)
    cycles, state = [], {}

    def visit(m, stack):
        state[m] = "open"
        for t in sorted(edges[m]):
            if state.get(t) == "open":
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = "done"

    for m in sorted(modules):
        if m not in state:
            visit(m, [m])
    return cycles


cycle_errors = []
for pkg in meta["packages"]:
    if pkg["name"] in ALLOWED:
        import os
        for cycle in module_cycles(os.path.dirname(pkg["manifest_path"])):
            cycle_errors.append(f"{pkg['name']}: modules import each other in a circle: {' -> '.join(cycle)}")
for e in cycle_errors:
    print(f"layering: {e}", file=sys.stderr)
if cycle_errors:
    sys.exit(1)
print("layering: no module of a product crate imports another in a circle")
