//! kubelet's `$(VAR)` expansion (`third_party/forked/golang/expansion`), used by command, args,
//! env values and `subPathExpr`.

use std::collections::HashMap;

/// Kubelet's `$(VAR)` expansion: known names are replaced, `$$` escapes, the rest is kept.
pub fn expand(input: &str, env: &HashMap<&str, &str>) -> String {
    expand_with(input, |name| env.get(name).map(|v| v.to_string()))
}

/// [`expand`] with a lookup: `lookup(name)` gives a variable's value, `None` keeps `$(name)`.
pub fn expand_with(input: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}
