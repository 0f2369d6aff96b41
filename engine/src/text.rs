//! What text the stores can hold: any Unicode except U+0000. PostgreSQL refuses the NUL
//! character in `text` and `jsonb` alike, so the engine refuses it at the door, naming
//! where it was, on every store (SQLite could hold it; the two stores answer alike).

use serde_json::Value;

/// Where in `value` the first NUL character is, as a path from `root` (`input.notes[2]`,
/// or `input` itself), or `None` when the value can be stored. Object keys count too:
/// a key holding a NUL is named with the NUL written as `\u0000`.
pub fn nul_in_json(value: &Value, root: &str) -> Option<String> {
    match value {
        Value::String(s) if has_nul(s) => Some(root.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_in_json(item, &format!("{root}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let path = if root.is_empty() {
                printable(key)
            } else {
                format!("{root}.{}", printable(key))
            };
            if has_nul(key) {
                Some(path)
            } else {
                nul_in_json(item, &path)
            }
        }),
        _ => None,
    }
}

/// Whether `text` holds a NUL character.
pub fn has_nul(text: &str) -> bool {
    text.contains('\0')
}

/// `text` with each NUL written as `\u0000`, fit to appear in a message or a stored error.
pub fn printable(text: &str) -> String {
    text.replace('\0', "\\u0000")
}

/// The message of an `invalid_request` naming `field`, which holds a NUL character.
pub fn nul_message(field: &str) -> String {
    format!("{field}: contains the character U+0000 (\\u0000), which cannot be stored")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_nul_is_named_by_its_path() {
        assert_eq!(
            nul_in_json(&json!({"a": [1, "x\u{0}"]}), "input").as_deref(),
            Some("input.a[1]")
        );
        assert_eq!(
            nul_in_json(&json!({"k\u{0}": 1}), "input").as_deref(),
            Some("input.k\\u0000")
        );
        assert_eq!(
            nul_in_json(&json!("\u{0}"), "result").as_deref(),
            Some("result")
        );
        assert_eq!(nul_in_json(&json!({"a": "é ✓ \u{1}"}), "input"), None);
        assert_eq!(
            nul_in_json(&json!({"a": {"b": "\u{0}"}}), "").as_deref(),
            Some("a.b")
        );
    }
}
