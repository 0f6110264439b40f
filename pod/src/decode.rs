//! Manifest text to a [`Pod`]: YAML or JSON is read into a JSON tree, and the tree is decoded
//! by serde_json's byte reader, the decoder of the API types that the API client (watches,
//! GETs) already uses. The agent so carries one copy of the API types' decoding code instead of
//! one per format: decoding `Pod` straight from YAML was about 1.7 MB of machine code, most of
//! it resident, for a parse that runs when a manifest changes.
//!
//! A decoding error names its field by path (`spec.containers[0].ports[0].containerPort`): the
//! tree is decoded from its pretty-printed text, where every member and element starts a line,
//! so the line serde_json reports leads back to the node.
//!
//! A YAML plain scalar keeps the text it was written as: a number or boolean where the API wants
//! a string (`version: 1.10`, `value: 8080`, `enabled: yes`) is decoded as that text, as a typed
//! YAML decoder reads it.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use serde_saphyr::Spanned;

/// One step of a path into the tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// An object member.
    Key(String),
    /// An array element.
    Index(usize),
}

/// A path in the API's notation: `spec.containers[0].image`.
pub fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// What a YAML document's tree keeps of its source, by path: the line of every node, and the
/// text of every number and boolean written as a plain scalar.
#[derive(Debug, Clone, Default)]
pub struct YamlSource {
    texts: HashMap<Vec<Step>, String>,
    lines: HashMap<Vec<Step>, u64>,
}

/// A YAML node as written; its scalars' text is recovered through their spans.
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(String, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a YAML node")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::UInt(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            members.push((key, map.next_value()?));
        }
        Ok(Node::Map(members))
    }
}

/// The YAML dialect of kubelet's manifests (YAML 1.1 through sigs.k8s.io/yaml): `0400` is octal,
/// as file modes (`defaultMode: 0400`) are written.
fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.legacy_octal_numbers = true;
    options
}

/// YAML that does not parse. Shown as serde-saphyr's first line (line, column and what was
/// wrong; the source snippet it adds after that line is left to the source error).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{first_line}")]
pub struct YamlError {
    /// The first line of serde-saphyr's message, without its `error: `.
    first_line: String,
    /// serde-saphyr's error.
    #[source]
    source: Arc<serde_saphyr::Error>,
}

impl From<serde_saphyr::Error> for YamlError {
    fn from(e: serde_saphyr::Error) -> Self {
        let message = e.to_string();
        let first = message.lines().next().unwrap_or_default();
        YamlError {
            first_line: first.trim_start_matches("error: ").to_string(),
            source: Arc::new(e),
        }
    }
}

/// A YAML document as a JSON tree, with the text of its plain numbers and booleans.
pub fn yaml_tree(text: &str) -> Result<(Value, YamlSource), YamlError> {
    let root: Spanned<Node> = serde_saphyr::from_str_with_options(text, yaml_options())?;
    let mut source = YamlSource::default();
    let mut path = Vec::new();
    let value = to_json(root, text, &mut path, &mut source);
    Ok((value, source))
}

/// The source text of a node (where it is defined, for an alias).
fn source_text<'a>(node: &Spanned<Node>, text: &'a str) -> Option<&'a str> {
    let span = node.defined.span();
    let start = usize::try_from(span.byte_offset()?).ok()?;
    let len = usize::try_from(span.byte_len()?).ok()?;
    text.get(start..start.checked_add(len)?)
}

fn to_json(node: Spanned<Node>, text: &str, path: &mut Vec<Step>, source: &mut YamlSource) -> Value {
    let written = matches!(
        node.value,
        Node::Bool(_) | Node::Int(_) | Node::UInt(_) | Node::Float(_)
    )
    .then(|| source_text(&node, text))
    .flatten();
    if let Some(written) = written {
        source.texts.insert(path.clone(), written.to_string());
    }
    source.lines.insert(path.clone(), node.referenced.line());
    match node.value {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(b),
        Node::Int(i) => Value::from(i),
        Node::UInt(u) => Value::from(u),
        // NaN and the infinities have no JSON number: their text stands (a string, as written).
        Node::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(written.map_or_else(|| f.to_string(), str::to_string))),
        Node::Str(s) => Value::String(s),
        Node::Seq(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    path.push(Step::Index(i));
                    let v = to_json(item, text, path, source);
                    path.pop();
                    v
                })
                .collect(),
        ),
        Node::Map(members) => {
            let mut map = Map::new();
            for (key, member) in members {
                path.push(Step::Key(key.clone()));
                let v = to_json(member, text, path, source);
                path.pop();
                map.insert(key, v);
            }
            Value::Object(map)
        }
    }
}

/// Why a tree is not a Pod: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The field's path; empty for the document itself.
    pub field: String,
    /// Its line in the YAML source.
    pub line: Option<u64>,
    /// serde_json's message, without its position in the generated text.
    pub message: String,
}

/// Decode `value`, the node at `at` of its document, as a Pod. From a YAML document
/// (`source`), a number or boolean where a string is wanted is replaced by its text and decoding
/// goes on, and an error gives its line.
pub fn decode_pod(mut value: Value, source: Option<&YamlSource>, at: &[Step]) -> Result<Pod, DecodeError> {
    // Each pass either decodes, fails, or turns one number or boolean into a string, which the
    // next error at that path finds a string already: the passes end.
    loop {
        let pretty = serde_json::to_vec_pretty(&value).expect("a JSON tree serializes");
        let error = match serde_json::from_slice::<Pod>(&pretty) {
            Ok(pod) => return Ok(pod),
            Err(e) => e,
        };
        let path = path_at_line(&value, error.line());
        let message = error.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m)
            .to_string();
        let in_document = [at, &path].concat();
        let written = source.and_then(|s| s.texts.get(&in_document));
        match (written, node_mut(&mut value, &path)) {
            (Some(written), Some(node)) if message.contains("expected a string") && !node.is_string() => {
                *node = Value::String(written.clone());
            }
            _ => {
                return Err(DecodeError {
                    field: render(&in_document),
                    line: source.and_then(|s| s.lines.get(&in_document).copied()),
                    message,
                })
            }
        }
    }
}

