//! `--cloud-labels`, `--feature-gates` and list flags as kops reads them.

use std::collections::BTreeMap;

/// Parses `--cloud-labels`: `KEY=VALUE` pairs separated by commas; a key or
/// value holding `=` is written in double quotes (`dn="cn=x"`, `""` for a
/// quote). Leading spaces of keys and values are dropped. Commas cannot be
/// escaped.
pub fn parse_cloud_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    // Each comma ends a record, like a line of a CSV file whose separator is `=`.
    let records = text.replace(',', "\n");
    let chars: Vec<char> = records.chars().collect();
    let mut labels = BTreeMap::new();
    let mut i = 0;
    let mut record_no = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            i += 1;
            continue;
        }
        record_no += 1;
        let mut fields: Vec<String> = Vec::new();
        loop {
            while i < chars.len() && chars[i] != '\n' && chars[i].is_whitespace() {
                i += 1;
            }
            let mut field = String::new();
            if i < chars.len() && chars[i] == '"' {
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(format!("pair {record_no}: a quoted text is not closed"))
                        }
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            field.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(c) => {
                            // A comma inside quotes became a record break above.
                            field.push(if *c == '\n' { ',' } else { *c });
                            i += 1;
                        }
                    }
                }
                if let Some(c) = chars.get(i) {
                    if *c != '=' && *c != '\n' {
                        return Err(format!(
                            "pair {record_no}: unexpected `{c}` after a closing quote"
                        ));
                    }
                }
            } else {
                while i < chars.len() && chars[i] != '=' && chars[i] != '\n' {
                    if chars[i] == '"' {
                        return Err(format!(
                            "pair {record_no}: a quote inside an unquoted key or value; quote the whole text"
                        ));
                    }
                    field.push(chars[i]);
                    i += 1;
                }
            }
            fields.push(field);
            match chars.get(i) {
                Some('=') => i += 1,
                _ => break,
            }
        }
        if fields.len() != 2 {
            let shown: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
            return Err(format!(
                "pair {record_no} has {} part(s) ({}), expected KEY=VALUE",
                fields.len(),
                shown.join(" = ")
            ));
        }
        let value = fields.pop().unwrap_or_default();
        let key = fields.pop().unwrap_or_default();
        labels.insert(key, value);
    }
    Ok(labels)
}

/// Parses one `--kubernetes-feature-gates` entry: `Name` or `+Name` switch a
/// gate on, `-Name` switches it off.
pub fn parse_feature_gate(text: &str) -> Result<(String, bool), String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("a feature gate is empty".into());
    }
    let (name, enabled) = match t.as_bytes()[0] {
        b'+' => (t[1..].trim(), true),
        b'-' => (t[1..].trim(), false),
        _ => (t, true),
    };
    if name.is_empty() {
        return Err(format!("`{t}` names no feature gate"));
    }
    Ok((name.to_string(), enabled))
}

/// A flag's value, trimmed; `None` when unset or blank.
pub(super) fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// A list flag's values, trimmed, blanks dropped.
pub(super) fn clean_list(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
