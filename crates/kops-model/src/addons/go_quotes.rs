//! Scalar quoting as kops (Go's YAML emitter) writes it, where the emitter
//! kops-rs uses differs, fixed line by line after the fact:
//!
//! - strings YAML 1.1 reads as booleans (`on`, `off`, `yes`, `n`, ...) are
//!   double-quoted by Go, plain in YAML 1.2;
//! - strings starting with `#` (a comment if plain) are single-quoted by Go
//!   (`'#{query}'`), double-quoted here;
//! - digits with a leading zero (an AWS account, `099720109477`) are
//!   double-quoted by Go like every number-like string, single-quoted here.
//!
//! Block scalars (`|`) are left alone: their lines are text, not values.

/// The words YAML 1.1 reads as booleans that a YAML 1.2 emitter writes
/// plain (`true`/`false` are quoted by both).
const BOOLEAN_WORDS: [&str; 16] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// `text` with its scalar values quoted as Go quotes them.
pub(super) fn requote(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    // Inside a block scalar: the indent its content lines go deeper than.
    let mut block: Option<usize> = None;
    for line in text.split('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if let Some(owner) = block {
            if line.trim().is_empty() || indent > owner {
                out.push(line.to_string());
                continue;
            }
            block = None;
        }
        let Some((prefix, value)) = split(line) else {
            out.push(line.to_string());
            continue;
        };
        if value.starts_with(['|', '>']) {
            block = Some(indent);
            out.push(line.to_string());
            continue;
        }
        out.push(match requote_value(value) {
            Some(value) => format!("{prefix}{value}"),
            None => line.to_string(),
        });
    }
    out.join("\n")
}

/// A line's scalar value and what precedes it (`key: ` or `- `), when the
/// line has one.
fn split(line: &str) -> Option<(&str, &str)> {
    let mut rest = line.trim_start_matches(' ');
    while let Some(item) = rest.strip_prefix("- ") {
        rest = item;
    }
    if rest.starts_with(['"', '\'']) {
        // A quoted list item (or a quoted key, left alone).
        let start = line.len() - rest.len();
        let is_item = line[..start].trim_end().ends_with('-');
        return is_item.then(|| line.split_at(start));
    }
    match rest.find(": ") {
        Some(i) => {
            let start = line.len() - rest.len() + i + 2;
            Some(line.split_at(start))
        }
        None if rest.len() < line.trim_start_matches(' ').len() && !rest.ends_with(':') => {
            Some(line.split_at(line.len() - rest.len()))
        }
        None => None,
    }
}

/// `value` quoted as Go writes it, when it differs.
fn requote_value(value: &str) -> Option<String> {
    if BOOLEAN_WORDS.contains(&value) {
        return Some(format!("\"{value}\""));
    }
    if let Some(digits) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Some(format!("\"{digits}\""));
        }
    }
    let inner = value.strip_prefix("\"#")?.strip_suffix('"')?;
    if inner.contains(['\\', '"']) {
        return None;
    }
    Some(format!("'#{}'", inner.replace('\'', "''")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_go_does() {
        let text = "a: on\nb:\n- off\n- \"#{query}\"\nc: \"#x\"\nd: one\ne: |\n  on\n  - no\nf: No\ng: '099'";
        assert_eq!(
            requote(text),
            "a: \"on\"\nb:\n- \"off\"\n- '#{query}'\nc: '#x'\nd: one\ne: |\n  on\n  - no\nf: \"No\"\ng: \"099\""
        );
    }
}