fn node_mut<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

/// The path of the node on `line` (1-based) of `value` pretty-printed by serde_json: a member's
/// or element's own line, or the closing line of an object or array (where serde_json reports a
/// missing field).
pub fn path_at_line(value: &Value, line: usize) -> Vec<Step> {
    let mut path = Vec::new();
    let mut at = 1;
    if locate(value, &mut at, line, &mut path) {
        path
    } else {
        Vec::new()
    }
}

/// `value` starts on line `*at`; on return `*at` is its last line. True when `target` was found
/// (then `path` leads to it).
fn locate(value: &Value, at: &mut usize, target: usize, path: &mut Vec<Step>) -> bool {
    if *at == target {
        return true;
    }
    let found = match value {
        Value::Object(map) if !map.is_empty() => map.iter().any(|(key, member)| {
            *at += 1;
            path.push(Step::Key(key.clone()));
            let found = locate(member, at, target, path);
            if !found {
                path.pop();
            }
            found
        }),
        Value::Array(items) if !items.is_empty() => items.iter().enumerate().any(|(i, item)| {
            *at += 1;
            path.push(Step::Index(i));
            let found = locate(item, at, target, path);
            if !found {
                path.pop();
            }
            found
        }),
        // Scalars and empty objects and arrays take one line.
        _ => return false,
    };
    if found {
        return true;
    }
    // The closing bracket.
    *at += 1;
    *at == target
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_yaml(yaml: &str) -> Result<Pod, DecodeError> {
        let (value, source) = yaml_tree(yaml).unwrap();
        decode_pod(value, Some(&source), &[])
    }

    /// Every line of a pretty-printed tree leads back to its node, closing lines included.
    #[test]
    fn lines_of_the_pretty_text_lead_to_their_nodes() {
        let value = serde_json::json!({
            "a": 1,
            "b": {"c": [10, {"d": true}], "e": {}},
            "f": []
        });
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let expected = [
            "",         // {
            "a",        //   "a": 1,
            "b",        //   "b": {
            "b.c",      //     "c": [
            "b.c[0]",   //       10,
            "b.c[1]",   //       {
            "b.c[1].d", //         "d": true
            "b.c[1]",   //       }
            "b.c",      //     ],
            "b.e",      //     "e": {}
            "b",        //   },
            "f",        //   "f": []
            "",         // }
        ];
        assert_eq!(pretty.lines().count(), expected.len(), "{pretty}");
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(render(&path_at_line(&value, i + 1)), *want, "line {}: {pretty}", i + 1);
        }
    }

    /// A field of the wrong type is named by its path.
    #[test]
    fn a_wrong_type_names_its_field() {
        let e = pod_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n    ports:\n    - containerPort: http\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.containers[0].ports[0].containerPort");
        assert_eq!(e.line, Some(9));
        assert!(
            e.message.starts_with("invalid type: string \"http\", expected i32"),
            "{e:?}"
        );
        let e = pod_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: {}\n").unwrap_err();
        assert_eq!(e.field, "spec.containers");
        assert_eq!(e.message, "invalid type: map, expected a sequence");
        let e = pod_yaml("just text").unwrap_err();
        assert_eq!(e.field, "");
    }

    /// Plain numbers and booleans where the API wants strings keep the text they were written
    /// as; quantities may be numbers.
    #[test]
    fn plain_scalars_are_read_as_written_where_strings_are_wanted() {
        let pod = pod_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {version: 1.10, on: yes, n: 0x1F}\nspec:\n  containers:\n  - name: c\n    image: i\n    command: [sleep, 3600]\n    env: [{name: A, value: 8080}]\n    resources: {limits: {cpu: 1, memory: 1.5}}\n",
        )
        .unwrap();
        let labels = pod.metadata.labels.unwrap();
        assert_eq!(labels["version"], "1.10");
        assert_eq!(labels["on"], "yes");
        assert_eq!(labels["n"], "0x1F");
        let c = &pod.spec.unwrap().containers[0];
        assert_eq!(c.command.as_deref().unwrap(), ["sleep", "3600"]);
        assert_eq!(c.env.as_ref().unwrap()[0].value.as_deref(), Some("8080"));
        let limits = c.resources.as_ref().unwrap().limits.as_ref().unwrap();
        assert_eq!(limits["cpu"].0, "1");
        assert_eq!(limits["memory"].0, "1.5");
    }

    /// A document marker, comments, anchors and aliases read as before: the tree holds the
    /// aliased values, and an alias's plain scalars keep their text.
    #[test]
    fn markers_comments_and_aliases_are_read() {
        let pod = pod_yaml(
            "---\n# a comment\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: &l {tier: 1.10}\n  annotations: *l\nspec:\n  containers:\n  - name: c # trailing\n    image: i\n",
        )
        .unwrap();
        assert_eq!(pod.metadata.labels.unwrap()["tier"], "1.10");
        assert_eq!(pod.metadata.annotations.unwrap()["tier"], "1.10");
        let merged = pod_yaml(
            "base: &b {image: i, command: [sleep, 60]}\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - <<: *b\n    name: c\n",
        )
        .unwrap();
        let c = &merged.spec.unwrap().containers[0];
        assert_eq!((c.name.as_str(), c.image.as_deref()), ("c", Some("i")), "merge keys");
        assert_eq!(c.command.as_deref().unwrap(), ["sleep", "60"]);
    }
}
