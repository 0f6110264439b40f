#!/usr/bin/env python3
"""Product functions whose body spans more than LIMIT lines (default 100), longest first.

Usage: scripts/long-functions.py [DIR [LIMIT]]   (DIR defaults to agent/src)

Test code is skipped: files named tests.rs or *_tests.rs, files under a tests/ directory, and
every `#[cfg(test)]` item. Braces inside strings, raw strings, chars and comments are ignored
(enough for rustfmt-formatted code). A count, not a check: it always exits 0."""
import re, sys, pathlib

LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 100
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "agent/src")

def strip(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j])); i = j
        elif c == 'r' and re.match(r'r#*"', src[i:i+10]) and (i == 0 or not (src[i-1].isalnum() or src[i-1]=='_')):
            m = re.match(r'r(#*)"', src[i:]); hashes = m.group(1)
            end = src.find('"' + hashes, i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:end])); i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j+1])); i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i+4]) or (c == "'" and src[i+1:i+2] == "\\"):
            m = re.match(r"'(\\[^']*|[^\\'])'", src[i:])
            if m:
                out.append(" " * len(m.group(0))); i += len(m.group(0))
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return "".join(out)

def match_brace(s, open_idx):
    depth = 0
    for k in range(open_idx, len(s)):
        if s[k] == "{": depth += 1
        elif s[k] == "}":
            depth -= 1
            if depth == 0: return k
    return len(s) - 1

results = []
for path in sorted(root.rglob("*.rs")):
    if path.name == "tests.rs" or path.name.endswith("_tests.rs") or "tests" in path.parts[:-1]:
        continue
    s = strip(path.read_text())
    # blank out #[cfg(test)] items
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", s))):
        b = s.find("{", m.end()); semi = s.find(";", m.end())
        if semi != -1 and (b == -1 or semi < b):
            continue
        e = match_brace(s, b)
        s = s[:m.start()] + "".join(ch if ch == "\n" else " " for ch in s[m.start():e+1]) + s[e+1:]
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", s):
        # find body start: first '{' or ';' at paren depth 0 after signature
        k, depth = m.end(), 0
        while k < len(s):
            ch = s[k]
            if ch in "(<[": depth += 1
            elif ch in ")>]": depth -= 1 if not (ch == ">" and s[k-1] == "-") else 0
            elif ch == ";" and depth <= 0: k = -1; break
            elif ch == "{" and depth <= 0: break
            k += 1
        if k < 0 or k >= len(s): continue
        e = match_brace(s, k)
        start_line = s.count("\n", 0, m.start()) + 1
        end_line = s.count("\n", 0, e) + 1
        span = end_line - start_line + 1
        if span > LIMIT:
            results.append((span, f"{path}:{start_line}", m.group(1)))
for span, loc, name in sorted(results, reverse=True):
    print(f"{span:5d}  {name:30s} {loc}")
print(f"{len(results)} functions over {LIMIT} lines under {root}")
