//! Text fit for one log line: values from tokens and other callers, and
//! errors with their sources.

/// A value from a token or another caller, fit for one log line: control
/// characters escaped (a newline cannot start a forged line), at most 200
/// characters.
pub fn escape(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == 200 {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// An error and its sources on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let message = s.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_fields_stay_on_one_line() {
        assert_eq!(
            escape("20261125T010203Z\nforged"),
            "20261125T010203Z\\nforged"
        );
        assert_eq!(escape("a\nb\r\u{1b}c"), "a\\nb\\r\\u{1b}c");
        assert_eq!(escape(&"x".repeat(500)).len(), 203);
    }
}
